// The policy stage: thin wrappers over the pure authorization and request rules.
// Authorization is a stage of the list, for calls and upgrades alike, right after authentication and
// before the version cache (an unauthorized caller never sees a cached body); the request rules run
// in a call's route handler and only on the rule-checked routes, whose bodies alone are read (and
// then forwarded as those exact bytes).
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { BodyBudget } from '../body/budget.js';
import { decodeBody } from '../body/charset.js';
import { declaredContentType } from '../body/content-type.js';
import { parseJsonObject } from '../body/json.js';
import { readRequestBody, type BodyReadLimits } from '../body/read.js';
import { ConfigError, type LimitsConfig, type PolicyConfig } from '../config/schema.js';
import { parsedBody } from '../exchange/body-observer.js';
import { callerOf } from '../exchange/caller.js';
import type { CallStage, Principal, Stage } from '../exchange/exchange.js';
import { onResponseClose } from '../exchange/response-close.js';
import { pathOf } from '../operations.js';
import { Errors, GatewayError } from '../errors.js';
import { createAuthorizer, permissionDeniedError, policyRuleProblems } from './authorization.js';
import { createSourceCheck } from './sources.js';
import { REQUEST_RULES } from './rules/index.js';
import { toGatewayError, type RequestRule } from './violation.js';

export interface PolicyStage {
  /** Per-operation authorization (synchronous). */
  readonly authorize: Stage;
  /** Read, parse and judge the body of a rule-checked call (a promise only on those routes). */
  readonly enforceRequestRules: CallStage;
}

export interface PolicyStageOptions {
  /** The process's budget of bodies held in memory (limits.bufferedBodyBytes), shared with the forwarder. */
  readonly bodyBudget: BodyBudget;
  /**
   * Whose X-Forwarded-For is believed (server.trustedProxies), for the source rules' client address
   * and the caller a body without a principal is counted by.
   */
  readonly isTrustedProxy: (address: string) => boolean;
}

/**
 * Builds the stage from the policy section and limits.bodyBytes; a policy the schema could not check
 * fully stops the process here (ConfigError).
 */
export function createPolicyStage(
  policy: PolicyConfig,
  bodyLimits: LimitsConfig,
  options: PolicyStageOptions,
): PolicyStage {
  const problems = policyRuleProblems(policy);
  if (problems.length > 0) throw new ConfigError('policy', problems);
  const authorizer = createAuthorizer(policy.rules);
  const sourceCheck = createSourceCheck(policy.sources, options.isTrustedProxy);
  // A rule-checked body is read whole and parsed: its own, lower limit (the other routes' bodies stream).
  const ownLimit = policy.maxBodyBytes <= bodyLimits.bodyBytes;
  const limits: BodyReadLimits = {
    maxBytes: ownLimit ? policy.maxBodyBytes : bodyLimits.bodyBytes,
    maxBytesKey: ownLimit ? 'policy.maxBodyBytes' : 'limits.bodyBytes',
    timeoutMs: policy.bodyReadTimeoutMs,
    timeoutKey: 'policy.bodyReadTimeoutMs',
  };
  const { maxBodyDepth, requestRules } = policy;

  const check = (operation: string, principal: Principal | null) => {
    const decision = authorizer(operation, principal);
    if (!decision.allowed) throw permissionDeniedError(decision.reason);
  };

  return {
    authorize(exchange) {
      const refused = sourceCheck?.(exchange.operation.name, exchange.raw);
      if (refused !== undefined)
        throw new GatewayError(Errors.GATEWAY_SOURCE_NOT_ALLOWED, { context: { source: refused } });
      check(exchange.operation.name, exchange.principal);
    },
    enforceRequestRules(request, reply) {
      const rule = requestRules ? REQUEST_RULES.get(request.operation.name) : undefined;
      if (rule === undefined) return undefined;
      return judge(request, reply, rule);
    },
  };

  async function judge(request: FastifyRequest, reply: FastifyReply, rule: RequestRule): Promise<void> {
    // The bytes stay in memory until the exchange ends (they are forwarded as received).
    const hold = options.bodyBudget.hold(callerOf(request.principal, request.raw, options.isTrustedProxy));
    onResponseClose(reply.raw, hold.release);
    const bytes = await readRequestBody(request.raw, limits, hold);
    request.rawBody = bytes;
    const text = decodeBody(bytes, declaredContentType(request.raw.rawHeaders)?.parameters.charset);
    const body = parseJsonObject(text, { maxDepth: maxBodyDepth, exactNumbers: rule.exactNumbers });
    request.jsonBody = body.value;
    parsedBody(request, body.value); // the audit trail's identifying fields, before the rule may refuse it
    const context = { path: pathOf(request.url), principal: request.principal, numberText: body.numberText };
    const violation = rule(body.value, context);
    if (violation !== undefined) throw toGatewayError(violation);
  }
}
