// The command line: --config, --check, --version, --help. Help and version print and exit here.
import { parseArgs } from 'node:util';
import { BUILD_VERSION, SERVICE_NAME } from '../telemetry/build-info.js';
import { helpText } from './help.js';

export interface Arguments {
  /** The YAML configuration file (--config, else LEDGER_GATEWAY_CONFIG), if any. */
  readonly config: string | undefined;
  /** Validate the configuration, print it, and exit (no listener, no upstream, no tracing). */
  readonly check: boolean;
}

/** Throws Node's ERR_PARSE_ARGS_* errors for an unknown option or a missing value (exit 2 in main.ts). */
export function readArguments(
  argv: readonly string[] = process.argv.slice(2),
  env: NodeJS.ProcessEnv = process.env,
): Arguments {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      config: { type: 'string', short: 'c' },
      check: { type: 'boolean' },
      version: { type: 'boolean', short: 'v' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(helpText());
    process.exit(0);
  }
  if (values.version) {
    process.stdout.write(`${SERVICE_NAME} ${BUILD_VERSION}\n`);
    process.exit(0);
  }
  return { config: values.config ?? env.LEDGER_GATEWAY_CONFIG, check: values.check ?? false };
}
