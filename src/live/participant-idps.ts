// The participant's identity provider configs (POST/PATCH/DELETE /v2/idps), trusted at the edge as
// the participant trusts them: each active one by its issuer, its jwksUrl and its audience when set
// (Canton `IdentityProviderAwareAuthService.scala`); a deactivated one is dropped. The list is fetched
// at start (or the reload that turns it on), every refreshIntervalSeconds, and at once after a change
// made through the gateway.
import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { Counter, Gauge } from 'prom-client';
import type { GatewayConfig, IssuerConfig } from '../config/schema.js';
import type { CallStage } from '../exchange/exchange.js';
import { onResponseClose } from '../exchange/response-close.js';
import type { Readiness } from '../health.js';
import { MetricNames, registeredCounterName, type GatewayMetrics } from '../telemetry/metrics.js';
import { NamedOperations } from '../operations.js';
import { resolveAuthConfig } from '../auth/config.js';
import { unverifiedIssuerOf } from '../auth/extract.js';
import { guardedKeySetAgent, jwksHostRule } from '../auth/jwks-hosts.js';
import type { FollowReason, LiveConfig } from './generations.js';

/** An identity provider config as GET /v2/idps lists it (Canton's JSON API `IdentityProviderConfig`). */
interface ListedIdentityProvider {
  readonly identityProviderId: string;
  readonly isDeactivated: boolean;
  readonly issuer: string;
  readonly jwksUrl: string;
  readonly audience: string;
}

export interface ParticipantIdentityProviders {
  /** Fetches the list now (one fetch at a time: a call made while one runs waits for the next one). */
  refresh(reason: string): Promise<void>;
  /** The first list was fetched and applied (readiness check `participantIdps`). */
  hasList(): boolean;
  /** Why the last refresh failed, until one succeeds (readiness details). */
  lastFailure(): string | undefined;
  /**
   * The participant answered a change (POST, PATCH or DELETE /v2/idps...) made through the gateway with
   * `statusCode`; `identityProviderId` is the path's (PATCH, DELETE). Only a success arms anything: the
   * list is refreshed at once, and until it is applied the tokens it can change wait (heldFor), so the
   * change holds at the edge from the client's next call on.
   */
  changeAnswered(statusCode: number, identityProviderId: string | undefined): void;
  /** Whether a refresh after a change is under way (one cheap check before any token is read). */
  changing(): boolean;
  /**
   * What a token of `issuer` waits for while a change is refreshed (bounded), else undefined: only a
   * token of an issuer not trusted yet (`trusted` false) or of an IdP being changed waits.
   */
  heldFor(issuer: string, trusted: boolean): Promise<void> | undefined;
  /** A reload changed the section: the token file and time bound apply from the next list, the interval at once. */
  follow(config: ParticipantIdpsConfig, fetchTimeoutMs: number): void;
  /** Stops the interval; a change under way stops holding authentication. */
  close(): void;
}

type ParticipantIdpsConfig = GatewayConfig['auth']['participantIdentityProviders'];

/**
 * The gateway's own GET to the participant: to the active replica, with upstream.tls, on the probe's
 * connections (proxy/upstream-replicas.ts `ownGet`, passed in by app.ts). The whole answer, or a
 * rejection whose message is a short cause (never the URL).
 */
export type ParticipantGet = (request: {
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly maxBytes: number;
}) => Promise<{ readonly statusCode: number; readonly body: Buffer }>;

/** Marks the listing in the participant's logs: the gateway's own call, not a client's. */
export const IDP_SYNC_USER_AGENT = 'ledger-gateway-idp-sync';

/**
 * Bound on the listing's answer. Canton caps the IdP configs a participant holds
 * (TOO_MANY_IDENTITY_PROVIDER_CONFIGS), each a few hundred bytes: 4 MiB is far above any real list,
 * and bounds what a faulty answer makes the gateway hold and parse. A longer one is a failed refresh.
 */
export const IDP_LIST_MAX_BYTES = 4 * 1024 * 1024;

export interface ParticipantIdentityProvidersOptions {
  readonly get: ParticipantGet;
  readonly config: ParticipantIdpsConfig;
  /** Bound on one GET /v2/idps (connection, headers and body). */
  readonly fetchTimeoutMs: number;
  /** Checks one listed IdP as a configured issuer would be checked (auth/config.ts); a problem drops it. */
  readonly issuerProblem: (issuer: IssuerConfig) => string | undefined;
  /** Counts the listed active IdPs left out, by reason, after each list (ledger_gateway_participant_idps_left_out). */
  readonly leftOut?: (counts: Readonly<Record<LeftOutReason, number>>) => void;
  readonly now?: () => number;
  /**
   * Swaps in the issuers of the active IdPs; resolves with those left out because their keys could
   * not be fetched, rejects when the rest cannot serve (the last set stays).
   */
  readonly apply: (issuers: readonly IssuerConfig[]) => Promise<readonly string[]>;
  /** Counts one refresh (ledger_gateway_participant_idp_refreshes_total). */
  readonly count: (result: 'success' | 'failure') => void;
  /** Bound on how long a token waits for the refresh after a change (one list fetch and its key sets). */
  readonly changeBoundMs: number;
  readonly log: { info(details: object, message: string): void; warn(details: object, message: string): void };
}

function isListedIdentityProvider(value: unknown): value is ListedIdentityProvider {
  const idp = value as Record<string, unknown> | null;
  return (
    typeof idp === 'object' &&
    idp !== null &&
    typeof idp.identityProviderId === 'string' &&
    typeof idp.issuer === 'string' &&
    typeof idp.jwksUrl === 'string'
  );
}

/** The issuers the participant trusts through its IdP configs: the active ones, as issuer entries. */
export function issuersOfIdentityProviders(listed: readonly unknown[]): IssuerConfig[] {
  return listed
    .filter(isListedIdentityProvider)
    .filter((idp) => idp.isDeactivated !== true)
    .map((idp) => ({
      issuer: idp.issuer,
      jwksUrl: idp.jwksUrl,
      ...(typeof idp.audience === 'string' && idp.audience !== '' && { audience: idp.audience }),
    }));
}

/** Checks an IdP's issuer entry with the configured issuers' rules (auth/config.ts), alone. */
export function identityProviderProblem(config: GatewayConfig, issuer: IssuerConfig): string | undefined {
  try {
    resolveAuthConfig({ ...config.auth, issuers: [issuer] }, config.upstream.url);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

/** Why a listed active IdP is not trusted: a rule refuses it, over the cap, or its keys keep failing. */
export type LeftOutReason = 'rule' | 'cap' | 'keys';

/**
 * IdPs whose keys could not be fetched, each tried again after the refresh interval, then twice as
 * long after each further failure, up to a bound: one that keeps failing is not fetched at every
 * refresh. Keyed by issuer and jwksUrl, so a new jwksUrl is tried at once.
 */
function failingKeySets(now: () => number) {
  const failing = new Map<string, { failures: number; retryAt: number }>();
  const keyOf = (issuer: IssuerConfig) => `${issuer.issuer}\n${issuer.jwksUrl ?? ''}`;
  return {
    waiting: (issuer: IssuerConfig) => (failing.get(keyOf(issuer))?.retryAt ?? 0) > now(),
    failed(issuer: IssuerConfig, intervalSeconds: number, maxSeconds: number) {
      const failures = (failing.get(keyOf(issuer))?.failures ?? 0) + 1;
      const waitSeconds = Math.min(maxSeconds, intervalSeconds * 2 ** Math.min(failures - 1, 30));
      failing.set(keyOf(issuer), { failures, retryAt: now() + waitSeconds * 1_000 });
    },
    /** Forgets what is no longer listed, and (`issuers`) what is to be tried at once. */
    forget(keep: (key: string) => boolean) {
      for (const key of failing.keys()) if (!keep(key)) failing.delete(key);
    },
    keyOf,
  };
}

/** The listed issuers to build, in the list's order: refused by a rule, waiting after failures, or over the cap are left out. */
function selectIssuers(
  listed: readonly IssuerConfig[],
  problemOf: (issuer: IssuerConfig) => string | undefined,
  waiting: (issuer: IssuerConfig) => boolean,
  cap: number,
): {
  chosen: IssuerConfig[];
  refused: Array<{ issuer: string; problem: string }>;
  counts: Record<LeftOutReason, number>;
} {
  const counts: Record<LeftOutReason, number> = { rule: 0, cap: 0, keys: 0 };
  const refused: Array<{ issuer: string; problem: string }> = [];
  const chosen: IssuerConfig[] = [];
  for (const issuer of listed) {
    const problem = problemOf(issuer);
    if (problem !== undefined) {
      counts.rule++;
      refused.push({ issuer: issuer.issuer, problem });
    } else if (waiting(issuer)) counts.keys++;
    else if (chosen.length >= cap) counts.cap++;
    else chosen.push(issuer);
  }
  return { chosen, refused, counts };
}

/** GET /v2/idps on the participant: its identity provider configs, or a rejection naming a short cause. */
async function listIdentityProviders(
  get: ParticipantGet,
  tokenFile: string | undefined,
  timeoutMs: number,
): Promise<unknown[]> {
  const headers: Record<string, string> = { accept: 'application/json', 'user-agent': IDP_SYNC_USER_AGENT };
  // Read at each use: a mounted secret is rotated in place.
  if (tokenFile !== undefined) headers.authorization = `Bearer ${readFileSync(tokenFile, 'utf8').trim()}`;
  let answer: Awaited<ReturnType<ParticipantGet>>;
  try {
    answer = await get({ path: '/v2/idps', headers, timeoutMs, maxBytes: IDP_LIST_MAX_BYTES });
  } catch (error) {
    throw new Error(`GET /v2/idps failed: ${(error as Error).message}`, { cause: error });
  }
  if (answer.statusCode < 200 || answer.statusCode >= 300)
    throw new Error(`GET /v2/idps answered ${answer.statusCode}`);
  let body: { identityProviderConfigs?: unknown };
  try {
    body = JSON.parse(answer.body.toString('utf8')) as { identityProviderConfigs?: unknown };
  } catch (error) {
    throw new Error('GET /v2/idps answered with a body that is not JSON', { cause: error });
  }
  if (!Array.isArray(body?.identityProviderConfigs))
    throw new Error('GET /v2/idps answered without identityProviderConfigs');
  return body.identityProviderConfigs as unknown[];
}

/**
 * What tokens wait for while refreshes after answered changes run: one bounded promise shared by the
 * changes refreshed together, and the issuers of the IdPs they change (counted: two changes of one IdP).
 */
function changeHolds(boundMs: number) {
  let open = 0;
  const changing = new Map<string, number>();
  let settled: Promise<void> | undefined;
  let settle: (() => void) | undefined;
  return {
    /** A change's refresh starts; call the returned function when it has ended. */
    arm(issuer: string | undefined): () => void {
      if (issuer !== undefined) changing.set(issuer, (changing.get(issuer) ?? 0) + 1);
      open++;
      settled ??= new Promise<void>((resolve) => {
        const bound = setTimeout(resolve, boundMs);
        bound.unref();
        settle = () => {
          clearTimeout(bound);
          resolve();
        };
      }).finally(() => {
        settled = undefined;
        settle = undefined;
      });
      const mine = settled;
      return () => {
        open--;
        if (issuer !== undefined) {
          const left = (changing.get(issuer) ?? 1) - 1;
          if (left === 0) changing.delete(issuer);
          else changing.set(issuer, left);
        }
        if (open === 0 && settled === mine) settle?.();
      };
    },
    changing: () => settled !== undefined,
    heldFor: (issuer: string, trusted: boolean) =>
      settled === undefined || (trusted && !changing.has(issuer)) ? undefined : settled,
    release: () => settle?.(),
  };
}

/**
 * Chooses the listed IdPs to build: the rule's refusals logged once each while they stay listed,
 * those over the cap (`maxIdentityProviders`) logged, the left-out counts reported.
 */
function issuerChooser(options: ParticipantIdentityProvidersOptions, failing: ReturnType<typeof failingKeySets>) {
  const { log } = options;
  let reported = new Set<string>();
  return (listed: readonly unknown[], maxIdentityProviders: number): IssuerConfig[] => {
    const active = issuersOfIdentityProviders(listed);
    const listedKeys = new Set(active.map(failing.keyOf));
    failing.forget((key) => listedKeys.has(key));
    const { chosen, refused, counts } = selectIssuers(
      active,
      options.issuerProblem,
      failing.waiting,
      maxIdentityProviders,
    );
    const seen = new Set<string>();
    for (const { issuer, problem } of refused) {
      const key = `${issuer}\n${problem}`;
      seen.add(key);
      if (!reported.has(key)) log.warn({ issuer, problem }, 'participant identity provider not trusted at the edge');
    }
    reported = seen;
    if (counts.cap > 0)
      log.warn(
        { leftOut: counts.cap, maxIdentityProviders },
        'participant identity providers over auth.participantIdentityProviders.maxIdentityProviders: the rest are left out',
      );
    options.leftOut?.(counts);
    return chosen;
  };
}

/**
 * `fetch` one at a time: a call made while one runs waits for one more after it (a change answered
 * while a fetch runs may not be in that fetch's list); nothing once `closed`.
 */
function oneFetchAtATime(
  fetch: (reason: string) => Promise<void>,
  closed: () => boolean,
): (reason: string) => Promise<void> {
  let running: Promise<void> | undefined;
  let queued: Promise<void> | undefined;
  return function refresh(reason: string): Promise<void> {
    if (closed()) return Promise.resolve();
    if (running === undefined) {
      running = fetch(reason).finally(() => {
        running = undefined;
      });
      return running;
    }
    queued ??= running.then(() => {
      queued = undefined;
      return refresh(reason);
    });
    return queued;
  };
}

export function createParticipantIdentityProviders(
  options: ParticipantIdentityProvidersOptions,
): ParticipantIdentityProviders {
  const { log } = options;
  const now = options.now ?? Date.now;
  let config = options.config;
  let fetchTimeoutMs = options.fetchTimeoutMs;
  const failing = failingKeySets(now);
  const holds = changeHolds(options.changeBoundMs);
  /** The last list's IdPs by id (deactivated ones too): the issuer a PATCH or DELETE changes. */
  let issuerOfId = new Map<string, string>();
  const choose = issuerChooser(options, failing);
  /** What was applied (JSON of the issuers trusted and the rule): an unchanged one is not applied again. */
  let applied: string | undefined;
  let hasList = false;
  let closed = false;
  let failure: string | undefined;

  async function fetchAndApply(reason: string): Promise<void> {
    try {
      const listed = await listIdentityProviders(options.get, config.tokenFile, fetchTimeoutMs);
      issuerOfId = new Map(listed.filter(isListedIdentityProvider).map((idp) => [idp.identityProviderId, idp.issuer]));
      const issuers = choose(listed, config.maxIdentityProviders);
      const fingerprint = JSON.stringify({ issuers, allowedJwksHosts: config.allowedJwksHosts });
      if (closed) return; // no longer trusted (a reload turned it off) while the list was on its way
      if (fingerprint !== applied) {
        const leftOut = await options.apply(issuers);
        hasList = true;
        // One left out (its keys could not be fetched) waits before it is tried again (failingKeySets).
        for (const issuer of issuers)
          if (leftOut.includes(issuer.issuer))
            failing.failed(issuer, config.refreshIntervalSeconds, config.retryBackoffMaxSeconds);
        const trusted = issuers.filter((issuer) => !leftOut.includes(issuer.issuer));
        applied = JSON.stringify({ issuers: trusted, allowedJwksHosts: config.allowedJwksHosts });
        log.info(
          { reason, issuers: trusted.map((issuer) => issuer.issuer), ...(leftOut.length > 0 && { leftOut }) },
          'participant identity providers applied',
        );
      }
      options.count('success');
      failure = undefined;
    } catch (error) {
      options.count('failure');
      failure = `the last refresh (${reason}) failed: ${(error as Error).message}; the last known set stays`;
      log.warn(
        { reason, err: (error as Error).message },
        'participant identity providers: cannot refresh; the last known set stays',
      );
    }
  }

  const refresh = oneFetchAtATime(fetchAndApply, () => closed);

  const every = (seconds: number) => setInterval(() => void refresh('interval'), seconds * 1_000).unref();
  let timer = every(config.refreshIntervalSeconds);

  function changeAnswered(statusCode: number, identityProviderId: string | undefined): void {
    // Refused, failed or never answered: nothing changed at the participant, nothing waits.
    if (closed || statusCode < 200 || statusCode >= 300) return;
    const changed = identityProviderId === undefined ? undefined : issuerOfId.get(identityProviderId);
    // The administrator acted on this IdP: a failing one is tried again at once.
    if (changed !== undefined) failing.forget((key) => !key.startsWith(`${changed}\n`));
    const done = holds.arm(changed);
    void refresh('change').finally(done);
  }

  return {
    refresh,
    hasList: () => hasList,
    lastFailure: () => failure,
    changeAnswered,
    changing: holds.changing,
    heldFor: holds.heldFor,
    follow(next, nextFetchTimeoutMs) {
      if (isDeepStrictEqual(next, config) && nextFetchTimeoutMs === fetchTimeoutMs) return;
      if (next.refreshIntervalSeconds !== config.refreshIntervalSeconds) {
        clearInterval(timer);
        timer = every(next.refreshIntervalSeconds);
      }
      config = next;
      fetchTimeoutMs = nextFetchTimeoutMs;
      void refresh('reload');
    },
    close() {
      closed = true;
      clearInterval(timer);
      holds.release();
    },
  };
}

/** The operations that change the participant's identity provider configs. */
export const IDENTITY_PROVIDER_CHANGES: ReadonlySet<string> = new Set([
  'postV2Idps',
  'deleteV2IdpsIdp-id',
  NamedOperations.updateIdentityProviderConfig,
]);

export interface ParticipantTrustOptions {
  readonly get: ParticipantGet;
  /** Where its metrics are registered, and whether counters carry exemplars (telemetry/metrics.ts). */
  readonly metrics: Pick<GatewayMetrics, 'registry' | 'exemplars'>;
  readonly log: ParticipantIdentityProvidersOptions['log'];
  readonly readiness: Readiness;
  /** The fingerprint of the configuration now running (it covers the participant's issuers). */
  readonly running: (fingerprint: string) => void;
}

/** The participant's IdPs as the running config wants them: on from start or a reload, off after one. */
export interface ParticipantTrust {
  /**
   * The call stage of a change of the participant's IdPs (one of IDENTITY_PROVIDER_CHANGES) made
   * through the gateway: once the participant answered it (the call's close), see
   * ParticipantIdentityProviders.changeAnswered; never for a body still arriving or a caller it
   * refused. Any other call goes on untouched, as do all while the IdPs are not trusted.
   */
  readonly watchChange: CallStage;
  close(): void;
}

/** What the participant's issuers are trusted through: the live configuration's part for them. */
export type TrustTarget = Pick<
  LiveConfig,
  'current' | 'setParticipantIssuers' | 'holdAuthenticationWhile' | 'fetchParticipantKeySetsOn' | 'follow'
>;

/** The IdP id a PATCH or DELETE /v2/idps/{idp-id} names (percent-decoded), else undefined. */
export function identityProviderIdOf(path: string): string | undefined {
  const match = /^\/v2\/idps\/([^/?#]+)/.exec(path);
  if (match === null) return undefined;
  try {
    return decodeURIComponent(match[1]!);
  } catch {
    return match[1];
  }
}

/** ledger_gateway_participant_idp_refreshes_total{result} and ledger_gateway_participant_idps_left_out{reason}. */
function participantIdpMetrics({ registry, exemplars }: ParticipantTrustOptions['metrics']) {
  const refreshes = new Counter({
    name: registeredCounterName(MetricNames.participantIdpRefreshes, exemplars),
    help: "Fetches of the participant's identity provider configs (GET /v2/idps) by result; on failure the last known set stays.",
    labelNames: ['result'] as const,
    registers: [registry],
  });
  const leftOut = new Gauge({
    name: MetricNames.participantIdpsLeftOut,
    help: "The participant's active identity providers not trusted at the last list, by reason: rule (jwksUrl refused), cap (over maxIdentityProviders), keys (key set failing, waiting to be tried again).",
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  return {
    refreshed: (result: 'success' | 'failure') => refreshes.inc({ result }),
    leftOut: (counts: Readonly<Record<LeftOutReason, number>>) => {
      for (const [reason, count] of Object.entries(counts)) leftOut.set({ reason }, count);
    },
  };
}

/**
 * Keeps `live`'s participant issuers in step with the participant's IdP configs while
 * auth.participantIdentityProviders.enabled, following reloads: a reload that turns it on starts the
 * listing, one that turns it off stops it (live/generations.ts drops the participant's issuers in the same
 * swap), one that changes its settings re-times it and lists at once.
 */
export function trustParticipantIdentityProviders(
  live: TrustTarget,
  options: ParticipantTrustOptions,
): ParticipantTrust {
  let idps: ParticipantIdentityProviders | undefined;
  let metrics: ReturnType<typeof participantIdpMetrics> | undefined;
  let checked = false;
  let hostRule = jwksHostRule(live.current.config.auth.participantIdentityProviders.allowedJwksHosts);
  const keySetAgent = guardedKeySetAgent(() => hostRule);
  live.fetchParticipantKeySetsOn(keySetAgent);

  function start(config: ParticipantIdpsConfig, fetchTimeoutMs: number, reason: string): ParticipantIdentityProviders {
    // Registered on first use, once: a disabled gateway shows neither the metrics nor the check.
    metrics ??= participantIdpMetrics(options.metrics);
    const started = createParticipantIdentityProviders({
      get: options.get,
      config,
      fetchTimeoutMs,
      // A refresh is one list fetch, then its key sets (live/generations.ts keyWaitMs, twice when some
      // are left out); the change's may queue behind one already running. Only the held tokens wait.
      changeBoundMs: 2 * (3 * fetchTimeoutMs + 2_000),
      issuerProblem: (issuer) =>
        hostRule.problemOf(issuer.jwksUrl ?? '') ?? identityProviderProblem(live.current.config, issuer),
      leftOut: metrics.leftOut,
      apply: async (issuers) => {
        const { generation, leftOut: missing } = await live.setParticipantIssuers(issuers);
        options.running(generation.fingerprint);
        return missing;
      },
      count: metrics.refreshed,
      log: options.log,
    });
    if (!checked) {
      checked = true;
      // Unready until one list was applied; a failed refresh after that keeps the last set (and readiness).
      options.readiness.add({
        name: 'participantIdps',
        ready: () => idps?.hasList() ?? true,
        detail: () => idps?.lastFailure(),
      });
    }
    void started.refresh(reason);
    return started;
  }

  function follow(wanted: ParticipantIdpsConfig, fetchTimeoutMs: number, reason: FollowReason): void {
    hostRule = jwksHostRule(wanted.allowedJwksHosts);
    if (!wanted.enabled) {
      if (idps === undefined) return;
      idps.close();
      idps = undefined;
      options.log.info({ reason }, 'participant identity providers no longer trusted at the edge');
    } else if (idps === undefined) idps = start(wanted, fetchTimeoutMs, reason);
    else idps.follow(wanted, fetchTimeoutMs);
  }

  // Only while a change is refreshed is a token's issuer read at all; then only the tokens it can change wait.
  live.holdAuthenticationWhile((exchange) => {
    if (idps === undefined || !idps.changing()) return undefined;
    const issuer = unverifiedIssuerOf(exchange.raw.rawHeaders, exchange.kind);
    if (issuer === undefined) return undefined;
    return idps.heldFor(issuer, live.current.authenticator.knowsIssuer(issuer));
  });
  // A reload may change the section (and the key sets' time bound); a swap of the participant's issuers leaves them as they are.
  live.follow(
    ({ config }) => ({
      wanted: config.auth.participantIdentityProviders,
      fetchTimeoutMs: config.auth.keySets.fetchTimeoutMs,
    }),
    ({ wanted, fetchTimeoutMs }, reason) => follow(wanted, fetchTimeoutMs, reason),
  );
  return {
    watchChange(call) {
      const operation = call.operation.name;
      if (!IDENTITY_PROVIDER_CHANGES.has(operation)) return;
      const response = call.lifeline;
      onResponseClose(response, () =>
        idps?.changeAnswered(
          response.headersSent ? response.statusCode : 0,
          operation === 'postV2Idps' ? undefined : identityProviderIdOf(call.url),
        ),
      );
    },
    close() {
      idps?.close();
      idps = undefined;
      void keySetAgent.close();
    },
  };
}
