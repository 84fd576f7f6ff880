// The policy stage: thin wrappers over the pure authorization and request rules.
// Authorization is a stage of the list, for calls and upgrades alike, right after authentication and
// before the version cache (an unauthorized caller never sees a cached body); the request rules run
// in a call's route handler and only on the rule-checked routes, whose bodies alone are read (and
// then forwarded as those exact bytes).
import type { FastifyRequest } from 'fastify';
import type { BodyBudget, BodyHold } from '../body/budget.js';
import { decodeBody, readsAsUtf8 } from '../body/charset.js';
import { declaredContentType } from '../body/content-type.js';
import { parseJsonObject } from '../body/json.js';
import { PARSED_AT_ONCE_BYTES, parseInTurn } from '../body/parse-turns.js';
import { readRequestBody, ruleCheckedBodyLimits, streamedBodyLimits } from '../body/read.js';
import { ShallowFields } from '../body/shallow-fields.js';
import { ConfigError, type LimitsConfig, type PolicyConfig } from '../config/schema.js';
import { holdBody } from '../exchange/body-hold.js';
import { parsedBody } from '../exchange/body-observer.js';
import { callerOf } from '../exchange/caller.js';
import type { CallStage, Principal, Stage } from '../exchange/exchange.js';
import { pathOf } from '../operations.js';
import { Errors, GatewayError } from '../errors.js';
import { createAuthorizer, permissionDeniedError, policyRuleProblems } from './authorization.js';
import type { LargeBodyPool } from './large-body-pool.js';
import { createSourceCheck } from './sources.js';
import { REQUEST_RULES } from './rules/index.js';
import { toGatewayError, type RequestRule, type Violation } from './violation.js';

/** What the shallow rules read (policy/rules/submitting-user.ts): kept from any body, whatever its size. */
const SUBMITTING_USER: ReadonlySet<string> = new Set(['userId']);

/**
 * Rule-checked bodies up to this size are parsed on the event loop (in a turn of their own past
 * PARSED_AT_ONCE_BYTES): the worst 1 MiB body holds it 0.1 to 0.2 s. Larger ones, up to
 * limits.bodyBytes, are judged in the large-body pool's worker threads (large-body-pool.ts).
 */
export const JUDGED_IN_THREAD_BYTES = 1_048_576;

/** A body judged in a worker holds there its decoded text and its tree, each about its own size. */
const WORKER_HOLDS_PER_BYTE = 2;

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
  /** The worker threads that judge rule-checked bodies over JUDGED_IN_THREAD_BYTES (one pool per process). */
  readonly largeBodies: LargeBodyPool;
  /**
   * Whether a small body's parsed tree is kept on the call (request.parsedBody) for the ledger policy's
   * stage, which reads it instead of parsing the same bytes again and drops it (live/generations.ts).
   */
  readonly keepParsedBody?: boolean;
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
  const limits = ruleCheckedBodyLimits(policy, bodyLimits);
  const shallowLimits = streamedBodyLimits(policy, bodyLimits);
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
    enforceRequestRules(request) {
      const rule = requestRules ? REQUEST_RULES.get(request.operation.name) : undefined;
      if (rule === undefined) return undefined;
      return judge(request, rule);
    },
  };

  async function judge(request: FastifyRequest, rule: RequestRule): Promise<void> {
    const caller = callerOf(request.principal, request.raw, options.isTrustedProxy);
    // The bytes stay in memory until the exchange ends (they are forwarded as received).
    const hold = holdBody(options.bodyBudget, request, options.isTrustedProxy, caller);
    const charset = declaredContentType(request.raw.rawHeaders)?.parameters.charset;
    if (rule.shallow && readsAsUtf8(charset) && !smallDeclared(request)) return judgeShallow(request, rule, hold);
    const bytes = await readRequestBody(request.raw, limits, hold);
    request.rawBody = bytes;
    if (bytes.length > JUDGED_IN_THREAD_BYTES)
      return judgeInWorker(options.largeBodies, maxBodyDepth, request, bytes, charset, hold);
    const judged = parseInTurn(caller, bytes.length, () => judgeBody(request, bytes, charset, rule));
    const violation = judged instanceof Promise ? await judged : judged;
    if (violation !== undefined) throw toGatewayError(violation);
  }

  /**
   * A body declared no larger than what is parsed at once: one JSON.parse costs less than the
   * tokenizer (docs/performance.md) and holds the loop no longer than a rule-checked body does.
   */
  function smallDeclared(request: FastifyRequest): boolean {
    const length = request.headers['content-length'];
    return length !== undefined && Number(length) <= PARSED_AT_ONCE_BYTES;
  }

  /** Tokenizes the body as it arrives for its top-level fields, and checks its rule on them. */
  async function judgeShallow(request: FastifyRequest, rule: RequestRule, hold: BodyHold): Promise<void> {
    const fields = new ShallowFields(maxBodyDepth, SUBMITTING_USER, hold.takeBeside);
    request.rawBody = await readRequestBody(request.raw, shallowLimits, hold, (chunk) => fields.write(chunk));
    const body = fields.end();
    // Its long strings were tokens only: nothing holds them now, and a stage after this one (the
    // ledger policy's worker) counts what it holds of the body itself.
    hold.giveBackBeside(fields.countedTextBytes);
    parsedBody(request, body, false); // an excerpt: the audit trail's identifying fields, before the rule may refuse it
    const violation = rule(body, {
      path: pathOf(request.url),
      principal: request.principal,
      numberText: () => undefined,
    });
    if (violation !== undefined) throw toGatewayError(violation);
  }

  /**
   * Parses the body and checks its rule. The tree lives only in this call (body/parse-turns.ts), but
   * a small one admitted by its rule is kept for the ledger policy when it will read it.
   */
  function judgeBody(
    request: FastifyRequest,
    bytes: Buffer,
    charset: string | undefined,
    rule: RequestRule,
  ): Violation | undefined {
    const text = decodeBody(bytes, charset);
    const body = parseJsonObject(text, { maxDepth: maxBodyDepth, exactNumbers: rule.exactNumbers });
    parsedBody(request, body.value); // read at once, never kept: the tree dies with this call
    const violation = rule(body.value, {
      path: pathOf(request.url),
      principal: request.principal,
      numberText: body.numberText,
    });
    if (violation === undefined && options.keepParsedBody === true && bytes.length <= PARSED_AT_ONCE_BYTES)
      request.parsedBody = body.value;
    return violation;
  }
}

/**
 * Parses the body and checks its rule in a worker thread: only the verdict and an excerpt for the
 * audit trail come back (the tree stays in the worker's bounded heap).
 */
async function judgeInWorker(
  largeBodies: LargeBodyPool,
  maxDepth: number,
  request: FastifyRequest,
  bytes: Buffer,
  charset: string | undefined,
  hold: BodyHold,
): Promise<void> {
  // What the worker holds while it judges (the decoded text and the tree, each about the body's
  // size) counts against the body budget beside the bytes, as a tokenizer's long strings do.
  const beside = WORKER_HOLDS_PER_BYTE * bytes.length;
  const refused = hold.takeBeside(beside);
  if (refused !== undefined) throw refused;
  const task = {
    operation: request.operation.name,
    charset,
    maxDepth,
    path: pathOf(request.url),
    // The caller as plain data, copied to the worker (the verified claims are JSON).
    principal: request.principal && {
      subject: request.principal.subject,
      issuer: request.principal.issuer,
      claims: request.principal.claims,
    },
  };
  const judged = largeBodies.judge(task, bytes).finally(() => hold.giveBackBeside(beside));
  const { excerpt, violation, bytes: back } = await judged;
  request.rawBody = back; // lent to the worker and back, to be forwarded as received
  parsedBody(request, excerpt, false); // an excerpt: the audit trail's identifying fields, before the rule may refuse it
  if (violation !== undefined) throw violation;
}
