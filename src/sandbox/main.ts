// Standalone sandbox ledger: `node dist/sandbox/main.js --port N [--host 127.0.0.1] [--version 3.5.10]
// [--submit-delay-ms N] [--seed default|empty]`. Port 0 picks a free port; the URL is printed as
// `sandbox listening on http://…`. SIGTERM/SIGINT close it cleanly.

import { parseArgs } from 'node:util';
import { buildSandbox, DEFAULT_SANDBOX_VERSION } from './app.js';

const DEFAULT_PORT = 7575;

interface CliOptions {
  readonly port: number;
  readonly host: string;
  readonly version: string;
  readonly submitDelayMs: number;
  readonly seed: 'default' | 'empty';
}

function nonNegativeInteger(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 0)
    throw new Error(`--${name} must be a non-negative integer, got "${value}"`);
  return parsed;
}

function parseCliOptions(argv: string[]): CliOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      version: { type: 'string' },
      'submit-delay-ms': { type: 'string' },
      seed: { type: 'string' },
    },
    strict: true,
  });
  const port = nonNegativeInteger(values.port, 'port', DEFAULT_PORT);
  if (port > 65535) throw new Error(`--port must be at most 65535, got ${port}`);
  const seed = values.seed ?? 'default';
  if (seed !== 'default' && seed !== 'empty') throw new Error(`--seed must be "default" or "empty", got "${seed}"`);
  return {
    port,
    host: values.host ?? '127.0.0.1',
    version: values.version ?? DEFAULT_SANDBOX_VERSION,
    submitDelayMs: nonNegativeInteger(values['submit-delay-ms'], 'submit-delay-ms', 0),
    seed,
  };
}

async function main(): Promise<void> {
  let options: CliOptions;
  try {
    options = parseCliOptions(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`sandbox: ${(error as Error).message}\n`);
    process.exit(2);
  }
  const app = await buildSandbox({
    version: options.version,
    submitDelayMs: options.submitDelayMs,
    seed: options.seed,
  });
  await app.listen({ port: options.port, host: options.host });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.port;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  process.stdout.write(`sandbox listening on http://${host}:${port}\n`);

  let closing = false;
  const shutdown = (signal: NodeJS.Signals): void => {
    if (closing) return;
    closing = true;
    process.stdout.write(`sandbox received ${signal}, closing\n`);
    app.close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`sandbox: close failed: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}

main().catch((error: unknown) => {
  process.stderr.write(`sandbox: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
