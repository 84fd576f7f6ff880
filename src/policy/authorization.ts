// Per-operation authorization by token claims: pure functions. The first rule of an operation that
// matches decides; when an operation has rules and none matches, the call is refused (fail closed).
// An operation without rules is open to any caller the authentication stage let through.
import { ConfigError, type AuthorizationRuleConfig, type CorsConfig, type PolicyConfig } from '../config/schema.js';
import { Errors, GatewayError } from '../errors.js';
import { OPERATION_NAMES } from '../operations.js';
import type { Principal } from '../exchange/exchange.js';
import { sourceRuleProblems } from './sources.js';

const MATCHERS = ['anyAuthenticated', 'subjects', 'issuers', 'scope', 'audience', 'claims'] as const;

/** What the schema cannot say of the policy: known operation names, a matcher in every rule. */
export function policyRuleProblems(policy: PolicyConfig): string[] {
  const problems: string[] = [];
  for (const [operation, rules] of Object.entries(policy.rules)) {
    if (!OPERATION_NAMES.includes(operation)) {
      problems.push(
        `policy.rules.${operation}: unknown operation (see docs/request-policy.md "Routes and operations" for the names)`,
      );
      continue;
    }
    rules.forEach((rule, index) => {
      const matchers = MATCHERS.filter(
        (name) => rule[name] !== undefined && !(name === 'claims' && Object.keys(rule.claims!).length === 0),
      );
      if (matchers.length === 0) {
        problems.push(`policy.rules.${operation}[${index}]: the rule has no matcher (one of ${MATCHERS.join(', ')})`);
      }
    });
  }
  problems.push(...sourceRuleProblems(policy.sources, OPERATION_NAMES));
  return problems;
}

/** The policy's and CORS's problems the schema cannot say (CORS: no "*" with credentials). */
export function policyConfigProblems(config: { readonly policy: PolicyConfig; readonly cors: CorsConfig }): string[] {
  const problems = policyRuleProblems(config.policy);
  if (config.cors.credentials && config.cors.origins.includes('*')) {
    problems.push(
      'cors.origins: "*" cannot be combined with cors.credentials: true (browsers refuse it); list the origins',
    );
  }
  return problems;
}

export function assertPolicyConfig(config: { readonly policy: PolicyConfig; readonly cors: CorsConfig }): void {
  const problems = policyConfigProblems(config);
  if (problems.length > 0) throw new ConfigError('policy', problems);
}

/** The token's scopes as Canton reads them: `scope` split on spaces, else `scp` (string or array). */
export function scopesOf(claims: Readonly<Record<string, unknown>>): string[] {
  if (typeof claims.scope === 'string') return claims.scope.split(' ').filter(Boolean);
  const scp = claims.scp;
  if (typeof scp === 'string') return [scp];
  return Array.isArray(scp) ? scp.filter((entry): entry is string => typeof entry === 'string') : [];
}

function claimHolds(actual: unknown, expected: string | number | boolean): boolean {
  return Array.isArray(actual) ? actual.includes(expected) : actual === expected;
}

/** Whether every matcher the rule names holds for this caller. No caller matches nothing. */
export function ruleMatches(rule: AuthorizationRuleConfig, principal: Principal | null): boolean {
  if (principal === null) return false;
  const claims = principal.claims;
  if (rule.subjects !== undefined && !rule.subjects.includes(principal.subject)) return false;
  if (rule.issuers !== undefined && (principal.issuer === undefined || !rule.issuers.includes(principal.issuer)))
    return false;
  if (rule.scope !== undefined && !scopesOf(claims).includes(rule.scope)) return false;
  if (rule.audience !== undefined) {
    const aud = claims.aud;
    if (!(aud === rule.audience || (Array.isArray(aud) && aud.includes(rule.audience)))) return false;
  }
  if (rule.claims !== undefined) {
    for (const [name, expected] of Object.entries(rule.claims)) {
      if (!Object.hasOwn(claims, name) || !claimHolds(claims[name], expected)) return false;
    }
  }
  return true;
}

export type AuthorizationDecision = { readonly allowed: true } | { readonly allowed: false; readonly reason: string };

export type Authorizer = (operation: string, principal: Principal | null) => AuthorizationDecision;

/** Compiles policy.rules into a decision function. */
export function createAuthorizer(rules: PolicyConfig['rules']): Authorizer {
  const byOperation = new Map(Object.entries(rules));
  return (operation, principal) => {
    const list = byOperation.get(operation);
    if (list === undefined) return { allowed: true };
    const index = list.findIndex((rule) => ruleMatches(rule, principal));
    if (index === -1) return { allowed: false, reason: `no rule in policy.rules.${operation} allows the caller` };
    if (list[index]!.effect === 'deny')
      return { allowed: false, reason: `policy.rules.${operation}[${index}] denies the caller` };
    return { allowed: true };
  };
}

/** The refusal: Canton's redacted 403 (NA, category -1, gRPC 7); the reason goes to the log only. */
export function permissionDeniedError(reason: string): GatewayError {
  return new GatewayError(Errors.PERMISSION_DENIED, {}, { reason });
}
