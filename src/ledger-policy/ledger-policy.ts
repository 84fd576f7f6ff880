// The ledger policy: the ledgerPolicy section compiled and indexed, deciding decision documents.
// A caller no policy names is left to the other rules (`none`); one that a policy names may do only
// what its allow rules cover (deny by default). A policy in dryRun decides and is reported, never
// enforced. Synchronous unless a package id must be asked of the participant.
import { ConfigError, type LedgerPolicyConfig } from '../config/schema.js';
import { Errors, GatewayError } from '../errors.js';
import { decideWith, operationMatches, type DecisionTime, type Verdict } from './decide.js';
import type { DecisionDocument, PackageFacts, PrincipalFacts, RightFacts, TemplateRef } from './document.js';
import { describeRight, rightsGiven, usesOfRight } from './grants.js';
import { namesPackages } from './matchers.js';
import type { PackageNameResolver } from './package-names.js';
import { indexPolicies, type IndexedPolicy } from './rule-index.js';
import { compileLedgerPolicies, type Decision, type Fact } from './rules.js';

export type { Decision } from './rules.js';

export const NOT_GOVERNED: Decision = Object.freeze({
  effect: 'none',
  policy: '',
  rule: '',
  reason: 'no ledger policy names the caller',
  mode: 'enforce',
});

export interface LedgerPolicyDependencies {
  /** Package ids to names; without it a package-name rule never holds for a template named by id. */
  readonly resolver?: PackageNameResolver;
  readonly now?: () => Date;
}

export interface LedgerPolicy {
  /** Whether any policy is configured (none: every call is `none`, nothing to build per call). */
  readonly active: boolean;
  /** Whether a policy or a break-glass entry names this caller: when none does, no document needs to be built. */
  governs(principal: PrincipalFacts): boolean;
  /** The decision on any call of a caller a break-glass entry names now, else undefined (no document needed). */
  breakGlass(principal: PrincipalFacts): Decision | undefined;
  /** Whether a rule reads the commands' arguments (a prepared transaction's are decoded only then). */
  readonly readsArguments: boolean;
  /** The decision; a promise only while a package id is asked of the participant. */
  decide(document: DecisionDocument, authorization?: string): Decision | Promise<Decision>;
  /**
   * The conditions a decision of `document` cannot be sure of when the `unknown` parts of the call
   * were not recorded (replay over an audit trail): whether a policy names the caller, and the rules
   * of the operation that read them. Empty: the decision stands.
   */
  undecidable(document: DecisionDocument, unknown: ReadonlySet<Fact>): string[];
}

const missing = (needs: ReadonlySet<Fact>, unknown: ReadonlySet<Fact>) =>
  [...needs].filter((fact) => unknown.has(fact));

/** Every problem of the section with its key path (CEL that does not type-check included). */
export function ledgerPolicyProblems(section: LedgerPolicyConfig): readonly string[] {
  return compileLedgerPolicies(section).problems;
}

export function assertLedgerPolicyConfig(section: LedgerPolicyConfig): void {
  const problems = ledgerPolicyProblems(section);
  if (problems.length > 0) throw new ConfigError('ledgerPolicy', problems);
}

function anyDryRun(governing: readonly IndexedPolicy[]): boolean {
  for (const entry of governing) if (entry.policy.dryRun) return true;
  return false;
}

/** Enforcing policies decide first; the dry-run ones are reported where they would refuse. */
function decideCall(governing: readonly IndexedPolicy[], document: DecisionDocument, now: DecisionTime): Decision {
  const enforcing = anyDryRun(governing) ? governing.filter((entry) => !entry.policy.dryRun) : governing;
  const enforced: Verdict | undefined = enforcing.length > 0 ? decideWith(enforcing, document, now) : undefined;
  if (enforced !== undefined && (enforced.effect === 'deny' || enforcing.length === governing.length))
    return withMode(enforced, 'enforce');
  const all = decideWith(governing, document, now);
  if (all.effect === 'deny' || enforced === undefined) return withMode(all, 'dryRun');
  return withMode(enforced, 'enforce');
}

/** The verdict's decision in `mode`: a rule's own is made with the rule (rules.ts), any other for this call. */
function withMode(verdict: Verdict, mode: Decision['mode']): Decision {
  const fixed = verdict.decisions;
  if (fixed !== undefined) return fixed[mode];
  return { effect: verdict.effect, policy: verdict.policy, rule: verdict.rule, reason: verdict.reason, mode };
}

/** The built-in rule refusing a right the caller may not use itself (grants.ts). */
export const GRANT_RULE = 'grant-exceeds-caller';

/**
 * Whether the caller's policies let it use `right` itself: undefined when they do; else the refusal
 * of a use they do not allow (mode dryRun when only a dry-run policy refuses it).
 */
function rightRefusal(
  governing: readonly IndexedPolicy[],
  right: RightFacts,
  principal: PrincipalFacts,
  now: DecisionTime,
): Decision | undefined {
  let dryRun: Decision | undefined;
  for (const alternatives of usesOfRight(right, principal)) {
    const decisions = alternatives.map((probe) => decideCall(governing, probe, now));
    if (decisions.some((decision) => decision.effect === 'allow')) continue;
    const onlyDryRun = decisions.find((decision) => decision.mode === 'dryRun');
    if (onlyDryRun === undefined) return decisions[0];
    dryRun ??= onlyDryRun;
  }
  return dryRun;
}

/**
 * The call's decision, then each right it gives: one the caller may not use itself refuses it
 * (rule grant-exceeds-caller), an enforced refusal before a dry run's.
 */
function decideGoverned(governing: readonly IndexedPolicy[], document: DecisionDocument, now: DecisionTime): Decision {
  const call = decideCall(governing, document, now);
  if ((call.effect === 'deny' && call.mode === 'enforce') || document.rights.length === 0) return call;
  let dryRun: Decision | undefined = call.effect === 'deny' ? call : undefined;
  for (const { right, index } of rightsGiven(document)) {
    const refused = rightRefusal(governing, right, document.principal, now);
    if (refused === undefined) continue;
    const refusal: Decision = {
      effect: 'deny',
      policy: refused.policy,
      rule: GRANT_RULE,
      reason: `rights[${index}] gives ${describeRight(right)}, which the caller may not use itself (${refused.rule}: ${refused.reason})`,
      mode: refused.mode,
    };
    if (refusal.mode === 'enforce') return refusal;
    dryRun ??= refusal;
  }
  return dryRun ?? call;
}

type Named = TemplateRef | (PackageFacts & { packageName: string });

/** The templates and vetted packages named only by id, whose names the rules need. */
function unnamed(document: DecisionDocument, templatesByName: boolean, packagesByName: boolean): Named[] {
  const found: Named[] = [];
  if (templatesByName) {
    const templates = [
      ...document.commands.map((command) => command.template),
      ...document.disclosedContracts.map((contract) => contract.template),
      ...(document.read === undefined ? [] : [...document.read.templates, ...document.read.interfaces]),
    ];
    for (const template of templates)
      if (template !== undefined && template.packageName === '' && template.packageId !== '') found.push(template);
  }
  if (packagesByName)
    for (const pkg of document.packages) if (pkg.packageName === '' && pkg.packageId !== '') found.push(pkg);
  return found;
}

export function createLedgerPolicy(
  section: LedgerPolicyConfig,
  dependencies: LedgerPolicyDependencies = {},
): LedgerPolicy {
  const { policies, breakGlass, problems } = compileLedgerPolicies(section);
  if (problems.length > 0) throw new ConfigError('ledgerPolicy', problems);
  const index = indexPolicies(policies);
  const rules = policies.flatMap((policy) => policy.rules);
  const templatesByName = rules.some((rule) => rule.templates !== undefined && namesPackages(rule.templates));
  const packagesByName = rules.some((rule) => rule.packages !== undefined);
  // The time in ms: a Date is made only for a CEL condition that runs (decide.ts Conditions). Without
  // time windows a decision reads the clock only when such a condition reads `now`.
  const injected = dependencies.now;
  const now = injected === undefined ? Date.now : () => injected().getTime();
  const windowed = (entry: { notBefore: number | undefined; notAfter: number | undefined }) =>
    entry.notBefore !== undefined || entry.notAfter !== undefined;
  const timed = policies.some((policy) => windowed(policy) || policy.rules.some(windowed));
  const decisionTime = (): DecisionTime => (timed ? now() : now);
  const resolver = dependencies.resolver;

  const unresolved = (governing: readonly IndexedPolicy[], ids: readonly string[], why: string): Decision => ({
    effect: 'deny',
    policy: governing[0]!.policy.name,
    rule: 'unresolved-package',
    reason: `the name of package ${ids.join(', ')} ${why}`,
    mode: governing.some((entry) => !entry.policy.dryRun) ? 'enforce' : 'dryRun',
  });

  async function resolveThenDecide(
    governing: readonly IndexedPolicy[],
    document: DecisionDocument,
    missing: Named[],
    authorization?: string,
  ) {
    const ids = [...new Set(missing.map((entry) => entry.packageId))];
    let names: (string | undefined)[];
    try {
      names = await Promise.all(ids.map((id) => resolver!.resolve(id, authorization)));
    } catch (error) {
      return unresolved(governing, ids, `could not be asked of the participant (${(error as Error).message})`);
    }
    const byId = new Map(ids.map((id, i) => [id, names[i]]));
    const unknown = ids.filter((id) => byId.get(id) === undefined);
    if (unknown.length > 0) return unresolved(governing, unknown, 'is not known to the participant');
    for (const entry of missing) entry.packageName = byId.get(entry.packageId)!;
    return decideGoverned(governing, document, decisionTime());
  }

  /** The first break-glass entry naming the caller now; it outranks every policy. */
  function brokenGlass(principal: PrincipalFacts): Decision | undefined {
    if (breakGlass.length === 0) return undefined;
    const time = now();
    const entry = breakGlass.find(
      (candidate) =>
        (candidate.notBefore === undefined || time >= candidate.notBefore) &&
        (candidate.notAfter === undefined || time < candidate.notAfter) &&
        candidate.names(principal),
    );
    if (entry === undefined) return undefined;
    return {
      effect: 'breakGlass',
      policy: entry.name,
      rule: 'break-glass',
      reason: `break-glass entry ${entry.name} names the caller: allowed everything`,
      mode: 'enforce',
    };
  }

  function undecidable(document: DecisionDocument, unknown: ReadonlySet<Fact>): string[] {
    const conditions: string[] = [];
    for (const entry of breakGlass) {
      const facts = missing(entry.needs, unknown);
      if (facts.length > 0)
        conditions.push(`whether break-glass ${entry.name} names the caller (needs ${facts.join(', ')})`);
    }
    for (const { policy } of index.policies) {
      const facts = missing(policy.needs, unknown);
      if (facts.length > 0 && (policy.subjects === undefined || policy.subjects.has(document.principal.subject)))
        conditions.push(`whether policy ${policy.name} names the caller (needs ${facts.join(', ')})`);
    }
    for (const { policy } of index.governing(document.principal))
      for (const rule of policy.rules) {
        const facts = missing(rule.needs, unknown);
        if (facts.length > 0 && operationMatches(rule, document))
          conditions.push(`${policy.name}/${rule.name} (needs ${facts.join(', ')})`);
      }
    return conditions;
  }

  return {
    active: policies.length > 0 || breakGlass.length > 0,
    governs: (principal) => index.governing(principal).length > 0 || brokenGlass(principal) !== undefined,
    breakGlass: brokenGlass,
    readsArguments: rules.some((rule) => rule.needs.has('arguments')),
    undecidable,
    decide(document, authorization) {
      const glass = brokenGlass(document.principal);
      if (glass !== undefined) return glass;
      const governing = index.governing(document.principal);
      if (governing.length === 0) return NOT_GOVERNED;
      if (!templatesByName && !packagesByName) return decideGoverned(governing, document, decisionTime());
      const missing = unnamed(document, templatesByName, packagesByName);
      if (missing.length === 0) return decideGoverned(governing, document, decisionTime());
      if (resolver === undefined)
        return unresolved(governing, [...new Set(missing.map((m) => m.packageId))], 'cannot be resolved (no resolver)');
      const cachedAll = missing.every((entry) => {
        const name = resolver.cached(entry.packageId);
        if (name === undefined || name === '') return false;
        entry.packageName = name;
        return true;
      });
      if (cachedAll) return decideGoverned(governing, document, decisionTime());
      return resolveThenDecide(governing, document, missing, authorization);
    },
  };
}

/** The refusal of a call a ledger rule denies: Canton's PERMISSION_DENIED shape, naming the policy and rule, never their conditions. */
export function ledgerPolicyRefusal(decision: Decision): GatewayError {
  return new GatewayError(
    Errors.GATEWAY_LEDGER_POLICY_DENIED,
    { context: { policy: decision.policy, rule: decision.rule } },
    { reason: `ledger policy ${decision.policy}: ${decision.reason}` },
  );
}
