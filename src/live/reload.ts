// Reloading the configuration of a running gateway: on SIGHUP and when the config file changes. The
// whole file is read and validated as at start; an invalid one changes nothing (every bad key path
// is logged), a valid one is swapped in (live/generations.ts), and keys that need a restart are named.
import { statSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import { Counter, Gauge } from 'prom-client';
import { configFileShape } from '../config/config-file.js';
import { withoutFileSecrets } from '../config/file-secrets.js';
import { ConfigError, type GatewayConfig } from '../config/schema.js';
import { MetricNames, registeredCounterName, type GatewayMetrics } from '../telemetry/metrics.js';
import type { LiveConfig } from './generations.js';

export type ReloadResult = 'success' | 'invalid' | 'refused';

/** The log line of each outcome that keeps the running configuration. */
export const OUTCOME_MESSAGES = {
  invalid: 'configuration reload: invalid configuration, keeping the running one',
  refused: 'configuration reload refused, keeping the running configuration',
} as const;

/**
 * A valid file the running gateway cannot take: thrown by a reload's load step (e.g. a file that
 * would leave a real participant without an issuer); counted and logged as `refused`.
 */
export class ReloadRefused extends Error {
  readonly problems: readonly string[];
  constructor(problems: readonly string[]) {
    super(problems.join('; '));
    this.name = 'ReloadRefused';
    this.problems = problems;
  }
}

function problemsOf(error: unknown): readonly string[] {
  if (error instanceof ConfigError || error instanceof ReloadRefused) return error.problems;
  return [withoutFileSecrets((error as Error).message)];
}

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

/** ledger_gateway_config_reloads_total{result} and ledger_gateway_config_info{fingerprint} (1 for the running config). */
export function createReloadMetrics(
  { registry, exemplars }: Pick<GatewayMetrics, 'registry' | 'exemplars'>,
  fingerprint: string,
): ReloadMetrics {
  const reloads = new Counter({
    name: registeredCounterName(MetricNames.configReloads, exemplars),
    help: "Configuration reloads by result: success, invalid (the file did not validate), refused (valid, but could not serve, e.g. an issuer's keys could not be fetched).",
    labelNames: ['result'] as const,
    registers: [registry],
  });
  for (const result of ['success', 'invalid', 'refused'] as const) reloads.inc({ result }, 0);
  const info = new Gauge({
    name: MetricNames.configInfo,
    help: 'The running configuration: 1 for the fingerprint (a hash of the effective config) this replica runs.',
    labelNames: ['fingerprint'] as const,
    registers: [registry],
  });
  info.set({ fingerprint }, 1);
  const restartRequired = new Gauge({
    name: MetricNames.configRestartRequired,
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

/** What a reload swaps the configuration of: the live configuration's part for it. */
export type ReloadTarget = Pick<LiveConfig, 'current' | 'restartOnlyChanges' | 'apply'>;

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
  // One wording per outcome, whichever step found it (docs/live-configuration.md).
  const unchanged = (
    result: Exclude<ReloadResult, 'success'>,
    problems: readonly string[],
    restartRequired: readonly string[] = [],
  ): ReloadOutcome => {
    log.error({ trigger, problems, fingerprint: live.current.fingerprint }, OUTCOME_MESSAGES[result]);
    metrics.count(result);
    return { result, fingerprint: live.current.fingerprint, restartRequired, problems };
  };
  let next: GatewayConfig;
  try {
    next = await load();
  } catch (error) {
    return unchanged(error instanceof ReloadRefused ? 'refused' : 'invalid', problemsOf(error));
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
    return unchanged(error instanceof ConfigError ? 'invalid' : 'refused', problemsOf(error), restartRequired);
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

/** What tells one version of the file from another without reading it. */
function statOf(file: string): string {
  try {
    const stat = statSync(file);
    return `${stat.ino}:${stat.size}:${stat.mtimeMs}`;
  } catch {
    return 'missing';
  }
}

/**
 * Calls `changed` once things settle after the config file or anything in its directory changes: the
 * directory is watched, so that a Kubernetes ConfigMap volume's update (the kubelet swaps a `..data`
 * symlink, the file itself is never written) is seen as well as an edit. Settled: no event for
 * `debounceMs`, and the file's size and modification time the same over one more `debounceMs` (a
 * write in place is read once it holds still; Node cannot see the writer close the file).
 */
export function watchConfigFile(
  file: string,
  changed: () => void,
  options: { debounceMs?: number; onError?: (error: Error) => void } = {},
): ConfigFileWatch {
  const debounceMs = options.debounceMs ?? 250;
  const name = basename(file);
  let timer: NodeJS.Timeout | undefined;
  let seen: string | undefined;
  const arm = () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = setTimeout(settle, debounceMs);
    timer.unref();
  };
  function settle() {
    timer = undefined;
    const now = statOf(file);
    if (now !== seen) {
      seen = now;
      arm();
      return;
    }
    seen = undefined;
    changed();
  }
  const schedule = (_event: string, entry: string | Buffer | null) => {
    // In a ConfigMap volume, the entries that move are `..data` and the timestamped directories.
    const relevant = entry === null || String(entry) === name || String(entry).startsWith('..');
    if (!relevant) return;
    seen = undefined;
    arm();
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

export interface FileReloads {
  /** Asks for a reload; `file` (a change seen by the watch) is checked for dropped keys first. */
  reload(trigger: string): void;
  close(): void;
}

/** Dropped key paths named in the log line; the count says how many more. */
const DROPPED_LOGGED = 20;

/**
 * The reloads of one config file, one at a time. A change seen by the watch that drops a key or a
 * list item the applied file has, at any depth, or whose last line is not ended (what a half-written
 * file looks like: a valid YAML prefix, cut between lines or inside one) is not applied on this
 * read: it is read again once it has not changed for `secondLookMs`, and applied only if it is still
 * the same. SIGHUP is the operator's own look: it applies what it reads.
 */
export function createFileReloads(options: {
  readonly file: string;
  readonly reload: (trigger: string) => Promise<ReloadOutcome>;
  readonly log: ReloadLog;
  readonly secondLookMs?: number;
  readonly debounceMs?: number;
}): FileReloads {
  const { file, log } = options;
  const secondLookMs = options.secondLookMs ?? 2_000;
  let applied = configFileShape(file);
  let pending: string | undefined;
  let secondLook: NodeJS.Timeout | undefined;
  const attempt = async (trigger: string): Promise<void> => {
    clearTimeout(secondLook);
    const shape = configFileShape(file);
    const dropped =
      shape === undefined || applied === undefined ? [] : [...applied.keys].filter((key) => !shape.keys.has(key));
    const suspect = shape !== undefined && (dropped.length > 0 || !shape.endsWhole);
    if (trigger === 'file' && suspect && shape.digest !== pending) {
      pending = shape.digest;
      log.warn(
        { trigger, dropped: dropped.slice(0, DROPPED_LOGGED), droppedCount: dropped.length, secondLookMs },
        dropped.length > 0
          ? 'configuration reload: the file drops keys the running configuration has; it is read again once unchanged'
          : "configuration reload: the file's last line has no line break (a write under way?); it is read again once unchanged",
      );
      secondLook = setTimeout(() => void run('file'), secondLookMs);
      secondLook.unref();
      return;
    }
    pending = undefined;
    const outcome = await options.reload(trigger);
    if (outcome.result === 'success' && shape !== undefined) applied = shape;
  };
  const run = serializeReloads(attempt);
  const watcher = watchConfigFile(file, () => void run('file'), {
    debounceMs: options.debounceMs,
    onError: (error) =>
      log.warn({ err: error.message }, 'configuration reload: cannot watch the config file; SIGHUP still reloads'),
  });
  return {
    reload: (trigger) => void run(trigger),
    close() {
      clearTimeout(secondLook);
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
