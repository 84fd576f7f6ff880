// The ledgerPolicy section compiled: each policy's principal matcher, its rules' patterns and CEL
// conditions. Every problem is named with its key path, so that a start or a reload refuses a wrong
// policy before it could decide anything.
import proxyAddr from '@fastify/proxy-addr';
import type {
  LedgerBreakGlassConfig,
  LedgerPolicyConfig,
  LedgerPolicyEntryConfig,
  LedgerPrincipalsConfig,
  LedgerRuleConfig,
} from '../config/schema.js';
import { sameName } from '../exchange/client-certificate.js';
import type { LedgerDecisionNote } from '../exchange/exchange.js';
import { OPERATION_NAMES } from '../operations.js';
import { compileCondition, type CelCondition } from './cel.js';
import type { PrincipalFacts } from './document.js';
import { partyPattern, templatePattern, type PartyPattern, type TemplatePattern } from './matchers.js';

/**
 * The parts of a call a rule or a policy reads, for replay over an audit trail, whose records keep
 * less than a call carries (never the token's claims; arguments only at level body).
 */
export type Fact = 'claims' | 'certificate' | 'consumer' | 'parties' | 'commands' | 'arguments' | 'packages' | 'rights';

/** What a CEL condition reads, by the document fields it names. */
function conditionNeeds(expression: string): Fact[] {
  const needs: Fact[] = [];
  const names = (pattern: RegExp, fact: Fact) => pattern.test(expression) && needs.push(fact);
  names(/\bclaims\b/, 'claims');
  names(/\bcertificate(Subject|DnsNames)\b/, 'certificate');
  names(/\bconsumer\b/, 'consumer');
  names(/\b(parties|read)\b/, 'parties');
  names(/\b(commands|disclosedContracts)\b/, 'commands');
  names(/\b(createArguments|choiceArgument|contractKey)\b/, 'arguments');
  names(/\bpackages\b/, 'packages');
  names(/\brights\b/, 'rights');
  return needs;
}

function ruleNeeds(rule: LedgerRuleConfig): ReadonlySet<Fact> {
  const needs = new Set<Fact>(rule.where === undefined ? [] : conditionNeeds(rule.where));
  const partyLists = [rule.parties, rule.actAs, rule.readAs].filter((list) => list !== undefined);
  if (partyLists.length > 0) needs.add('parties');
  if (partyLists.some((list) => list.some((party) => party.startsWith('$claims.')))) needs.add('claims');
  if (rule.templates !== undefined || rule.choices !== undefined || rule.commandKinds !== undefined)
    needs.add('commands');
  if (rule.packages !== undefined) needs.add('packages');
  if (rule.rights !== undefined) needs.add('rights');
  return needs;
}

function principalNeeds(principals: LedgerPrincipalsConfig): ReadonlySet<Fact> {
  const needs = new Set<Fact>();
  if (principals.claims !== undefined) needs.add('claims');
  if (principals.certificateSubjects !== undefined || principals.certificateDnsNames !== undefined)
    needs.add('certificate');
  if (principals.consumers !== undefined) needs.add('consumer');
  return needs;
}

/** The decision on a call (ledger-policy.ts). */
export interface Decision {
  /** none: no policy names the caller; breakGlass: a break-glass entry names it (allowed everything). */
  readonly effect: 'allow' | 'deny' | 'none' | 'breakGlass';
  readonly policy: string;
  readonly rule: string;
  readonly reason: string;
  /** dryRun: a dry-run policy made the decision: recorded and counted, never enforced. */
  readonly mode: 'enforce' | 'dryRun';
  /** A rule's own decision's note, made with it (not enumerable: the decision reads as the five fields above). */
  readonly note?: LedgerDecisionNote;
}

/** What decided a call (decide.ts). */
export interface Verdict {
  readonly effect: 'allow' | 'deny';
  readonly policy: string;
  /** The rule that decided; `default` (no allow rule covers the call), `unreadable`, `unresolved-package`. */
  readonly rule: string;
  /** Why, for the log and `policy test` (never sent to the caller). */
  readonly reason: string;
  /** A rule's own verdict's decision in each mode, made with it (ledger-policy.ts). */
  readonly decisions?: Readonly<Record<Decision['mode'], Decision>>;
}

/** A rule's own verdicts, the same for every call it decides: made with the rule, with their decisions and notes. */
export interface RuleVerdicts {
  readonly holds: Verdict;
  readonly coversTheCall: Verdict;
  readonly coversEveryCommand: Verdict;
}

/** A rule's own decision in `mode`, frozen, with its note (stage.ts: the access log, the audit record, the metric). */
function fixedDecision(verdict: Omit<Verdict, 'decisions'>, mode: Decision['mode']): Decision {
  const { effect, policy, rule, reason } = verdict;
  const decision: Decision = { effect, policy, rule, reason, mode };
  const note: LedgerDecisionNote = Object.freeze({ decision: effect, policy, rule, mode });
  Object.defineProperty(decision, 'note', { value: note, enumerable: false });
  return Object.freeze(decision);
}

function fixedVerdict(effect: Verdict['effect'], policy: string, rule: string, reason: string): Verdict {
  const verdict = { effect, policy, rule, reason };
  const decisions = { enforce: fixedDecision(verdict, 'enforce'), dryRun: fixedDecision(verdict, 'dryRun') };
  return Object.freeze({ ...verdict, decisions: Object.freeze(decisions) });
}

function verdictsOf(policy: string, name: string): RuleVerdicts {
  return {
    holds: fixedVerdict('deny', policy, name, `deny rule ${name} holds`),
    coversTheCall: fixedVerdict('allow', policy, name, `${name} covers the call`),
    coversEveryCommand: fixedVerdict('allow', policy, name, `${name} cover every command`),
  };
}

export interface CompiledRule {
  readonly name: string;
  /** What of a call the rule reads. */
  readonly needs: ReadonlySet<Fact>;
  readonly policy: string;
  readonly effect: 'allow' | 'deny';
  readonly operations: ReadonlySet<string> | undefined;
  readonly parties: readonly PartyPattern[] | undefined;
  readonly actAs: readonly PartyPattern[] | undefined;
  readonly readAs: readonly PartyPattern[] | undefined;
  readonly templates: readonly TemplatePattern[] | undefined;
  readonly choices: ReadonlySet<string> | undefined;
  readonly commandKinds: ReadonlySet<string> | undefined;
  /** Package names; '*' covers any package, an uploaded archive included. */
  readonly packages: ReadonlySet<string> | undefined;
  readonly rights: ReadonlySet<string> | undefined;
  /** Milliseconds since the epoch. */
  readonly notBefore: number | undefined;
  readonly notAfter: number | undefined;
  readonly where: CelCondition | undefined;
  readonly verdicts: RuleVerdicts;
  /** The list of this rule alone: the allow rules covering a call, when it is the only one (decide.ts). */
  readonly alone: readonly CompiledRule[];
}

export interface CompiledPolicy {
  readonly name: string;
  /** What of a caller its principal matcher reads beyond the subject, issuer and address. */
  readonly needs: ReadonlySet<Fact>;
  readonly dryRun: boolean;
  /** The subjects the policy names, for the index (undefined: it names callers by other matchers only). */
  readonly subjects: ReadonlySet<string> | undefined;
  names(principal: PrincipalFacts): boolean;
  readonly notBefore: number | undefined;
  readonly notAfter: number | undefined;
  readonly rules: readonly CompiledRule[];
}

/** A break-glass entry: the callers it names are allowed everything while it holds. */
export interface CompiledBreakGlass {
  readonly name: string;
  readonly needs: ReadonlySet<Fact>;
  names(principal: PrincipalFacts): boolean;
  readonly notBefore: number | undefined;
  readonly notAfter: number | undefined;
}

export const OPERATION_GROUPS: ReadonlySet<string> = new Set(['reads', 'writes']);

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

/** Milliseconds of an RFC 3339 time, or undefined (absent); a wrong one is a problem. */
function instant(text: string | undefined, at: string, problems: string[]): number | undefined {
  if (text === undefined) return undefined;
  const time = Date.parse(text);
  if (!RFC3339.test(text) || Number.isNaN(time)) {
    problems.push(`${at}: "${text}" is not an RFC 3339 time (e.g. 2026-10-01T00:00:00Z)`);
    return undefined;
  }
  return time;
}

function window(
  entry: { notBefore?: string; notAfter?: string },
  at: string,
  problems: string[],
): { notBefore: number | undefined; notAfter: number | undefined } {
  const notBefore = instant(entry.notBefore, `${at}.notBefore`, problems);
  const notAfter = instant(entry.notAfter, `${at}.notAfter`, problems);
  if (notBefore !== undefined && notAfter !== undefined && notBefore >= notAfter)
    problems.push(`${at}: notBefore is not before notAfter`);
  return { notBefore, notAfter };
}

function patterns<T>(
  list: readonly string[] | undefined,
  compile: (text: string) => T | string,
  at: string,
  problems: string[],
): T[] | undefined {
  if (list === undefined) return undefined;
  const compiled: T[] = [];
  list.forEach((text, index) => {
    const pattern = compile(text);
    if (typeof pattern === 'string') problems.push(`${at}[${index}]: ${pattern}`);
    else compiled.push(pattern);
  });
  return compiled;
}

const asSet = (list: readonly string[] | undefined) => (list === undefined ? undefined : new Set(list));

function compileRule(rule: LedgerRuleConfig, policy: string, at: string, problems: string[]): CompiledRule {
  for (const operation of rule.operations ?? []) {
    if (!OPERATION_NAMES.includes(operation) && !OPERATION_GROUPS.has(operation))
      problems.push(`${at}.operations: unknown operation "${operation}" (an operation name, "reads" or "writes")`);
  }
  let where: CelCondition | undefined;
  if (rule.where !== undefined) {
    const condition = compileCondition(rule.where);
    if (typeof condition === 'function') where = condition;
    else problems.push(`${at}.where: ${condition.problem}`);
  }
  const compiled = {
    name: rule.name,
    needs: ruleNeeds(rule),
    policy,
    effect: rule.effect,
    operations: asSet(rule.operations),
    parties: patterns(rule.parties, partyPattern, `${at}.parties`, problems),
    actAs: patterns(rule.actAs, partyPattern, `${at}.actAs`, problems),
    readAs: patterns(rule.readAs, partyPattern, `${at}.readAs`, problems),
    templates: patterns(rule.templates, templatePattern, `${at}.templates`, problems),
    choices: asSet(rule.choices),
    commandKinds: asSet(rule.commandKinds),
    packages: asSet(rule.packages),
    rights: asSet(rule.rights),
    ...window(rule, at, problems),
    where,
    verdicts: verdictsOf(policy, rule.name),
    alone: [] as CompiledRule[],
  };
  compiled.alone.push(compiled);
  Object.freeze(compiled.alone);
  return compiled;
}

function claimHolds(actual: unknown, expected: string | number | boolean): boolean {
  return Array.isArray(actual) ? actual.includes(expected) : actual === expected;
}

const PRINCIPAL_MATCHERS = [
  'anyAuthenticated',
  'subjects',
  'issuers',
  'claims',
  'consumers',
  'certificateSubjects',
  'certificateDnsNames',
  'sources',
] as const;

/** Whether a caller is one the policy names: every matcher given must hold. */
function principalMatcher(
  principals: LedgerPrincipalsConfig,
  at: string,
  problems: string[],
): (principal: PrincipalFacts) => boolean {
  if (!PRINCIPAL_MATCHERS.some((name) => principals[name] !== undefined))
    problems.push(`${at}: names no caller (one of ${PRINCIPAL_MATCHERS.join(', ')})`);
  let inSources: ((address: string) => boolean) | undefined;
  if (principals.sources !== undefined) {
    try {
      const trust = proxyAddr.compile([...principals.sources]);
      inSources = (address) => address !== '' && trust(address, 0);
    } catch (error) {
      problems.push(`${at}.sources: ${(error as Error).message} (IP addresses or CIDRs)`);
    }
  }
  const { subjects, issuers, claims, consumers, certificateSubjects, certificateDnsNames } = principals;
  return (principal) =>
    (subjects === undefined || subjects.includes(principal.subject)) &&
    (issuers === undefined || issuers.includes(principal.issuer)) &&
    (claims === undefined ||
      Object.entries(claims).every(
        ([name, value]) => Object.hasOwn(principal.claims, name) && claimHolds(principal.claims[name], value),
      )) &&
    (consumers === undefined || consumers.includes(principal.consumer)) &&
    (certificateSubjects === undefined ||
      (principal.certificateSubject !== '' &&
        certificateSubjects.some((subject) => sameName(subject, principal.certificateSubject)))) &&
    (certificateDnsNames === undefined || principal.certificateDnsNames.some((n) => certificateDnsNames.includes(n))) &&
    (inSources === undefined || inSources(principal.clientAddress));
}

function compilePolicy(entry: LedgerPolicyEntryConfig, at: string, problems: string[]): CompiledPolicy {
  const names = new Set<string>();
  const rules = entry.rules.map((rule, index) => {
    if (names.has(rule.name)) problems.push(`${at}.rules[${index}].name: "${rule.name}" is used twice in the policy`);
    names.add(rule.name);
    return compileRule(rule, entry.name, `${at}.rules[${index}]`, problems);
  });
  return {
    name: entry.name,
    needs: principalNeeds(entry.principals),
    dryRun: entry.dryRun,
    subjects: entry.principals.subjects === undefined ? undefined : new Set(entry.principals.subjects),
    names: principalMatcher(entry.principals, `${at}.principals`, problems),
    ...window(entry, at, problems),
    rules,
  };
}

function compileBreakGlass(entry: LedgerBreakGlassConfig, at: string, problems: string[]): CompiledBreakGlass {
  return {
    name: entry.name,
    needs: principalNeeds(entry.principals),
    names: principalMatcher(entry.principals, `${at}.principals`, problems),
    ...window(entry, at, problems),
  };
}

/** The section compiled, and every problem with its key path (none: it can decide). */
export function compileLedgerPolicies(section: LedgerPolicyConfig): {
  readonly policies: readonly CompiledPolicy[];
  readonly breakGlass: readonly CompiledBreakGlass[];
  readonly problems: readonly string[];
} {
  const problems: string[] = [];
  // Policies and break-glass entries share the `policy` label of a decision: one name, one meaning.
  const names = new Set<string>();
  const policies = section.policies.map((entry, index) => {
    const at = `ledgerPolicy.policies[${index}]`;
    if (names.has(entry.name)) problems.push(`${at}.name: "${entry.name}" is used twice`);
    names.add(entry.name);
    return compilePolicy(entry, at, problems);
  });
  const breakGlass = (section.breakGlass ?? []).map((entry, index) => {
    const at = `ledgerPolicy.breakGlass[${index}]`;
    if (names.has(entry.name)) problems.push(`${at}.name: "${entry.name}" is used twice`);
    names.add(entry.name);
    return compileBreakGlass(entry, at, problems);
  });
  return { policies, breakGlass, problems };
}
