// How the rules of the policies that name a caller decide a call (pure). Deny rules first: one that
// touches the call (any of its parties, templates, choices, packages or rights) refuses it. Then the
// allow rules: the call passes when rules cover it (every party, package, right and read template
// it names) and every command is covered by one of them; otherwise it is refused by default.
import { celInput, type CelInput } from './cel.js';
import type { CommandFacts, DecisionDocument, PrincipalFacts, ReadFacts } from './document.js';
import { anyPartyMatches, anyTemplateMatches, type PartyPattern } from './matchers.js';
import { candidateRules, type IndexedPolicy } from './rule-index.js';
import type { CompiledRule } from './rules.js';

export interface Verdict {
  readonly effect: 'allow' | 'deny';
  readonly policy: string;
  /** The rule that decided; `default` (no allow rule covers the call), `unreadable`, `unresolved-package`. */
  readonly rule: string;
  /** Why, for the log and `policy test` (never sent to the caller). */
  readonly reason: string;
}

/** Evaluates the CEL input at most once per decision. */
class Conditions {
  private input: CelInput | undefined;
  constructor(
    private readonly document: DecisionDocument,
    private readonly now: Date,
  ) {}
  holds(rule: CompiledRule): 'true' | 'false' | 'error' {
    if (rule.where === undefined) return 'true';
    try {
      return rule.where((this.input ??= celInput(this.document, this.now))) ? 'true' : 'false';
    } catch {
      return 'error';
    }
  }
}

const inWindow = (entry: { notBefore: number | undefined; notAfter: number | undefined }, now: number) =>
  (entry.notBefore === undefined || now >= entry.notBefore) && (entry.notAfter === undefined || now < entry.notAfter);

export function operationMatches(rule: CompiledRule, document: DecisionDocument): boolean {
  const operations = rule.operations;
  return (
    operations === undefined ||
    operations.has(document.operation) ||
    operations.has(document.writes ? 'writes' : 'reads')
  );
}

type Quantifier = 'every' | 'some';

function partiesMatch(
  patterns: readonly PartyPattern[] | undefined,
  parties: readonly string[],
  principal: PrincipalFacts,
  quantifier: Quantifier,
): boolean {
  if (patterns === undefined) return true;
  const matches = (party: string) => anyPartyMatches(patterns, party, principal);
  return quantifier === 'every' ? parties.every(matches) : parties.some(matches);
}

const anyParty = (patterns: readonly PartyPattern[] | undefined) =>
  patterns === undefined || patterns.some((pattern) => pattern.kind === 'any');

const everyTemplate = (rule: CompiledRule) =>
  rule.templates?.some((p) => p.packageName === undefined && p.packageId === undefined) === true;

/** Whether an allow rule covers the read: all its parties and templates. */
function readCovered(rule: CompiledRule, read: ReadFacts | undefined): boolean {
  if (read === undefined) return true;
  if (read.anyParty && !(anyParty(rule.parties) && anyParty(rule.readAs))) return false;
  if (rule.templates === undefined) return true;
  if (read.wildcard) return everyTemplate(rule);
  return [...read.templates, ...read.interfaces].every((template) => anyTemplateMatches(rule.templates!, template));
}

/**
 * Whether the call carries what the rule is about: a rule that lists rights covers only calls that
 * grant or revoke some, packages only calls that upload or vet some, choices or command kinds only
 * calls with commands, templates only calls with commands or a read (else `rights: [CanReadAs]`
 * would cover every call without rights).
 */
function aboutTheCall(rule: CompiledRule, document: DecisionDocument): boolean {
  if (rule.rights !== undefined && document.rights.length === 0) return false;
  if (rule.packages !== undefined && document.packages.length === 0) return false;
  if ((rule.choices !== undefined || rule.commandKinds !== undefined) && document.commands.length === 0) return false;
  return rule.templates === undefined || document.commands.length > 0 || document.read !== undefined;
}

/** Call-level coverage of an allow rule (its command matchers are judged per command). */
function allowCovers(rule: CompiledRule, document: DecisionDocument): boolean {
  const { parties, principal } = document;
  if (!aboutTheCall(rule, document)) return false;
  const readParties = document.read?.parties ?? [];
  return (
    operationMatches(rule, document) &&
    partiesMatch(rule.parties, parties.all, principal, 'every') &&
    partiesMatch(rule.actAs, parties.actAs, principal, 'every') &&
    (rule.readAs === undefined || partiesMatch(rule.readAs, [...parties.readAs, ...readParties], principal, 'every')) &&
    (rule.packages === undefined ||
      rule.packages.has('*') ||
      document.packages.every((p) => p.packageName !== '' && rule.packages!.has(p.packageName))) &&
    (rule.rights === undefined || document.rights.every((right) => rule.rights!.has(right.kind))) &&
    readCovered(rule, document.read)
  );
}

/** Whether a command is what the rule's command matchers name (all those given). */
function commandMatches(rule: CompiledRule, command: CommandFacts): boolean {
  if (rule.commandKinds !== undefined && !rule.commandKinds.has(command.kind)) return false;
  if (rule.choices !== undefined && !rule.choices.has(command.choice)) return false;
  if (rule.templates === undefined) return true;
  return command.template !== undefined && anyTemplateMatches(rule.templates, command.template);
}

const hasCommandMatchers = (rule: CompiledRule) =>
  rule.templates !== undefined || rule.choices !== undefined || rule.commandKinds !== undefined;

function readTouched(rule: CompiledRule, read: ReadFacts | undefined): boolean {
  if (
    read === undefined ||
    rule.templates === undefined ||
    rule.choices !== undefined ||
    rule.commandKinds !== undefined
  )
    return false;
  if (read.wildcard) return true;
  return [...read.templates, ...read.interfaces].some((template) => anyTemplateMatches(rule.templates!, template));
}

/** Whether a deny rule touches the call: any of what it lists. */
function denyTouches(rule: CompiledRule, document: DecisionDocument): boolean {
  const { parties, principal, read } = document;
  const touchesParties = (patterns: readonly PartyPattern[] | undefined, list: readonly string[]) =>
    patterns === undefined || (read?.anyParty ?? false) || partiesMatch(patterns, list, principal, 'some');
  return (
    operationMatches(rule, document) &&
    touchesParties(rule.parties, parties.all) &&
    touchesParties(rule.actAs, parties.actAs) &&
    (rule.readAs === undefined || touchesParties(rule.readAs, [...parties.readAs, ...(read?.parties ?? [])])) &&
    (rule.packages === undefined ||
      document.packages.some(
        (p) => p.packageName === '' || rule.packages!.has('*') || rule.packages!.has(p.packageName),
      )) &&
    (rule.rights === undefined || document.rights.some((right) => rule.rights!.has(right.kind))) &&
    (!hasCommandMatchers(rule) ||
      document.commands.some((command) => commandMatches(rule, command)) ||
      readTouched(rule, read))
  );
}

function describeCommand(command: CommandFacts, index: number): string {
  const template = command.template?.templateId ?? '(no template)';
  return `commands[${index}] (${command.kind} ${template}${command.choice === '' ? '' : ` ${command.choice}`})`;
}

/** The first deny rule that holds, else the allow rules' verdict. */
function allowVerdict(
  allow: readonly CompiledRule[],
  document: DecisionDocument,
  policies: readonly IndexedPolicy[],
): Verdict {
  const deny = (reason: string): Verdict => ({
    effect: 'deny',
    policy: policies[0]!.policy.name,
    rule: 'default',
    reason,
  });
  if (allow.length === 0)
    return deny(`no allow rule of ${policies.map((p) => p.policy.name).join(', ')} covers the call`);
  if (document.commands.length === 0) {
    const rule = allow[0]!;
    return { effect: 'allow', policy: rule.policy, rule: rule.name, reason: `${rule.name} covers the call` };
  }
  const used: CompiledRule[] = [];
  for (const [index, command] of document.commands.entries()) {
    const rule = allow.find((candidate) => commandMatches(candidate, command));
    if (rule === undefined) return deny(`no allow rule covers ${describeCommand(command, index)}`);
    if (!used.includes(rule)) used.push(rule);
  }
  const names = used.map((rule) => rule.name).join(',');
  return { effect: 'allow', policy: used[0]!.policy, rule: names, reason: `${names} cover every command` };
}

/** The verdict of `policies` (all naming the caller) on the document at `now`. */
export function decideWith(policies: readonly IndexedPolicy[], document: DecisionDocument, now: Date): Verdict {
  const first = policies[0]!.policy.name;
  if (document.unreadable > 0)
    return {
      effect: 'deny',
      policy: first,
      rule: 'unreadable',
      reason: `${document.unreadable} part(s) of the call cannot be read`,
    };
  const time = now.getTime();
  const conditions = new Conditions(document, now);
  const allow: CompiledRule[] = [];
  for (const indexed of policies) {
    const policyOpen = inWindow(indexed.policy, time);
    for (const rule of candidateRules(indexed, document)) {
      if (!inWindow(rule, time)) continue;
      if (rule.effect === 'deny') {
        if (denyTouches(rule, document) && conditions.holds(rule) !== 'false')
          return { effect: 'deny', policy: rule.policy, rule: rule.name, reason: `deny rule ${rule.name} holds` };
      } else if (policyOpen && allowCovers(rule, document) && conditions.holds(rule) === 'true') {
        allow.push(rule);
      }
    }
  }
  return allowVerdict(allow, document, policies);
}
