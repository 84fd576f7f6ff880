// Reloading the configuration of a running gateway: on SIGHUP and when the config file changes. The
// whole file is read and validated as at start; an invalid one changes nothing (every bad key path
// is logged), a valid one is swapped in (live/generations.ts), and keys that need a restart are named.
import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import { Counter, Gauge, type Registry } from 'prom-client';
import { ConfigError, type GatewayConfig } from '../config/schema.js';
import { MetricNames } from '../telemetry/metrics.js';

export type ReloadResult = 'success' | 'invalid' | 'refused';

export interface ReloadOutcome {
  readonly result: ReloadResult;
  /** The fingerprint the gateway runs after the attempt (unchanged unless result is success). */
  readonly fingerprint: string;
  /** Key paths that changed in the file but need a restart (left as they are). */
  readonly restartRequired: readonly string[];
  /** Why the file was not applied: its problems, or the reason a valid file was refused. */
  readonly problems: readonly string[];
}

export interface ReloadMetrics {
  count(result: ReloadResult): void;
  running(fingerprint: string): void;
  /** How many keys of the last valid file wait for a restart. */
  restartRequired(keys: number): void;
}

/** Their names are in telemetry/metrics.ts, with every other metric's. */
export const ReloadMetricNames = {
  reloads: MetricNames.configReloads,
  info: MetricNames.configInfo,
  restartRequired: MetricNames.configRestartRequired,
} as const;

/** ledger_gateway_config_reloads_total{result} and ledger_gateway_config_info{fingerprint} (1 for the running config). */
export function createReloadMetrics(registry: Registry, fingerprint: string): ReloadMetrics {
  const reloads = new Counter({
    name: ReloadMetricNames.reloads,
    help: "Configuration reloads by result: success, invalid (the file did not validate), refused (valid, but could not serve, e.g. an issuer's keys could not be fetched).",
    labelNames: ['result'] as const,
    registers: [registry],
  });
  for (const result of ['success', 'invalid', 'refused'] as const) reloads.inc({ result }, 0);
  const info = new Gauge({
    name: ReloadMetricNames.info,
    help: 'The running configuration: 1 for the fingerprint (a hash of the effective config) this replica runs.',
    labelNames: ['fingerprint'] as const,
    registers: [registry],
  });
  info.set({ fingerprint }, 1);
  const restartRequired = new Gauge({
    name: ReloadMetricNames.restartRequired,
    help: 'Keys of the last valid config file read by a reload whose new values take effect only on a restart (0: the file runs whole).',
    registers: [registry],
  });
  restartRequired.set(0);
  return {
    count: (result) => reloads.inc({ result }),
    restartRequired: (keys) => restartRequired.set(keys),
    running(next) {
      info.reset();
      info.set({ fingerprint: next }, 1);
    },
  };
}

export interface ReloadLog {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
}

/** What a reload swaps the configuration of (live/generations.ts's LiveConfig). */
export interface ReloadTarget {
  readonly current: { readonly fingerprint: string };
  /** The key paths of `next` that differ from the running config and need a restart. */
  restartOnlyChanges(next: GatewayConfig): string[];
  /** Swaps in what can change live; throws and keeps the running config when it cannot serve. */
  apply(next: GatewayConfig): Promise<{ readonly fingerprint: string; readonly config: GatewayConfig }>;
}

/** One reload: load (throws ConfigError when invalid), name restart-only keys, apply; logged and counted. */
export async function reloadGateway(
  live: ReloadTarget,
  load: () => Promise<GatewayConfig> | GatewayConfig,
  dependencies: {
    readonly log: ReloadLog;
    readonly metrics: ReloadMetrics;
    readonly setLogLevel: (level: string) => void;
    readonly trigger: string;
  },
): Promise<ReloadOutcome> {
  const { log, metrics, trigger } = dependencies;
  const unchanged = (
    result: ReloadResult,
    problems: readonly string[],
    restartRequired: readonly string[] = [],
  ): ReloadOutcome => {
    metrics.count(result);
    return { result, fingerprint: live.current.fingerprint, restartRequired, problems };
  };
  let next: GatewayConfig;
  try {
    next = await load();
  } catch (error) {
    const problems = error instanceof ConfigError ? error.problems : [(error as Error).message];
    log.error(
      { trigger, problems, fingerprint: live.current.fingerprint },
      'configuration reload: invalid configuration, keeping the running one',
    );
    return unchanged('invalid', problems);
  }
  const restartRequired = live.restartOnlyChanges(next);
  metrics.restartRequired(restartRequired.length);
  if (restartRequired.length > 0) {
    log.warn(
      { trigger, keys: restartRequired },
      'configuration reload: these keys change only on a restart and keep their running values',
    );
  }
  let applied;
  try {
    applied = await live.apply(next);
  } catch (error) {
    const problems = error instanceof ConfigError ? error.problems : [(error as Error).message];
    const result = error instanceof ConfigError ? 'invalid' : 'refused';
    log.error(
      { trigger, problems, fingerprint: live.current.fingerprint },
      'configuration reload refused, keeping the running configuration',
    );
    return unchanged(result, problems, restartRequired);
  }
  dependencies.setLogLevel(applied.config.log.level);
  metrics.count('success');
  metrics.running(applied.fingerprint);
  log.info({ trigger, fingerprint: applied.fingerprint }, 'configuration reloaded');
  return { result: 'success', fingerprint: applied.fingerprint, restartRequired, problems: [] };
}

export interface ConfigFileWatch {
  close(): void;
}

/**
 * Calls `changed` once things settle (`debounceMs`) after the config file or anything in its
 * directory changes: the directory is watched, so that a Kubernetes ConfigMap volume's update (the
 * kubelet swaps a `..data` symlink, the file itself is never written) is seen as well as an edit.
 */
export function watchConfigFile(
  file: string,
  changed: () => void,
  options: { debounceMs?: number; onError?: (error: Error) => void } = {},
): ConfigFileWatch {
  const debounceMs = options.debounceMs ?? 250;
  const name = basename(file);
  let timer: NodeJS.Timeout | undefined;
  const schedule = (_event: string, entry: string | Buffer | null) => {
    // In a ConfigMap volume, the entries that move are `..data` and the timestamped directories.
    const relevant = entry === null || String(entry) === name || String(entry).startsWith('..');
    if (!relevant) return;
    if (timer !== undefined) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      changed();
    }, debounceMs);
    timer.unref();
  };
  let watcher: FSWatcher;
  try {
    watcher = watch(dirname(file), { persistent: false }, schedule);
  } catch (error) {
    options.onError?.(error as Error);
    return { close: () => undefined };
  }
  watcher.on('error', (error) => options.onError?.(error));
  return {
    close() {
      if (timer !== undefined) clearTimeout(timer);
      watcher.close();
    },
  };
}

/** Serializes reloads: one runs at a time, and a request made while one runs is run once after it. */
export function serializeReloads(run: (trigger: string) => Promise<unknown>): (trigger: string) => Promise<void> {
  let running: Promise<void> | undefined;
  let again: string | undefined;
  const loop = async (trigger: string): Promise<void> => {
    let next: string | undefined = trigger;
    while (next !== undefined) {
      const current = next;
      again = undefined;
      await run(current).catch(() => undefined);
      next = again;
    }
    running = undefined;
  };
  return (trigger) => {
    if (running !== undefined) {
      again = trigger;
      return running;
    }
    running = loop(trigger);
    return running;
  };
}
