// The participant's identity provider configs (POST/PATCH/DELETE /v2/idps), trusted at the edge as
// the participant trusts them: each active one by its issuer, its jwksUrl and its audience when set
// (Canton `IdentityProviderAwareAuthService.scala`); a deactivated one is dropped. The list is fetched
// at start (or the reload that turns it on), every refreshIntervalSeconds, and at once after a change
// made through the gateway.
import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { Counter, type Registry } from 'prom-client';
import type { GatewayConfig, IssuerConfig } from '../config/schema.js';
import type { Readiness } from '../health.js';
import { NamedOperations } from '../operations.js';
import { resolveAuthConfig } from '../auth/config.js';
import { MetricNames } from '../telemetry/metrics.js';

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
   * A change (POST, PATCH or DELETE /v2/idps...) goes to the participant: until its answer is sent and,
   * when that answer is a success, the list refreshed, pendingChange() holds authentication, so the
   * change holds at the edge from the client's next call on. Call the returned function with the answer's status.
   */
  beginChange(): (statusCode: number) => void;
  /** What authentication waits for while a change is under way (bounded), else undefined. */
  pendingChange(): Promise<void> | undefined;
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
  /**
   * Swaps in the issuers of the active IdPs; resolves with those left out because their keys could
   * not be fetched, rejects when the rest cannot serve (the last set stays).
   */
  readonly apply: (issuers: readonly IssuerConfig[]) => Promise<readonly string[]>;
  /** Counts one refresh (ledger_gateway_participant_idp_refreshes_total). */
  readonly count: (result: 'success' | 'failure') => void;
  /** Bound on how long authentication waits for a change (its answer and the refresh after it). */
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

export function createParticipantIdentityProviders(
  options: ParticipantIdentityProvidersOptions,
): ParticipantIdentityProviders {
  const { log } = options;
  let config = options.config;
  let fetchTimeoutMs = options.fetchTimeoutMs;
  // Changes under way, and the promise authentication waits for meanwhile.
  let openChanges = 0;
  let changeSettled: Promise<void> | undefined;
  let settleChange: (() => void) | undefined;
  // A change's wait is bounded: the participant's answer, then one list fetch and its key sets.
  const changeBoundMs = options.changeBoundMs;
  /** The list applied in full (JSON of its issuers): an unchanged list is not applied again. */
  let applied: string | undefined;
  let hasList = false;
  let running: Promise<void> | undefined;
  let queued: Promise<void> | undefined;
  let closed = false;
  let failure: string | undefined;

  async function list(): Promise<unknown[]> {
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': IDP_SYNC_USER_AGENT };
    // Read at each use: a mounted secret is rotated in place.
    if (config.tokenFile !== undefined)
      headers.authorization = `Bearer ${readFileSync(config.tokenFile, 'utf8').trim()}`;
    let answer: Awaited<ReturnType<ParticipantGet>>;
    try {
      answer = await options.get({
        path: '/v2/idps',
        headers,
        timeoutMs: fetchTimeoutMs,
        maxBytes: IDP_LIST_MAX_BYTES,
      });
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

  async function fetchAndApply(reason: string): Promise<void> {
    try {
      const issuers = issuersOfIdentityProviders(await list()).filter((issuer) => {
        const problem = options.issuerProblem(issuer);
        if (problem !== undefined)
          log.warn({ issuer: issuer.issuer, problem }, 'participant identity provider not trusted at the edge');
        return problem === undefined;
      });
      const fingerprint = JSON.stringify(issuers);
      if (closed) return; // no longer trusted (a reload turned it off) while the list was on its way
      if (fingerprint !== applied) {
        const leftOut = await options.apply(issuers);
        hasList = true;
        // One left out (its keys could not be fetched) is tried again at the next refresh.
        applied = leftOut.length === 0 ? fingerprint : undefined;
        const trusted = issuers.map((issuer) => issuer.issuer).filter((issuer) => !leftOut.includes(issuer));
        log.info(
          { reason, issuers: trusted, ...(leftOut.length > 0 && { leftOut }) },
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

  function refresh(reason: string): Promise<void> {
    if (closed) return Promise.resolve();
    if (running === undefined) {
      running = fetchAndApply(reason).finally(() => {
        running = undefined;
      });
      return running;
    }
    // A change answered while a fetch runs may not be in that fetch's list: one more follows it.
    queued ??= running.then(() => {
      queued = undefined;
      return refresh(reason);
    });
    return queued;
  }

  const every = (seconds: number) => setInterval(() => void refresh('interval'), seconds * 1_000).unref();
  let timer = every(config.refreshIntervalSeconds);
  function beginChange(): (statusCode: number) => void {
    openChanges++;
    if (changeSettled === undefined) {
      changeSettled = new Promise<void>((resolve) => {
        const bound = setTimeout(resolve, changeBoundMs);
        bound.unref();
        settleChange = () => {
          clearTimeout(bound);
          resolve();
        };
      }).finally(() => {
        changeSettled = undefined;
        settleChange = undefined;
      });
    }
    const settled = changeSettled;
    let ended = false;
    return (statusCode) => {
      if (ended) return;
      ended = true;
      const done = () => {
        openChanges--;
        if (openChanges === 0 && changeSettled === settled) settleChange?.();
      };
      if (statusCode >= 200 && statusCode < 300) void refresh('change').finally(done);
      else done();
    };
  }

  return {
    refresh,
    hasList: () => hasList,
    lastFailure: () => failure,
    beginChange,
    pendingChange: () => changeSettled,
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
      settleChange?.();
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
  readonly registry: Registry;
  readonly log: ParticipantIdentityProvidersOptions['log'];
  readonly readiness: Readiness;
  /** The fingerprint of the configuration now running (it covers the participant's issuers). */
  readonly running: (fingerprint: string) => void;
}

/** The participant's IdPs as the running config wants them: on from start or a reload, off after one. */
export interface ParticipantTrust {
  /** See ParticipantIdentityProviders.beginChange; a no-op while they are not trusted. */
  beginChange(): (statusCode: number) => void;
  close(): void;
}

/** What the participant's issuers are trusted through (live/generations.ts's LiveConfig). */
export interface TrustTarget {
  readonly current: { readonly config: GatewayConfig };
  /** Swaps in these issuers besides the configured ones; names those left out for want of keys. */
  setParticipantIssuers(
    issuers: readonly IssuerConfig[],
  ): Promise<{ readonly generation: { readonly fingerprint: string }; readonly leftOut: readonly string[] }>;
  /** Authentication waits while `gate` answers a promise. */
  holdAuthenticationWhile(gate: () => Promise<void> | undefined): void;
  /** Calls `listener` after each swap of the configuration. */
  onSwap(listener: (next: { readonly config: GatewayConfig }) => void): void;
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
  let refreshes: Counter<'result'> | undefined;
  let checked = false;

  function start(config: GatewayConfig, reason: string): ParticipantIdentityProviders {
    // Registered on first use, once: a disabled gateway shows neither the metric nor the check.
    refreshes ??= new Counter({
      name: MetricNames.participantIdpRefreshes,
      help: "Fetches of the participant's identity provider configs (GET /v2/idps) by result; on failure the last known set stays.",
      labelNames: ['result'] as const,
      registers: [options.registry],
    });
    const counter = refreshes;
    const fetchTimeoutMs = config.auth.keySets.fetchTimeoutMs;
    const started = createParticipantIdentityProviders({
      get: options.get,
      config: config.auth.participantIdentityProviders,
      fetchTimeoutMs,
      // The participant's answer, one list fetch, its key sets: each bounded.
      changeBoundMs:
        Math.max(config.upstream.timeoutMs, ...Object.values(config.upstream.operationTimeoutsMs)) + 3 * fetchTimeoutMs,
      issuerProblem: (issuer) => identityProviderProblem(live.current.config, issuer),
      apply: async (issuers) => {
        const { generation, leftOut } = await live.setParticipantIssuers(issuers);
        options.running(generation.fingerprint);
        return leftOut;
      },
      count: (result) => counter.inc({ result }),
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

  function follow(config: GatewayConfig, reason: string): void {
    const wanted = config.auth.participantIdentityProviders;
    if (!wanted.enabled) {
      if (idps === undefined) return;
      idps.close();
      idps = undefined;
      options.log.info({ reason }, 'participant identity providers no longer trusted at the edge');
    } else if (idps === undefined) idps = start(config, reason);
    else idps.follow(wanted, config.auth.keySets.fetchTimeoutMs);
  }

  live.holdAuthenticationWhile(() => idps?.pendingChange());
  // Every swap: a reload may change the section; a swap of the participant's issuers leaves it as it is.
  live.onSwap((next) => follow(next.config, 'reload'));
  follow(live.current.config, 'start');
  return {
    beginChange: () => idps?.beginChange() ?? (() => undefined),
    close() {
      idps?.close();
      idps = undefined;
    },
  };
}
