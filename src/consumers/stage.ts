// The consumers' hooks in the stage list, each thin: the key check and the principal's consumer for
// authentication (auth/hooks.ts ConsumerCredentials), the quota check after the limits, the brokered
// credential once the call is authorized, the budgets once the ledger policy admitted a call
// (budget-stage.ts), and the count of each finished exchange.
import type { ServerResponse } from 'node:http';
import type { ConsumersConfig } from '../config/schema.js';
import { Errors, GatewayError } from '../errors.js';
import type { ConsumerObserver, Exchange, Principal, Stage } from '../exchange/exchange.js';
import { NO_UPSTREAM_CREDENTIAL, replaceUpstreamCredential } from '../exchange/upstream-credential.js';
import type { AmountCompiler } from './budget-config.js';
import { createBudgetSpend, type BudgetSpend } from './budget-stage.js';
import { UNMAPPED } from './config.js';
import { createConsumerDirectory } from './directory.js';
import { createKeyCheck, GATEWAY_KEY_ISSUER, type CredentialFailure, type KeyCheck } from './key-check.js';
import { rateLimitFields, type QuotaVerdict } from './quotas.js';
import type { ConsumerState } from './state.js';
import { consumersStatus, type ConsumersStatus } from './status.js';

export interface ConsumersStage {
  /** For the authentication stage: gateway keys (when a store is configured) and each principal's consumer. */
  readonly credentials: {
    readonly keys: KeyCheck | undefined;
    readonly classify: (principal: Principal, request: Exchange['raw']) => Principal;
  };
  /** After the limits: the consumer's quota of the operation. */
  readonly quota: Stage;
  /** After authorization: the consumer's brokered token replaces the client's credential upstream. */
  readonly upstreamCredential: Stage;
  /** Once the ledger policy admitted a call: the consumer's budgets of its operation; undefined when no consumer has one. */
  readonly budgets: BudgetSpend | undefined;
  readonly observe: ConsumerObserver;
  /** What the status page shows of every consumer (status.ts): never a key, a hash or a token. */
  status(): Promise<ConsumersStatus>;
}

export interface ConsumersStageOptions {
  readonly isTrustedProxy: (address: string) => boolean;
  /** protection.failMode: what a call gets while Redis cannot count its quota. */
  readonly failMode: 'open' | 'closed';
  /** auth/failure.ts AuthFailure: a bad key is refused as a bad token is. */
  readonly failure: CredentialFailure;
  /** ledger-policy/cel.ts compileBudgetAmount: a budget's amount over the decision document. */
  readonly compileAmount: AmountCompiler;
}

function quotaExhausted(consumer: string, operation: string, verdict: QuotaVerdict, headers: Record<string, string>) {
  const spent = verdict.periods.find((state) => state.period === verdict.spent)!;
  return new GatewayError(
    Errors.GATEWAY_QUOTA_EXHAUSTED,
    {
      cause: `The ${spent.period}'s quota of ${operation} calls (${spent.limit}) of this consumer is spent.`,
      context: { consumer, operation, period: spent.period },
    },
    { headers: { ...headers, 'retry-after': String(spent.resetSeconds) }, reason: `quota: ${spent.period}` },
  );
}

function quotaStage(
  directory: ReturnType<typeof createConsumerDirectory>,
  state: ConsumerState,
  failMode: 'open' | 'closed',
): Stage {
  let warnedAt = Number.NEGATIVE_INFINITY;
  const settle = (exchange: Exchange, consumer: string, verdict: QuotaVerdict) => {
    const { policy, state: left } = rateLimitFields(verdict);
    const headers = { 'ratelimit-policy': policy, ratelimit: left };
    if (verdict.spent !== undefined) {
      state.metrics.quotaRefusal(consumer, exchange.operation.name, verdict.spent);
      throw quotaExhausted(consumer, exchange.operation.name, verdict, headers);
    }
    // On the call's response: the forwarded answer, a cached one and a later refusal all carry them.
    if (exchange.kind === 'call')
      for (const [name, value] of Object.entries(headers)) (exchange.lifeline as ServerResponse).setHeader(name, value);
  };
  const unavailable = (error: unknown) => {
    const now = Date.now();
    if (now - warnedAt > 30_000) {
      warnedAt = now;
      state.log.warn({ failMode, error: (error as Error).message?.slice(0, 200) }, 'quota store (Redis) unavailable');
    }
    if (failMode === 'open') return;
    throw new GatewayError(
      Errors.GATEWAY_PROTECTION_UNAVAILABLE,
      { cause: 'The gateway cannot count quotas right now.' },
      { headers: { 'retry-after': '1' }, reason: 'quota: store unavailable, failing closed' },
    );
  };
  return (exchange) => {
    const consumer = exchange.principal?.consumer;
    if (consumer === undefined) return undefined;
    const quota = directory.consumers.get(consumer)?.quotaOf(exchange.operation.name);
    if (quota === undefined) return undefined;
    let verdict;
    try {
      verdict = state.quotas.take(consumer, exchange.operation.name, quota, Date.now());
    } catch (error) {
      return unavailable(error);
    }
    if (!(verdict instanceof Promise)) return settle(exchange, consumer, verdict);
    return verdict.then((answer) => settle(exchange, consumer, answer), unavailable);
  };
}

/** The hooks for this consumers section, or undefined when it names no consumer (nothing runs per call). */
export function createConsumersStage(
  section: ConsumersConfig,
  state: ConsumerState,
  options: ConsumersStageOptions,
): ConsumersStage | undefined {
  if (section.list.length === 0) return undefined;
  const directory = createConsumerDirectory(section.list);
  const keyWatch = state.keysFor(section.keys);
  const brokers = state.brokersFor(section.list, section.upstreamTokens);
  const keys =
    keyWatch === undefined
      ? undefined
      : createKeyCheck({ keys: keyWatch, directory, isTrustedProxy: options.isTrustedProxy, failure: options.failure });
  return {
    credentials: { keys, classify: (principal, request) => directory.classify(principal, request) },
    quota: quotaStage(directory, state, options.failMode),
    budgets: createBudgetSpend(section.list, state, options),
    upstreamCredential(exchange) {
      const principal = exchange.principal;
      const consumer = principal?.consumer;
      if (consumer === undefined) return undefined;
      const broker = brokers.get(consumer);
      if (broker === undefined) {
        // A gateway key never leaves the gateway: without a brokered token, the call goes with none.
        if (principal!.issuer === GATEWAY_KEY_ISSUER) replaceUpstreamCredential(exchange.raw, NO_UPSTREAM_CREDENTIAL);
        return undefined;
      }
      const credential = broker.credential();
      if (!(credential instanceof Promise)) return replaceUpstreamCredential(exchange.raw, credential);
      return credential.then((held) => replaceUpstreamCredential(exchange.raw, held));
    },
    observe: {
      finished: (exchange, status, code, seconds) =>
        state.usage.observe(exchange, exchange.principal?.consumer ?? UNMAPPED, status, code, seconds),
      streamEnded: (exchange, stream) =>
        state.usage.observeStream(exchange, exchange.principal?.consumer ?? UNMAPPED, stream),
    },
    status: () =>
      consumersStatus({
        list: section.list,
        consumers: directory.consumers,
        quotas: state.quotas,
        usage: state.usage,
        keys: keyWatch,
        brokers,
      }),
  };
}
