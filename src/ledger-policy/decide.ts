// How the rules of the policies that name a caller decide a call (pure). Deny rules first: one that
// touches the call (any of its parties, templates, choices, packages or rights) refuses it. Then the
// allow rules: the call passes when rules cover it (every party, package, right and read template
// it names) and every command is covered by one of them; otherwise it is refused by default.
import { celInput, type CelActivation, type CelInput } from './cel.js';
import type { CommandFacts, DecisionDocument, PrincipalFacts, ReadFacts } from './document.js';
import { anyPartyMatches, anyTemplateMatches, type PartyPattern } from './matchers.js';
import { candidateRules, type IndexedPolicy } from './rule-index.js';
import type { CompiledRule, Verdict } from './rules.js';

export type { Verdict } from './rules.js';

/**
 * A decision's time in ms since the epoch, or the clock to read it from the first time something reads
 * it: a configuration without time windows reads no clock per decision (only a CEL `now` does).
 */
export type DecisionTime = number | (() => number);

/** A decision's CEL activation: its input (and `now`) built at most once, and only for cel-js. */
class Conditions implements CelActivation {
  #input: CelInput | undefined;
  constructor(
    readonly document: DecisionDocument,
    private readonly time: DecisionTime,
  ) {}
  input(): CelInput {
    return (this.#input ??= celInput(this.document, typeof this.time === 'number' ? this.time : this.time()));
  }
  holds(rule: CompiledRule): 'true' | 'false' | 'error' {
    if (rule.where === undefined) return 'true';
    try {
      return rule.where.on(this) ? 'true' : 'false';
    } catch {
      return 'error';
    }
  }
}

function inWindow(entry: { notBefore: number | undefined; notAfter: number | undefined }, time: DecisionTime): boolean {
  if (entry.notBefore === undefined && entry.notAfter === undefined) return true;
  const now = typeof time === 'number' ? time : time();
  return (
    (entry.notBefore === undefined || now >= entry.notBefore) && (entry.notAfter === undefined || now < entry.notAfter)
  );
}

export function operationMatches(rule: CompiledRule, document: DecisionDocument): boolean {
  const operations = rule.operations;
  return (
    operations === undefined ||
    operations.has(document.operation) ||
    operations.has(document.writes ? 'writes' : 'reads')
  );
}

/** Whether every party of the lists is one a pattern names (no patterns: true). */
function everyParty(
  patterns: readonly PartyPattern[] | undefined,
  principal: PrincipalFacts,
  parties: readonly string[],
  more: readonly string[] = NONE,
): boolean {
  if (patterns === undefined) return true;
  for (const party of parties) if (!anyPartyMatches(patterns, party, principal)) return false;
  for (const party of more) if (!anyPartyMatches(patterns, party, principal)) return false;
  return true;
}

/** Whether some party of the lists is one a pattern names. */
function someParty(
  patterns: readonly PartyPattern[],
  principal: PrincipalFacts,
  parties: readonly string[],
  more: readonly string[] = NONE,
): boolean {
  for (const party of parties) if (anyPartyMatches(patterns, party, principal)) return true;
  for (const party of more) if (anyPartyMatches(patterns, party, principal)) return true;
  return false;
}

const NONE: readonly string[] = [];

function anyParty(patterns: readonly PartyPattern[] | undefined): boolean {
  if (patterns === undefined) return true;
  for (const pattern of patterns) if (pattern.kind === 'any') return true;
  return false;
}

function everyTemplate(rule: CompiledRule): boolean {
  for (const pattern of rule.templates ?? [])
    if (pattern.packageName === undefined && pattern.packageId === undefined) return true;
  return false;
}

/** Whether an allow rule covers the read: all its parties and templates. */
function readCovered(rule: CompiledRule, read: ReadFacts | undefined): boolean {
  if (read === undefined) return true;
  if (read.anyParty && !(anyParty(rule.parties) && anyParty(rule.readAs))) return false;
  const templates = rule.templates;
  if (templates === undefined) return true;
  if (read.wildcard) return everyTemplate(rule);
  for (const template of read.templates) if (!anyTemplateMatches(templates, template)) return false;
  for (const template of read.interfaces) if (!anyTemplateMatches(templates, template)) return false;
  return true;
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

function packagesCovered(names: ReadonlySet<string> | undefined, document: DecisionDocument): boolean {
  if (names === undefined || names.has('*')) return true;
  for (const pkg of document.packages) if (pkg.packageName === '' || !names.has(pkg.packageName)) return false;
  return true;
}

function rightsCovered(kinds: ReadonlySet<string> | undefined, document: DecisionDocument): boolean {
  if (kinds === undefined) return true;
  for (const right of document.rights) if (!kinds.has(right.kind)) return false;
  return true;
}

type PartyJudge = (
  patterns: readonly PartyPattern[],
  document: DecisionDocument,
  parties: readonly string[],
  more?: readonly string[],
) => boolean;

/** Whether an allow rule's party list names every party of the lists. */
const coversParties: PartyJudge = (patterns, document, parties, more) =>
  everyParty(patterns, document.principal, parties, more);

/**
 * The rule's three party lists, each it gives judged against the call's parties (all, act-as,
 * read-as with a read's): `coversParties` for an allow rule, `touchesParties` for a deny rule.
 */
function partyListsHold(rule: CompiledRule, document: DecisionDocument, judge: PartyJudge): boolean {
  return (
    (rule.parties === undefined || judge(rule.parties, document, document.parties.all)) &&
    (rule.actAs === undefined || judge(rule.actAs, document, document.parties.actAs)) &&
    (rule.readAs === undefined || judge(rule.readAs, document, document.parties.readAs, document.read?.parties))
  );
}

/**
 * Call-level coverage of an allow rule (its command matchers are judged per command). Its operations
 * are not judged again: a candidate rule was found by the call's operation (rule-index.ts).
 */
function allowCovers(rule: CompiledRule, document: DecisionDocument): boolean {
  if (!aboutTheCall(rule, document)) return false;
  // A matcher the rule does not give is not judged at all (most rules give two or three).
  return (
    partyListsHold(rule, document, coversParties) &&
    (rule.packages === undefined || packagesCovered(rule.packages, document)) &&
    (rule.rights === undefined || rightsCovered(rule.rights, document)) &&
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
  const templates = rule.templates;
  if (read === undefined || templates === undefined || rule.choices !== undefined || rule.commandKinds !== undefined)
    return false;
  if (read.wildcard) return true;
  for (const template of read.templates) if (anyTemplateMatches(templates, template)) return true;
  for (const template of read.interfaces) if (anyTemplateMatches(templates, template)) return true;
  return false;
}

/** Whether a deny rule's party list touches the call: any party it names, or any party a read asks for. */
const touchesParties: PartyJudge = (patterns, document, parties, more) =>
  (document.read?.anyParty ?? false) || someParty(patterns, document.principal, parties, more);

function packagesTouched(names: ReadonlySet<string> | undefined, document: DecisionDocument): boolean {
  if (names === undefined) return true;
  for (const pkg of document.packages)
    if (pkg.packageName === '' || names.has('*') || names.has(pkg.packageName)) return true;
  return false;
}

function rightsTouched(kinds: ReadonlySet<string> | undefined, document: DecisionDocument): boolean {
  if (kinds === undefined) return true;
  for (const right of document.rights) if (kinds.has(right.kind)) return true;
  return false;
}

function commandsTouched(rule: CompiledRule, document: DecisionDocument): boolean {
  if (!hasCommandMatchers(rule)) return true;
  for (const command of document.commands) if (commandMatches(rule, command)) return true;
  return readTouched(rule, document.read);
}

/** Whether a deny rule touches the call: any of what it lists (its operations: as allowCovers). */
function denyTouches(rule: CompiledRule, document: DecisionDocument): boolean {
  return (
    partyListsHold(rule, document, touchesParties) &&
    (rule.packages === undefined || packagesTouched(rule.packages, document)) &&
    (rule.rights === undefined || rightsTouched(rule.rights, document)) &&
    commandsTouched(rule, document)
  );
}

function describeCommand(command: CommandFacts, index: number): string {
  const template = command.template?.templateId ?? '(no template)';
  return `commands[${index}] (${command.kind} ${template}${command.choice === '' ? '' : ` ${command.choice}`})`;
}

/** The refusal when no allow rule covers the call (deny by default). */
const byDefault = (policies: readonly IndexedPolicy[], reason: string): Verdict => ({
  effect: 'deny',
  policy: policies[0]!.policy.name,
  rule: 'default',
  reason,
});

/** The first deny rule that holds, else the allow rules' verdict. */
function allowVerdict(
  allow: readonly CompiledRule[],
  document: DecisionDocument,
  policies: readonly IndexedPolicy[],
): Verdict {
  if (allow.length === 0)
    return byDefault(policies, `no allow rule of ${policies.map((p) => p.policy.name).join(', ')} covers the call`);
  if (document.commands.length === 0) return allow[0]!.verdicts.coversTheCall;
  const commands = document.commands;
  if (commands.length === 1) {
    const rule = coveringRule(allow, commands[0]!);
    return rule === undefined
      ? byDefault(policies, `no allow rule covers ${describeCommand(commands[0]!, 0)}`)
      : rule.verdicts.coversEveryCommand;
  }
  const used: CompiledRule[] = [];
  for (let index = 0; index < commands.length; index++) {
    const rule = coveringRule(allow, commands[index]!);
    if (rule === undefined)
      return byDefault(policies, `no allow rule covers ${describeCommand(commands[index]!, index)}`);
    if (!used.includes(rule)) used.push(rule);
  }
  if (used.length === 1) return used[0]!.verdicts.coversEveryCommand;
  const names = used.map((rule) => rule.name).join(',');
  return { effect: 'allow', policy: used[0]!.policy, rule: names, reason: `${names} cover every command` };
}

/** The first allow rule whose command matchers name the command. */
function coveringRule(allow: readonly CompiledRule[], command: CommandFacts): CompiledRule | undefined {
  for (const rule of allow) if (commandMatches(rule, command)) return rule;
  return undefined;
}

/** The verdict of `policies` (all naming the caller) on the document at `time`. */
export function decideWith(
  policies: readonly IndexedPolicy[],
  document: DecisionDocument,
  time: DecisionTime,
): Verdict {
  const first = policies[0]!.policy.name;
  if (document.unreadable > 0)
    return {
      effect: 'deny',
      policy: first,
      rule: 'unreadable',
      reason: `${document.unreadable} part(s) of the call cannot be read`,
    };
  // Made only when a rule with a condition gets that far; the covering rules listed only from the second.
  let conditions: Conditions | undefined;
  let allow: readonly CompiledRule[] = NO_RULES;
  for (const indexed of policies) {
    const policyOpen = inWindow(indexed.policy, time);
    for (const rule of candidateRules(indexed, document)) {
      if (!inWindow(rule, time)) continue;
      if (rule.effect === 'deny') {
        if (
          denyTouches(rule, document) &&
          (rule.where === undefined || (conditions ??= new Conditions(document, time)).holds(rule) !== 'false')
        )
          return rule.verdicts.holds;
      } else if (
        policyOpen &&
        allowCovers(rule, document) &&
        (rule.where === undefined || (conditions ??= new Conditions(document, time)).holds(rule) === 'true')
      ) {
        allow = allow.length === 0 ? rule.alone : [...allow, rule];
      }
    }
  }
  return allowVerdict(allow, document, policies);
}

const NO_RULES: readonly CompiledRule[] = [];
