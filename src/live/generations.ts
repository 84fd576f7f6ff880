// Live configuration: what the stages read of the config (authentication, protection, authorization,
// request rules, CORS, the version cache's TTLs) is built whole from one config as a Generation and
// swapped whole on a reload. Each exchange pins the current generation when it enters and finishes
// under it; an old generation's resources (key-set timers, a limit store) are closed once no call can
// still hold it. What lives outside the exchanges follows the keys it reads (follow). README.md says
// which of the two a new live key takes.
import { streamedBodyLimits } from '../body/read.js';
import { createHash } from 'node:crypto';
import type { Dispatcher } from 'undici';
import { isDeepStrictEqual } from 'node:util';
import { createAuthenticator, type Authenticator } from '../auth/authenticator.js';
import { authenticationStage } from '../auth/hooks.js';
import { AuditSchema, type GatewayConfig, type IssuerConfig } from '../config/schema.js';
import type { CallStage, ConsumerObserver, Exchange, Stage } from '../exchange/exchange.js';
import {
  createLedgerPolicyStage,
  type LedgerPolicyStage,
  type LedgerPolicyStageOptions,
} from '../ledger-policy/stage.js';
import { assertPolicyConfig } from '../policy/authorization.js';
import { createCorsHandler, type CorsHandler } from '../policy/cors.js';
import { LARGE_BODY_POOL } from '../policy/large-body-pool.js';
import {
  createPolicyStage,
  JUDGED_IN_THREAD_BYTES,
  type PolicyStage,
  type PolicyStageOptions,
} from '../policy/stage.js';
import { createProtectionStage, type ProtectionStage, type ProtectionStageOptions } from '../protection/stage.js';
import { openRedisConnection, redisMode } from '../protection/redis-connection.js';
import { AuthFailure } from '../auth/failure.js';
import { assertConsumersConfig } from '../consumers/config.js';
import { compileBudgetAmount } from '../ledger-policy/cel.js';
import type { BudgetSpend } from '../consumers/budget-stage.js';
import { createConsumersStage, type ConsumersStage } from '../consumers/stage.js';
import { createConsumerState, type ConsumerState } from '../consumers/state.js';
import type { ConsumersStatus } from '../consumers/status.js';
import type { UsageReport } from '../consumers/usage.js';

/** The sections a reload applies; every other key keeps its running value until a restart. */
const LIVE_SECTIONS = [
  'auth',
  'policy',
  'ledgerPolicy',
  'protection',
  'cors',
  'versionCache',
  'log',
  'audit',
  'consumers',
] as const;
/**
 * Inside a live section, what still needs a restart: the Redis connection is opened once; the audit
 * trail's files, key and writer are opened once (every audit key but its policy, which writes at
 * which level, read from the schema so that a new one keeps its running value too).
 */
const RESTART_ONLY_IN_LIVE: ReadonlyArray<readonly [section: string, key: string]> = [
  ['protection', 'redis'],
  // The decoder's worker threads and the package names learnt live as long as the process.
  ['ledgerPolicy', 'packageNames'],
  ['ledgerPolicy', 'preparedTransactions'],
  ...Object.keys(AuditSchema.properties)
    .filter((key) => key !== 'policy')
    .map((key) => ['audit', key] as const),
];

/**
 * What the stages read of one configuration, built whole from it and swapped whole on a reload: an
 * exchange pins the current generation when it enters (LiveConfig.pin), and every later stage reads
 * it there, so that the exchange finishes under the configuration it entered with.
 */
export interface Generation {
  readonly config: GatewayConfig;
  /** The effective config's fingerprint (a hash): which config an exchange ran under. */
  readonly fingerprint: string;
  readonly authenticator: Authenticator;
  readonly protection: ProtectionStage;
  /** The consumers' hooks (consumers/); undefined when no consumer is configured. */
  readonly consumers: ConsumersStage | undefined;
  readonly authenticate: Stage;
  readonly protect: Stage;
  /** Authorization (an exchange stage) and the request rules (a call stage: live.pinned). */
  readonly policy: PolicyStage;
  /** The ledger policy (a call stage: live.pinned), compiled from this configuration's section. */
  readonly ledgerPolicy: LedgerPolicyStage;
  /**
   * The ledger policy's place in a call's list: its decision, then the consumer's budgets when any is
   * configured (ledgerStage); undefined when neither is (left out of the call list built for it: live.pinned).
   */
  readonly decideAndSpend: CallStage | undefined;
  /**
   * CORS, when configured (policy/cors.ts): adds its headers to a call's reply, or answers a
   * preflight (true). Answers the gateway writes itself copy the reply's headers only then.
   */
  readonly cors: CorsHandler | undefined;
  /** How long a GET /v2/version answer is served from memory (0: not cached), and served stale on an upstream failure. */
  readonly versionCache: GatewayConfig['versionCache'];
}

/** An exchange once its first stage pinned the current generation on it (a call's request, an upgrade's exchange). */
export interface PinnedExchange extends Exchange {
  generation: Generation;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** A call's pinned generation (a request decorator: server/api-server.ts). */
    generation: Generation;
  }
}

export type LiveConfigOptions = ProtectionStageOptions &
  PolicyStageOptions & {
    /** What every generation's ledger policy shares: the decoder, the package names, the decisions' observer. */
    readonly ledgerPolicy: Pick<LedgerPolicyStageOptions, 'runtime' | 'observe'>;
    /** How long an old generation may still serve a call: its resources are closed after that. */
    readonly retireAfterMs: number;
  };

/** A call stage each generation picks from its configuration (live.pinned); undefined where it is off. */
export interface PinnedCallStage {
  readonly pick: (generation: Generation) => CallStage | undefined;
}

/** A call's own stage as app.ts lists it: the same under every configuration, or pinned. */
export type CallStageEntry = CallStage | PinnedCallStage;

/**
 * The call list under `generation`: each pinned stage picked, those its configuration turns off left
 * out, so that a call pays nothing for them. Built once per generation (server/calls.ts).
 */
export function callStagesUnder(entries: readonly CallStageEntry[], generation: Generation): CallStage[] {
  const stages: CallStage[] = [];
  for (const entry of entries) {
    const stage = typeof entry === 'function' ? entry : entry.pick(generation);
    if (stage !== undefined) stages.push(stage);
  }
  return stages;
}

/** Whether an exchange's authentication must wait, and for what (live/participant-idps.ts). */
export type AuthenticationGate = (exchange: Exchange) => Promise<void> | undefined;

/** Why a follower is applied: at start, or after a swap changed what it follows. */
export type FollowReason = 'start' | 'reload';

export interface LiveConfig {
  readonly current: Generation;
  /** Signature verifications so far, over every generation's authenticator. */
  readonly signatureChecks: number;
  /** The first stage of the list: pins the current generation on the exchange (one pointer). */
  readonly pin: Stage<PinnedExchange>;
  /** The list's stages that run the pinned generation's own. */
  readonly authenticate: Stage<PinnedExchange>;
  readonly protect: Stage<PinnedExchange>;
  readonly authorize: Stage<PinnedExchange>;
  /** The consumer's quota of the operation (consumers/), when the pinned generation has consumers. */
  readonly countQuota: Stage<PinnedExchange>;
  /** The consumer's brokered Canton token in place of the client's credential upstream (consumers/). */
  readonly brokerCredential: Stage<PinnedExchange>;
  /** A WebSocket stream's first message judged by the pinned generation's ledger policy (calls: its own call stage). */
  readonly governStream: Stage<PinnedExchange>;
  /** Counts a finished exchange for its consumer under the generation it pinned (none pinned, or no consumers: nothing). */
  readonly observeConsumer: ConsumerObserver;
  /**
   * The call stage each generation picks with `select`, a stage built with its configuration:
   * `live.pinned((generation) => generation.policy.enforceRequestRules)`. A configuration that turns
   * the stage off picks none (undefined): the call list built for it leaves it out (callStagesUnder).
   */
  pinned(select: (generation: Generation) => CallStage | undefined): PinnedCallStage;
  /**
   * When `gate` answers a promise for an exchange (its token is one a change of the participant's
   * identity providers may change), that exchange's authentication waits for it, then runs under the
   * generation current by then; an exchange it answers undefined for is authenticated at once.
   */
  holdAuthenticationWhile(gate: AuthenticationGate): void;
  /** The connections the participant's issuers' key sets are fetched on, from the next generation built. */
  fetchParticipantKeySetsOn(dispatcher: Dispatcher): void;
  /**
   * Makes something that lives outside the exchanges follow what `select` reads of the generation
   * (README.md): `apply` runs now, then after each swap whose selected value differs from the one
   * applied last (deep equality), in the order the followers were added.
   */
  follow<T>(select: (generation: Generation) => T, apply: (value: T, reason: FollowReason) => void): void;
  /**
   * Builds a generation from `next` (its live sections; the rest as running), waits for its new key
   * sets, and swaps it in. Throws (ConfigError, or an Error naming an issuer whose keys could not be
   * fetched) and keeps the current one when it cannot serve.
   */
  apply(next: GatewayConfig): Promise<Generation>;
  /** The key paths of `next` that differ from the running config and need a restart. */
  restartOnlyChanges(next: GatewayConfig): string[];
  /**
   * Trusts these issuers (the participant's identity providers) besides the configured ones, which
   * win on a conflict. Those whose keys cannot be fetched are left out (logged, and named in
   * `leftOut`); the rest swap in.
   */
  setParticipantIssuers(
    issuers: readonly IssuerConfig[],
  ): Promise<{ readonly generation: Generation; readonly leftOut: readonly string[] }>;
  /** The consumers' usage from `from` to `to` (UTC days, inclusive); undefined while no consumer was ever configured. */
  consumerUsage(from: string, to: string): Promise<UsageReport> | undefined;
  /** The consumers of the running configuration as the status page shows them; undefined while none is configured. */
  consumerStatus(): Promise<ConsumersStatus> | undefined;
  close(): Promise<void>;
}

/** A hash of the effective config, stable over key order: which config a replica runs. */
export function configFingerprint(config: GatewayConfig): string {
  const canonical = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(canonical);
    if (value === null || typeof value !== 'object') return value;
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, canonical((value as Record<string, unknown>)[key])]),
    );
  };
  return createHash('sha256')
    .update(JSON.stringify(canonical(config)))
    .digest('hex')
    .slice(0, 16);
}

/** The config a reload runs under: `next`'s live sections, the running values of everything else. */
export function effectiveConfig(running: GatewayConfig, next: GatewayConfig): GatewayConfig {
  const merged = structuredClone(running) as unknown as Record<string, unknown>;
  for (const section of LIVE_SECTIONS) merged[section] = structuredClone(next[section]);
  for (const [section, key] of RESTART_ONLY_IN_LIVE) {
    const kept = (running as unknown as Record<string, Record<string, unknown>>)[section]!;
    const into = merged[section] as Record<string, unknown>;
    if (key in kept) into[key] = structuredClone(kept[key]);
    else delete into[key];
  }
  return merged as unknown as GatewayConfig;
}

/** The leaf key paths where `a` and `b` differ (a whole array counts as one leaf). */
function differingPaths(a: unknown, b: unknown, path: string[], out: string[]): void {
  if (isDeepStrictEqual(a, b)) return;
  const isMapping = (value: unknown) => value !== null && typeof value === 'object' && !Array.isArray(value);
  if (!isMapping(a) || !isMapping(b)) {
    out.push(path.join('.'));
    return;
  }
  const keys = new Set([...Object.keys(a as object), ...Object.keys(b as object)]);
  for (const key of [...keys].sort()) {
    differingPaths((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key], [...path, key], out);
  }
}

/** Bound on waiting for a new generation's key sets before it is swapped in. */
function keyWaitMs(config: GatewayConfig): number {
  return config.auth.keySets.fetchTimeoutMs + 1_000;
}

/**
 * Whether every key set of `authenticator` loaded. A key set whose first fetch failed is not waited
 * for: its next try comes only after the key set cooldown (a JWKS host that does not resolve fails at once).
 */
async function keysLoaded(authenticator: Authenticator, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (!authenticator.keySets.every((keySet) => keySet.ready() || keySet.attempted())) {
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return authenticator.ready();
}

/** What a generation is built with besides its config: the options, and the participant's key-set connections. */
interface GenerationInputs {
  readonly options: LiveConfigOptions;
  /** The participant's IdPs' key sets are fetched on guarded connections (auth/jwks-hosts.ts). */
  readonly participantKeySets: Dispatcher | undefined;
  /** What consumers keep across generations, made when a generation first names a consumer. */
  readonly consumerState: () => ConsumerState;
}

/** The consumers' hooks of `config` (those of `previous` when its consumers and protection did not change). */
function consumersOf(
  config: GatewayConfig,
  previous: Generation | undefined,
  inputs: GenerationInputs,
): ConsumersStage | undefined {
  assertConsumersConfig(config.consumers, redisMode(config.protection.redis) !== undefined, compileBudgetAmount);
  if (
    previous !== undefined &&
    isDeepStrictEqual(previous.config.consumers, config.consumers) &&
    previous.config.protection.failMode === config.protection.failMode
  )
    return previous.consumers;
  if (config.consumers.list.length === 0) return undefined;
  return createConsumersStage(config.consumers, inputs.consumerState(), {
    isTrustedProxy: inputs.options.isTrustedProxy,
    failMode: config.protection.failMode,
    failure: AuthFailure,
    compileAmount: compileBudgetAmount,
  });
}

/**
 * The ledger policy's decision, then the consumer's budgets spent on the document it decided on (or
 * one built for them): a budget counts only a call the policy lets go on, before it is forwarded.
 * Without budgets, the policy's stage itself: nothing more runs per call, nothing at all without a policy.
 */
function ledgerStage(ledgerPolicy: LedgerPolicyStage, budgets: BudgetSpend | undefined): CallStage | undefined {
  const decide = ledgerPolicy.decideForBudgets;
  const decideAndSpend: CallStage | undefined =
    budgets === undefined
      ? ledgerPolicy.decide
      : (call, reply) => {
          const spend = () => budgets(call, () => ledgerPolicy.documentOf(call));
          const decided = decide?.(call, reply);
          return decided === undefined ? spend() : decided.then(spend);
        };
  if (decideAndSpend === undefined) return undefined;
  // The request rules' tree kept for this stage (createPolicyStage's keepParsedBody) is taken, when a
  // document is built, before the first wait; one no document needed is dropped here, never forwarded with the call.
  return (call, reply) => {
    const done = decideAndSpend(call, reply);
    call.parsedBody = undefined;
    return done;
  };
}

/**
 * A body the ledger policy reads itself is held to the participant's limit (limits.bodyBytes), as
 * the submissions are: a large one is parsed in a turn of its own (body/parse-turns.ts), and one the
 * request rules would judge in their worker is read off the event loop under their worker's tree bounds.
 */
function ledgerPolicyBodyReading(config: GatewayConfig) {
  return {
    limits: streamedBodyLimits(config.policy, config.limits),
    maxDepth: config.policy.maxBodyDepth,
    large: { inThreadBytes: JUDGED_IN_THREAD_BYTES, treeBounds: LARGE_BODY_POOL.treeBounds },
    budgetsReadDocuments: config.consumers.list.some((consumer) => consumer.budgets.length > 0),
  };
}

/**
 * A generation built from `config`, reusing what `previous` built from equal sections. `own`: the
 * config file's part of `config` (its issuers are the operator's, not the participant's).
 */
function buildGeneration(
  config: GatewayConfig,
  previous: Generation | undefined,
  own: GatewayConfig,
  inputs: GenerationInputs,
): Generation {
  const { options, participantKeySets } = inputs;
  assertPolicyConfig(config); // the policy's and CORS's problems, before anything is built
  const ledgerPolicy = createLedgerPolicyStage(config.ledgerPolicy, ledgerPolicyBodyReading(config), {
    ...options.ledgerPolicy,
    bodyBudget: options.bodyBudget,
    isTrustedProxy: options.isTrustedProxy,
  }); // its rules compiled and CEL type-checked (a ConfigError) before anything is built
  const sameAuth = previous !== undefined && isDeepStrictEqual(previous.config.auth, config.auth);
  const configured = new Set(own.auth.issuers.map((issuer) => issuer.issuer));
  const authenticator = sameAuth
    ? previous.authenticator
    : createAuthenticator(config.auth, config.upstream.url, {
        onKeySetFetch: (issuer, result) => options.metrics.jwksRefresh(issuer, result),
        onTokenAccepted: (issuer, kind) => options.metrics.tokenAccepted(issuer, kind),
        log: options.log,
        keySetDispatcher: (issuer) => (configured.has(issuer) ? undefined : participantKeySets),
      });
  const sameProtection = previous !== undefined && isDeepStrictEqual(previous.config.protection, config.protection);
  let protection: ProtectionStage;
  try {
    protection = sameProtection ? previous.protection : createProtectionStage(config.protection, options);
  } catch (error) {
    if (!sameAuth) authenticator.close();
    throw error;
  }
  let policy: ReturnType<typeof createPolicyStage>;
  let consumers: ConsumersStage | undefined;
  let decideAndSpend: CallStage | undefined;
  try {
    consumers = consumersOf(config, previous, inputs);
    decideAndSpend = ledgerStage(ledgerPolicy, consumers?.budgets);
    // A small body's tree is kept for the ledger stage only when there is one to read it.
    policy = createPolicyStage(config.policy, config.limits, {
      bodyBudget: options.bodyBudget,
      isTrustedProxy: options.isTrustedProxy,
      largeBodies: options.largeBodies,
      keepParsedBody: decideAndSpend !== undefined,
    });
  } catch (error) {
    if (!sameAuth) authenticator.close();
    if (!sameProtection) void protection.close();
    throw error;
  }
  return {
    config,
    fingerprint: configFingerprint(config),
    authenticator,
    protection,
    consumers,
    // The unauthenticated budget is the protection section's: a new one (or new keys) makes a new stage.
    authenticate:
      sameAuth && sameProtection && consumers === previous?.consumers
        ? previous.authenticate
        : authenticationStage(
            authenticator,
            (reason) => options.metrics.authFailure(reason),
            protection.unauthenticatedBudget,
            consumers?.credentials,
          ),
    protect: protection.stage,
    policy,
    ledgerPolicy,
    decideAndSpend,
    cors:
      previous !== undefined && isDeepStrictEqual(previous.config.cors, config.cors)
        ? previous.cors
        : createCorsHandler(config.cors),
    versionCache: config.versionCache,
  };
}

/** `config` with the participant's issuers added after its own; a configured issuer wins a conflict. */
function withParticipantIssuers(
  config: GatewayConfig,
  extra: readonly IssuerConfig[],
  log: LiveConfigOptions['log'],
): GatewayConfig {
  if (extra.length === 0) return config;
  const configured = new Set(config.auth.issuers.map((issuer) => issuer.issuer));
  const added = extra.filter((issuer) => {
    if (!configured.has(issuer.issuer)) return true;
    log.warn(
      { issuer: issuer.issuer },
      'a participant identity provider has the issuer of a configured one: the configured one is used',
    );
    return false;
  });
  return { ...config, auth: { ...config.auth, issuers: [...config.auth.issuers, ...added] } };
}

/** The issuers of `candidate` whose keys could not be loaded in time (none when it keeps `running`'s authenticator). */
async function missingKeys(candidate: Generation, running: Generation): Promise<string[]> {
  if (candidate.authenticator === running.authenticator) return [];
  candidate.authenticator.start();
  if (await keysLoaded(candidate.authenticator, keyWaitMs(candidate.config))) return [];
  return candidate.authenticator.keySets.filter((keySet) => !keySet.ready()).map((keySet) => keySet.issuer);
}

/** Closes what `dropped` holds and `kept` does not (a candidate refused, or a generation retired). */
async function closeUnshared(dropped: Generation, kept: Generation): Promise<void> {
  if (dropped.authenticator !== kept.authenticator) dropped.authenticator.close();
  if (dropped.protection !== kept.protection) await dropped.protection.close();
}

/**
 * A candidate with the participant's `issuers` on `running`: those whose keys cannot be fetched are
 * left out (logged, and named in `leftOut`) and the rest built again; throws when even that cannot serve.
 */
async function participantCandidate(
  issuers: readonly IssuerConfig[],
  candidateWith: (extra: readonly IssuerConfig[]) => Generation,
  running: Generation,
  log: LiveConfigOptions['log'],
): Promise<{ candidate: Generation; trusted: readonly IssuerConfig[]; leftOut: string[] }> {
  let trusted = issuers;
  let candidate = candidateWith(trusted);
  const missing = await missingKeys(candidate, running);
  const leftOut = missing.filter((name) => issuers.some((issuer) => issuer.issuer === name));
  if (missing.length > 0) {
    if (leftOut.length > 0)
      log.warn({ issuers: leftOut }, 'participant identity providers left out: their keys could not be fetched');
    await closeUnshared(candidate, running);
    trusted = trusted.filter((issuer) => !leftOut.includes(issuer.issuer));
    candidate = candidateWith(trusted);
    if ((await missingKeys(candidate, running)).length > 0) {
      await closeUnshared(candidate, running);
      throw new Error("the configured issuers' keys could not be fetched");
    }
  }
  return { candidate, trusted, leftOut };
}

/** The key paths of `next` that differ from `running` and need a restart. */
function restartOnlyPaths(running: GatewayConfig, next: GatewayConfig): string[] {
  const changed: string[] = [];
  const runningKeys = running as unknown as Record<string, unknown>;
  const wanted = next as unknown as Record<string, unknown>;
  for (const key of Object.keys({ ...runningKeys, ...wanted }).sort()) {
    if ((LIVE_SECTIONS as readonly string[]).includes(key)) continue;
    differingPaths(runningKeys[key], wanted[key], [key], changed);
  }
  for (const path of RESTART_ONLY_IN_LIVE) {
    const pick = (config: Record<string, unknown>) =>
      path.reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], config);
    differingPaths(pick(runningKeys), pick(wanted), [...path], changed);
  }
  return changed;
}

/**
 * Old generations waiting to be closed: each once no call can still be running under it
 * (`afterMs`), or at once on close().
 */
function retiredGenerations(afterMs: number) {
  const retiring = new Map<NodeJS.Timeout, () => Promise<void>>();
  return {
    /** Closes what `old` holds and `next` does not, after `afterMs`. */
    retire(old: Generation, next: Generation): void {
      const closeOld = () => closeUnshared(old, next);
      const timer = setTimeout(() => {
        retiring.delete(timer);
        void closeOld();
      }, afterMs);
      timer.unref();
      retiring.set(timer, closeOld);
    },
    async closeAll(): Promise<void> {
      const pending = [...retiring];
      retiring.clear();
      await Promise.allSettled(
        pending.map(([timer, closeOld]) => {
          clearTimeout(timer);
          return closeOld();
        }),
      );
    },
  };
}

/**
 * What consumers keep across generations (key stores, brokers, quota and usage counters), made when
 * a generation first names a consumer, on protection.redis as the gateway started with it (a restart key).
 */
function consumerStateOnce(initial: GatewayConfig, options: LiveConfigOptions) {
  let state: ConsumerState | undefined;
  const redis = initial.protection.redis;
  return {
    get: () =>
      (state ??= createConsumerState({
        registry: options.metrics.registry,
        exemplars: options.metrics.exemplars,
        // Its own connection: replies bounded, problems counted as the limits' are.
        openRedis:
          redisMode(redis) === undefined
            ? undefined
            : () => openRedisConnection(redis, (problem) => options.metrics.protectionStoreError(problem)),
        keyPrefix: redis.keyPrefix,
        log: options.log,
      })),
    made: () => state,
  };
}

export function createLiveConfig(initial: GatewayConfig, options: LiveConfigOptions): LiveConfig {
  const consumerState = consumerStateOnce(initial, options);
  const inputs = { options, participantKeySets: undefined as Dispatcher | undefined, consumerState: consumerState.get };
  // The config from the file (its live sections as last applied), and the participant's issuers.
  let base = initial;
  let participantIssuers: readonly IssuerConfig[] = [];
  let current = buildGeneration(initial, undefined, initial, inputs);
  let gate: AuthenticationGate | undefined;
  let retiredSignatureChecks = 0;
  const retired = retiredGenerations(options.retireAfterMs);
  const followers: Array<(next: Generation) => void> = [];
  /** A candidate from `base` (or `own`) with these participant issuers, on the current generation. */
  const candidateWith = (extra: readonly IssuerConfig[], own = base) =>
    buildGeneration(withParticipantIssuers(own, extra, options.log), current, own, inputs);

  // A reload and a change of the participant's issuers each build on the current generation: one at a time.
  let queue: Promise<unknown> = Promise.resolve();
  function serialized<T>(work: () => Promise<T>): Promise<T> {
    const run = queue.then(work, work);
    queue = run.catch(() => undefined);
    return run;
  }

  /** `candidate` becomes current: the old one retires, its signature checks kept in the count. */
  function swap(candidate: Generation): Generation {
    const old = current;
    if (old.authenticator !== candidate.authenticator) retiredSignatureChecks += old.authenticator.signatureChecks;
    current = candidate;
    retired.retire(old, candidate);
    for (const follower of followers) follower(candidate);
    return candidate;
  }

  return {
    get current() {
      return current;
    },
    get signatureChecks() {
      return retiredSignatureChecks + current.authenticator.signatureChecks;
    },
    pin(exchange) {
      exchange.generation = current;
    },
    authenticate(exchange) {
      const held = gate?.(exchange);
      if (held === undefined) return exchange.generation.authenticate(exchange);
      return held.then(() => {
        exchange.generation = current;
        return current.authenticate(exchange);
      });
    },
    holdAuthenticationWhile(next) {
      gate = next;
    },
    fetchParticipantKeySetsOn(dispatcher) {
      inputs.participantKeySets = dispatcher;
    },
    follow(select, apply) {
      let applied = select(current);
      apply(applied, 'start');
      followers.push((next) => {
        const value = select(next);
        if (isDeepStrictEqual(value, applied)) return;
        applied = value;
        apply(value, 'reload');
      });
    },
    protect: (exchange) => exchange.generation.protect(exchange),
    authorize: (exchange) => exchange.generation.policy.authorize(exchange),
    countQuota: (exchange) => exchange.generation.consumers?.quota(exchange),
    brokerCredential: (exchange) => exchange.generation.consumers?.upstreamCredential(exchange),
    governStream: (exchange) => exchange.generation.ledgerPolicy.governStream?.(exchange),
    // Telemetry ends every exchange, one refused before the pin included (it has no generation).
    observeConsumer: {
      finished: (exchange, status, code, seconds) =>
        (exchange as Partial<PinnedExchange>).generation?.consumers?.observe.finished(exchange, status, code, seconds),
      streamEnded: (exchange, stream) =>
        (exchange as Partial<PinnedExchange>).generation?.consumers?.observe.streamEnded(exchange, stream),
    },
    pinned: (select) => ({ pick: select }),
    apply: (next) =>
      serialized(async () => {
        const nextBase = effectiveConfig(base, next);
        // Turned off by this reload: the participant's issuers leave in the same swap.
        const extra = nextBase.auth.participantIdentityProviders.enabled ? participantIssuers : [];
        const candidate = candidateWith(extra, nextBase);
        const missing = await missingKeys(candidate, current);
        if (missing.length > 0) {
          await closeUnshared(candidate, current);
          throw new Error(`the keys of ${missing.join(', ')} could not be fetched; the reload is refused`);
        }
        base = nextBase;
        participantIssuers = extra;
        return swap(candidate);
      }),
    setParticipantIssuers: (issuers) =>
      serialized(async () => {
        // A list that was on its way when a reload turned the participant's IdPs off.
        if (!base.auth.participantIdentityProviders.enabled) return { generation: current, leftOut: [] };
        const { candidate, trusted, leftOut } = await participantCandidate(
          issuers,
          candidateWith,
          current,
          options.log,
        );
        participantIssuers = trusted;
        return { generation: swap(candidate), leftOut };
      }),
    restartOnlyChanges: (next) => restartOnlyPaths(current.config, next),
    consumerUsage: (from, to) => consumerState.made()?.usage.report(from, to),
    consumerStatus: () => current.consumers?.status(),
    async close() {
      current.authenticator.close();
      await current.protection.close();
      await retired.closeAll();
      await consumerState.made()?.close();
    },
  };
}
