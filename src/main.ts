#!/usr/bin/env node
// The process: load config, build the gateway, listen, drain on SIGTERM/SIGINT; SIGHUP: onReload.
import type { FastifyInstance } from 'fastify';
import type { Gateway } from './app.js';
import type { ReloadSource } from './live/running-configuration.js';
import {
  DEVELOPMENT_ISSUER,
  developmentBanner,
  loadOrCreateDevelopmentKey,
  prepareAuthentication,
  withDevelopmentIssuer,
} from './auth/dev-mode.js';
import { readArguments } from './cli/arguments.js';
import { checkConfiguration, judgeConfiguration } from './cli/check.js';
import { listenFailure, ListenFailure } from './cli/listen-failure.js';
import { ConfigError } from './config/load.js';
import { withoutFileSecrets } from './config/file-secrets.js';
import { createFileReloads, ReloadRefused } from './live/reload.js';
import type { GatewayConfig } from './config/schema.js';
import { createLogger, flushLog } from './telemetry/logging.js';

/** "sandbox" = the embedded sandbox ledger on a loopback port: for development, never production. */
async function resolveUpstream(config: GatewayConfig): Promise<{ url: string; sandbox?: FastifyInstance }> {
  if (config.upstream.url !== 'sandbox') return { url: config.upstream.url };
  const { buildSandbox } = await import('./sandbox/app.js');
  const sandbox = await buildSandbox({ logger: false });
  const url = await sandbox.listen({ host: '127.0.0.1', port: 0 });
  return { url, sandbox };
}

/**
 * The configuration a reload applies. Development mode was decided at start and stays: in it the
 * development issuer stays trusted (its key is the one start used); in front of a participant, a
 * file that names no issuer (an empty file, one with `log:` only) is refused, never a switch to the
 * development issuer.
 */
async function reloadedConfiguration(file: string, development: boolean): Promise<ReloadSource> {
  let judged;
  try {
    judged = judgeConfiguration(file, process.env, development);
  } catch (error) {
    const auth = error instanceof ConfigError ? error.partial?.config.auth : undefined;
    // The partial config of an invalid file may have any shape where the schema found a problem.
    const noIssuer = Array.isArray(auth?.issuers) && auth.issuers.length === 0;
    if (
      !development &&
      noIssuer &&
      (auth.participantIdentityProviders as { enabled?: boolean } | undefined)?.enabled !== true
    ) {
      throw new ReloadRefused([
        'auth.issuers: the file names no issuer, and this gateway runs in front of a participant: it would trust ' +
          'no token (development mode is decided at start, never by a reload)',
      ]);
    }
    throw error;
  }
  const { config } = judged.loaded;
  if (!development) return judged.loaded;
  const withKey = withDevelopmentIssuer(config, await loadOrCreateDevelopmentKey());
  withKey.auth.issuers = [...config.auth.issuers, ...withKey.auth.issuers];
  return { ...judged.loaded, config: withKey };
}

/**
 * What SIGHUP asks of a running gateway: by the daemons' convention, to re-read its configuration;
 * a change of the config file asks the same (live/reload.ts). Without a file there is nothing to re-read.
 */
function configReloader(
  gateway: Gateway,
  file: string | undefined,
  development: boolean,
): { reload: (trigger: string) => void; close: () => void } {
  if (file === undefined) {
    return {
      reload: (trigger) =>
        gateway.log.warn({ trigger }, 'configuration reload: no config file (--config) to re-read; ignored'),
      close: () => undefined,
    };
  }
  return createFileReloads({
    file,
    log: gateway.log,
    reload: (trigger) => gateway.reload(() => reloadedConfiguration(file, development), trigger),
  });
}

/**
 * The commands of their own, no server: `ledger-gateway audit verify ...`, `policy test|replay ...`
 * and `keys create|list|revoke`. Each names the exit codes whose output is an answer (stdout); any
 * other exit's output is an error (stderr): `policy test` answers "refused" with exit 1.
 */
const COMMANDS: Record<string, () => Promise<{ run: (argv: string[]) => Promise<CommandResult>; answers: number[] }>> =
  {
    audit: async () => ({ run: (await import('./cli/audit-verify.js')).runAuditCommand, answers: [0] }),
    policy: async () => ({ run: (await import('./cli/policy.js')).runPolicyCommand, answers: [0, 1] }),
    keys: async () => ({ run: (await import('./cli/keys.js')).runKeysCommand, answers: [0] }),
  };

interface CommandResult {
  readonly code: number;
  readonly output: string;
}

/** Runs the command `argv` names, if it names one; true when it did (its exit status set). */
async function ranSubcommand(argv: readonly string[]): Promise<boolean> {
  const name = argv[0];
  const command = name !== undefined && Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (command === undefined) return false;
  const { run, answers } = await command();
  const result = await run(argv.slice(1));
  (answers.includes(result.code) ? process.stdout : process.stderr).write(result.output);
  process.exitCode = result.code;
  return true;
}

async function main(): Promise<void> {
  // Node's default action for SIGHUP ends the process at once, losing the log lines still buffered:
  // handled from the start, and ignored until the gateway runs.
  const onSighup: { reload?: () => void } = {};
  process.on('SIGHUP', () => onSighup.reload?.());
  if (await ranSubcommand(process.argv.slice(2))) return;
  // A ConfigError from anywhere in start-up (file, auth section, policy rules) exits 2 (see below).
  const args = readArguments();
  if (args.check) {
    const { effective, notes } = checkConfiguration(args.config);
    process.stdout.write(effective);
    for (const note of notes) console.error(`ledger-gateway: note: ${note}`);
    console.error(`ledger-gateway: the configuration is valid (${args.config ?? 'defaults + environment'})`);
    return;
  }
  // Every problem of every section in one run (cli/check.ts), as --check names them.
  const loadedConfig = judgeConfiguration(args.config).loaded;
  const loaded = loadedConfig.config;
  // Loaded once the config is valid: --help, --version, --check and a bad config answer without the
  // server and the OpenTelemetry SDK (a second or more of start-up).
  const [{ buildGateway }, { activeTracing, startTracing }] = await Promise.all([
    import('./app.js'),
    import('./telemetry/tracing.js'),
  ]);
  const configFile = args.config;
  // Authentication: with the sandbox and no issuer, the development issuer takes their place
  // (auth/dev-mode.ts); never with a real upstream.
  const { config, development } = await prepareAuthentication(loaded);

  const upstream = await resolveUpstream(config);
  // Started here unless the process was started with --import ./dist/telemetry/register.js (the
  // image and `npm start` do, as before): neither instrumentation patches modules at load (the
  // undici one listens on diagnostics channels, @fastify/otel is a plugin), so loading them after
  // Fastify and undici changes nothing. Undefined only with OTEL_SDK_DISABLED=true.
  const tracing = activeTracing() ?? startTracing();
  const logger = createLogger(config.log.level);
  const gateway = await buildGateway(config, {
    upstreamUrl: upstream.url,
    logger,
    tracingActive: tracing !== undefined,
    secretPaths: loadedConfig.provenance.fromFiles,
  });
  const log = gateway.log;
  const tracingMode = tracing === undefined ? 'off' : tracing.exporting ? 'exporting' : 'propagating, not exporting';
  log.info({ tracing: tracingMode, propagators: tracing?.propagators.names.join(',') }, 'tracing');
  if (tracing !== undefined && tracing.propagators.unknown.length > 0) {
    const known = 'tracecontext, baggage, b3, b3multi, none';
    log.warn(
      { unknown: tracing.propagators.unknown, known },
      'OTEL_PROPAGATORS names unknown propagators; they are ignored',
    );
  }
  if (tracing !== undefined && tracing.unsupportedExporters.length > 0) {
    log.warn(
      { unsupported: tracing.unsupportedExporters, supported: 'otlp (http/protobuf, http/json), console, none' },
      'OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_PROTOCOL names an exporter the gateway does not ship; ignored',
    );
  }
  if (loadedConfig.serviceLinks.length > 0) {
    log.warn(
      { variables: loadedConfig.serviceLinks },
      "ignored: these variables hold a Kubernetes service link's address (tcp://...), not a setting",
    );
  }
  if (upstream.sandbox !== undefined) {
    log.warn(
      { upstream: upstream.url },
      'DEVELOPMENT ONLY: forwarding to the embedded sandbox ledger, not a participant',
    );
  }
  const urls = await gateway.listen().catch((error: unknown) => Promise.reject(listenFailure(error, loadedConfig)));
  log.info(
    { api: urls.api, admin: urls.admin, upstream: upstream.sandbox ? 'sandbox' : upstream.url },
    'ledger-gateway listening',
  );
  if (development !== undefined) {
    log.warn({ issuer: DEVELOPMENT_ISSUER }, 'DEVELOPMENT ONLY: tokens signed by the development key are accepted');
    console.log(developmentBanner(urls.api, development));
  }

  const reloader = configReloader(gateway, configFile, development !== undefined);
  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    reloader.close();
    log.info({ signal, graceMs: config.shutdown.graceMs }, 'shutting down: readiness off, draining in-flight requests');
    // The gateway's shutdown exports the spans still buffered, within its bound (server/shutdown.ts).
    // Every line is written before the exit, in the order logged (logging.ts flushLog).
    gateway
      .shutdown()
      .then(() => upstream.sandbox?.close())
      .then(
        () => {
          log.info('shutdown complete');
          return flushLog(logger).then(() => process.exit(0));
        },
        (error: unknown) => {
          log.error({ err: error }, 'shutdown failed');
          return flushLog(logger).then(() => process.exit(1));
        },
      );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  onSighup.reload = () => reloader.reload('SIGHUP');
}

/** engines: >=22.12. Older runtimes lack what the gateway relies on (JSON.parse source text for exact int64 digits). */
function requireSupportedNode(): void {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  if (major < 22 || (major === 22 && minor < 12)) {
    console.error(
      `ledger-gateway: Node.js ${process.versions.node} is not supported; run it on Node.js 22.12 or later (24 LTS recommended; npm scripts use the node@24 devDependency).`,
    );
    process.exit(1);
  }
}
requireSupportedNode();

process.on('unhandledRejection', (reason) => {
  console.error(JSON.stringify({ level: 60, msg: 'unhandled rejection', err: String(reason) }));
  process.exit(1);
});

/**
 * What a start-up failure prints: the message, never a stack (an operator reads it in `kubectl logs`,
 * a stack says nothing to them), on one line with its causes; a ConfigError keeps its list of problems.
 */
function startFailureText(error: unknown): string {
  // Both already say what went wrong and where; a ListenFailure's cause is the raw EADDRINUSE line.
  if (error instanceof ConfigError || error instanceof ListenFailure) return error.message;
  if (!(error instanceof Error)) return typeof error === 'string' ? error : 'an unknown error';
  const parts: string[] = [];
  for (let cause: unknown = error; cause instanceof Error && parts.length < 4; cause = cause.cause) {
    if (!parts.includes(cause.message)) parts.push(cause.message);
  }
  return parts.join(': ').replace(/\s*\n\s*/g, ' ');
}

main().catch((error: unknown) => {
  // Every start-up failure exits 2 (the configuration or the environment it names is at fault);
  // once listening, a failure is the running process's (exit 1).
  const badArgument = (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
  const expected = error instanceof ConfigError || error instanceof ListenFailure || badArgument === true;
  const text = withoutFileSecrets(startFailureText(error));
  console.error(`ledger-gateway: ${expected ? text : `failed to start: ${text}`}`);
  process.exit(2);
});
