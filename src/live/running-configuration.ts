// The live configuration as the process runs it: its first generation and the readiness of its key
// sets, the participant's IdPs, reloads (live/reload.ts) and what GET /config shows of it (the
// secrets read from files redacted, and the keys of the last valid file that wait for a restart).
import type { Logger } from 'pino';
import { keySetsFailure } from '../auth/key-set.js';
import type { BodyBudget } from '../body/budget.js';
import { redactedConfig } from '../config/effective.js';
import type { LoadedConfig } from '../config/load.js';
import type { GatewayConfig } from '../config/schema.js';
import type { Readiness } from '../health.js';
import type { GatewayMetrics } from '../telemetry/metrics.js';
import { createLiveConfig, type LiveConfig, type LiveConfigOptions } from './generations.js';
import { trustParticipantIdentityProviders, type ParticipantGet, type ParticipantTrust } from './participant-idps.js';
import { createReloadMetrics, reloadGateway, type ReloadLog, type ReloadOutcome } from './reload.js';

/** A configuration a reload applies, with where its values came from when known (their file-read secrets). */
export type ReloadSource = GatewayConfig | LoadedConfig;

/** What GET /config answers (server/admin-listener.ts RunningConfigReport). */
export interface ShownConfig {
  readonly fingerprint: string;
  readonly restartRequired: readonly string[];
  readonly config: Record<string, unknown>;
}

export interface RunningConfiguration {
  readonly live: LiveConfig;
  readonly participantIdps: ParticipantTrust;
  /**
   * Re-reads the configuration with `load` (which throws a ConfigError when it is invalid) and swaps
   * in what can change live; logged, counted, never thrown. `trigger` names the cause in the log.
   */
  reload(load: () => Promise<ReloadSource> | ReloadSource, trigger: string): Promise<ReloadOutcome>;
  /** The configuration running now, as GET /config shows it. */
  readonly shown: () => ShownConfig;
}

export interface RunningConfigurationOptions {
  readonly metrics: GatewayMetrics;
  /** The gateway's logger; false: logging is off (a reload's log.level then changes nothing). */
  readonly logger: false | Logger;
  readonly log: ReloadLog;
  readonly readiness: Readiness;
  readonly isTrustedProxy: (address: string) => boolean;
  readonly bodyBudget: BodyBudget;
  /** The worker threads that judge large rule-checked bodies, shared by every generation's policy. */
  readonly largeBodies: LiveConfigOptions['largeBodies'];
  /** What every generation's ledger policy shares (its decoder, package names, the decisions' observer). */
  readonly ledgerPolicy: LiveConfigOptions['ledgerPolicy'];
  /** The gateway's own GET to the participant (its IdP listing): the active replica, upstream.tls. */
  readonly participantGet: ParticipantGet;
  /** Keys whose values were read from files at start (`${file:...}`), redacted in GET /config. */
  readonly secretPaths: ReadonlySet<string> | undefined;
}

/** How long a replaced configuration may still serve a call: the longest upstream bound, or the shutdown grace. */
function retireAfterMs(config: GatewayConfig): number {
  return Math.max(
    config.upstream.timeoutMs,
    config.shutdown.graceMs,
    ...Object.values(config.upstream.operationTimeoutsMs),
  );
}

/** The first generation, with its authenticator's warnings logged, its key sets loading and checked by /readyz. */
function startLiveConfig(config: GatewayConfig, options: RunningConfigurationOptions): LiveConfig {
  const { metrics, log, readiness } = options;
  const live = createLiveConfig(config, {
    metrics,
    log,
    isTrustedProxy: options.isTrustedProxy,
    retireAfterMs: retireAfterMs(config),
    bodyBudget: options.bodyBudget,
    largeBodies: options.largeBodies,
    ledgerPolicy: options.ledgerPolicy,
  });
  const authenticator = live.current.authenticator;
  for (const warning of authenticator.settings.warnings) log.warn({}, warning);
  readiness.add({
    name: 'keys',
    ready: () => live.current.authenticator.ready(),
    detail: () => keySetsFailure(live.current.authenticator.keySets),
  });
  metrics.watchSignatureChecks(() => live.signatureChecks);
  metrics.watchTokenCache(() => live.current.authenticator.tokenCacheBytes);
  authenticator.start(); // key sets load in the background; /readyz reports `keys` until they have
  return live;
}

/**
 * Authentication, protection, the policy, CORS and the version cache's TTLs follow the config: built
 * as one generation, swapped whole on a reload (generations.ts); each exchange pins the current one.
 * The participant's IdPs, while auth.participantIdentityProviders.enabled, follow reloads too.
 */
export function runLiveConfiguration(
  config: GatewayConfig,
  options: RunningConfigurationOptions,
): RunningConfiguration {
  const { logger, log } = options;
  const live = startLiveConfig(config, options);
  const reloads = createReloadMetrics(options.metrics, live.current.fingerprint);
  const participantIdps = trustParticipantIdentityProviders(live, {
    get: options.participantGet,
    metrics: options.metrics,
    log,
    readiness: options.readiness,
    running: (fingerprint) => reloads.running(fingerprint),
  });
  // The secrets read from files are redacted in GET /config: those of every file applied so far.
  const secretPaths = new Set(options.secretPaths);
  let restartRequired: readonly string[] = [];
  return {
    live,
    participantIdps,
    async reload(load, trigger) {
      const outcome = await reloadGateway(
        live,
        async () => {
          const source = await load();
          if (!('provenance' in source)) return source;
          for (const path of source.provenance.fromFiles) secretPaths.add(path);
          return source.config;
        },
        {
          log,
          metrics: reloads,
          trigger,
          setLogLevel: (level) => {
            if (logger !== false) logger.level = level;
          },
        },
      );
      if (outcome.result !== 'invalid') restartRequired = outcome.restartRequired;
      return outcome;
    },
    shown: () => ({
      fingerprint: live.current.fingerprint,
      restartRequired,
      config: redactedConfig(live.current.config, { fromFiles: secretPaths }),
    }),
  };
}
