// Runs a request rule the way the gateway does: JSON text -> parseJsonObject -> rule.
import { parseJsonObject } from '../../../src/body/json.js';
import type { Principal } from '../../../src/exchange/exchange.js';
import type { RequestRule, RuleContext, Violation } from '../../../src/policy/violation.js';
import { toJsonText } from './openapi-arbitrary.js';

export function judge(rule: RequestRule, body: unknown, context: Partial<RuleContext> = {}): Violation | undefined {
  const text = typeof body === 'string' ? body : toJsonText(body);
  const parsed = parseJsonObject(text, { maxDepth: 512, exactNumbers: rule.exactNumbers });
  return rule(parsed.value, { path: '/', principal: null, numberText: parsed.numberText, ...context });
}

export function principal(subject: string, claims: Record<string, unknown> = {}): Principal {
  return { subject, issuer: 'https://idp.test', claims: { sub: subject, ...claims } };
}

/** The code a violation renders with (redacted ones included), or 'none'. */
export function codeOf(violation: Violation | undefined): string {
  return violation?.definition.code ?? 'none';
}
