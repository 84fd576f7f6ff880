#!/usr/bin/env node
// The process: load config, build the gateway, listen, drain on SIGTERM/SIGINT; SIGHUP: onReload.
import { parseArgs } from 'node:util';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { buildGateway } from './app.js';
import { DEVELOPMENT_ISSUER, developmentBanner, prepareAuthentication } from './auth/dev-mode.js';
import { ConfigError, loadConfig } from './config/load.js';
import type { GatewayConfig } from './config/schema.js';
import { createLogger } from './telemetry/logging.js';
import { activeTracing, startTracing } from './telemetry/tracing.js';

const USAGE = `Usage: ledger-gateway [--config <file>]

Policy gateway for a Canton participant's JSON Ledger API v2.
  --config <file>   YAML configuration (also LEDGER_GATEWAY_CONFIG); defaults apply without one.
  --help            Show this help.`;

function readArguments(): string | undefined {
  const { values } = parseArgs({
    options: { config: { type: 'string', short: 'c' }, help: { type: 'boolean', short: 'h' } },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  return values.config ?? process.env.LEDGER_GATEWAY_CONFIG;
}

/** "sandbox" = the embedded sandbox ledger on a loopback port: for development, never production. */
async function resolveUpstream(config: GatewayConfig): Promise<{ url: string; sandbox?: FastifyInstance }> {
  if (config.upstream.url !== 'sandbox') return { url: config.upstream.url };
  const { buildSandbox } = await import('./sandbox/app.js');
  const sandbox = await buildSandbox({ logger: false });
  const url = await sandbox.listen({ host: '127.0.0.1', port: 0 });
  return { url, sandbox };
}

/**
 * What SIGHUP asks of a running gateway: by the daemons' convention, to re-read its configuration.
 * Live reconfiguration is not built yet: the signal is logged and ignored, and serving goes on.
 */
function onReload(log: FastifyBaseLogger): void {
  log.warn({ signal: 'SIGHUP' }, 'SIGHUP received: configuration reload is not supported yet; ignored');
}

async function main(): Promise<void> {
  // Node's default action for SIGHUP ends the process at once, losing the log lines still buffered:
  // handled from the start, and ignored until the gateway runs.
  let reload: (() => void) | undefined;
  process.on('SIGHUP', () => reload?.());
  // A ConfigError from anywhere in start-up (file, auth section, policy rules) exits 2 (see below).
  const loaded = loadConfig(readArguments());
  // Authentication: with the sandbox and no issuer, the development issuer takes their place
  // (auth/dev-mode.ts); never with a real upstream.
  const { config, development } = await prepareAuthentication(loaded);

  const upstream = await resolveUpstream(config);
  // Started here unless the process was started with --import ./dist/telemetry/register.js (the
  // image and `npm start` do, as before): neither instrumentation patches modules at load (the
  // undici one listens on diagnostics channels, @fastify/otel is a plugin), so loading them after
  // Fastify and undici changes nothing. Undefined only with OTEL_SDK_DISABLED=true.
  const tracing = activeTracing() ?? startTracing();
  const gateway = await buildGateway(config, { upstreamUrl: upstream.url, logger: createLogger(config.log.level), tracingActive: tracing !== undefined });
  const log = gateway.log;
  log.info({ tracing: tracing === undefined ? 'off' : tracing.exporting ? 'exporting' : 'propagating, not exporting' }, 'tracing');
  if (upstream.sandbox !== undefined) {
    log.warn({ upstream: upstream.url }, 'DEVELOPMENT ONLY: forwarding to the embedded sandbox ledger, not a participant');
  }
  const urls = await gateway.listen();
  log.info({ api: urls.api, admin: urls.admin, upstream: upstream.sandbox ? 'sandbox' : upstream.url }, 'ledger-gateway listening');
  if (development !== undefined) {
    log.warn({ issuer: DEVELOPMENT_ISSUER }, 'DEVELOPMENT ONLY: tokens signed by the development key are accepted');
    console.log(developmentBanner(urls.api, development));
  }

  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    log.info({ signal, graceMs: config.shutdown.graceMs }, 'shutting down: readiness off, draining in-flight requests');
    gateway.shutdown()
      .then(() => upstream.sandbox?.close())
      .then(() => tracing?.shutdown()) // exports the spans still buffered
      .then(() => {
        log.info('shutdown complete'); // the async log buffer is flushed when the process exits
        process.exit(0);
      }, (error: unknown) => {
        log.error({ err: error }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  reload = () => onReload(log);
}

/** engines: >=22.12. Older runtimes lack what the gateway relies on (JSON.parse source text for exact int64 digits). */
function requireSupportedNode(): void {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  if (major < 22 || (major === 22 && minor < 12)) {
    console.error(`ledger-gateway: Node.js ${process.versions.node} is not supported; run it on Node.js 22.12 or later (24 LTS recommended; npm scripts use the node@24 devDependency).`);
    process.exit(1);
  }
}
requireSupportedNode();

process.on('unhandledRejection', (reason) => {
  console.error(JSON.stringify({ level: 60, msg: 'unhandled rejection', err: String(reason) }));
  process.exit(1);
});

main().catch((error: unknown) => {
  if (error instanceof ConfigError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
    console.error(`ledger-gateway: ${(error as Error).message}`);
    process.exit(2);
  }
  console.error(`ledger-gateway: failed to start: ${(error as Error).stack ?? String(error)}`);
  process.exit(1);
});
