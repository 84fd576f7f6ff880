// --help: the options, the exit codes, and every environment variable the gateway reads, the
// config keys' ones generated from the schema so that the list cannot fall behind it.
import { ENVIRONMENT_ALIASES, PROCESS_VARIABLES, environmentVariable } from '../config/environment.js';
import { pathText, settableKeys, type ValueKind } from '../config/schema-paths.js';

/** The OpenTelemetry variables the gateway itself reads; the SDK reads the rest of OTEL_* when it runs. */
export const OTEL_VARIABLES: ReadonlyArray<readonly [string, string]> = [
  ['OTEL_SDK_DISABLED', 'true: no tracing at all; trace headers pass through untouched.'],
  [
    'OTEL_PROPAGATORS',
    'Trace context formats read and sent: tracecontext, baggage, b3, b3multi, none (default tracecontext,baggage).',
  ],
  [
    'OTEL_TRACES_EXPORTER',
    'otlp, console or none; unset and no OTLP endpoint: spans are not exported (context is still propagated).',
  ],
  ['OTEL_EXPORTER_OTLP_ENDPOINT', 'Where spans are exported (OTLP); setting it turns exporting on.'],
  ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'The same, for traces only.'],
  ['OTEL_EXPORTER_OTLP_PROTOCOL', 'http/protobuf (default) or http/json; grpc is not shipped.'],
  ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'The same, for traces only.'],
  ['OTEL_SERVICE_NAME', 'The service name on spans (default ledger-gateway).'],
  ['OTEL_RESOURCE_ATTRIBUTES', 'More resource attributes on spans (key=value,...).'],
];

const KIND_TEXT: Record<ValueKind, string> = {
  string: 'text',
  integer: 'integer',
  number: 'number',
  boolean: 'true|false',
  json: 'JSON',
};

function table(rows: ReadonlyArray<readonly [string, string]>, indent: string): string[] {
  const width = Math.max(...rows.map(([name]) => name.length)) + 2;
  return rows.map(([name, text]) => `${indent}${name.padEnd(width)}${text}`);
}

export function helpText(): string {
  const aliases = new Map(ENVIRONMENT_ALIASES.map(({ variable, path }) => [pathText(path), variable]));
  const keys = settableKeys().map(({ path, kind, secret }): [string, string] => {
    const alias = aliases.get(pathText(path));
    return [
      environmentVariable(path),
      `${KIND_TEXT[kind]}${secret ? ', secret' : ''}${alias === undefined ? '' : ` (also ${alias})`}`,
    ];
  });
  return [
    'Usage: ledger-gateway [--config <file>] [--check]',
    '       ledger-gateway audit verify [--public-key <PEM file>] <trail files or directories...>',
    '       ledger-gateway policy test --config <file> --request <JSON file> [--claims <JSON file>]',
    '       ledger-gateway policy replay --trail <directory> --config <file>',
    '       ledger-gateway keys create|list|revoke [--config <file>] ...',
    '',
    "Policy gateway for a Canton participant's JSON Ledger API v2.",
    '  -c, --config <file>  YAML configuration (also LEDGER_GATEWAY_CONFIG); defaults apply without one.',
    '  --check              Load and validate the configuration and every file it names (keys, certificates,',
    '                       ${file:...} secrets), print the effective configuration with secrets redacted,',
    '                       and exit. Starts no listener, contacts nothing.',
    '  -v, --version        Print the version and exit.',
    '  -h, --help           Show this help.',
    '  audit verify         Check an audit trail (docs/audit.md): its hash chain and, with --public-key, its',
    '                       signed digests; exit 0 when it holds, 1 naming the first record changed, removed',
    '                       or reordered.',
    "  policy test          The ledger policy's decision on one call (docs/ledger-policy.md): the rule that",
    '                       made it and why; exit 0 allowed, 1 refused.',
    "  policy replay        Every write of an audit trail decided again under the config's ledger policy:",
    '                       what would change, and what the recorded level cannot decide; exit 1 when a',
    '                       recorded write would be refused.',
    '  keys                 Gateway keys in the store consumers.keys names (docs/consumers.md): create one for a',
    '                       consumer (printed once; only its hash is kept), list them, revoke one by id.',
    '',
    'Exit status: 0 ok; 2 a bad configuration or argument, or a port that cannot be listened on; 1 any other failure.',
    '',
    'Environment (precedence: schema defaults < config file < environment):',
    ...table(
      PROCESS_VARIABLES.map(({ variable, description }) => [variable, description]),
      '  ',
    ),
    '',
    '  Every config key, as LEDGER_GATEWAY_ and its key path in upper snake case with __ between levels',
    '  (protection.redis.url: LEDGER_GATEWAY_PROTECTION__REDIS__URL; a list entry by its index:',
    '  LEDGER_GATEWAY_AUTH__ISSUERS__0__AUDIENCE). Lists, records and objects are JSON. An empty value',
    "  counts as unset. A text value may hold ${file:/path}: the file's contents (a mounted secret).",
    ...table(keys, '    '),
    '',
    '  OpenTelemetry:',
    ...table(OTEL_VARIABLES, '    '),
    '    and the other OTEL_* variables the OpenTelemetry SDK reads when spans are exported (sampler,',
    '    exporter headers and protocol, batch sizes).',
    '',
  ].join('\n');
}
// x
