// The gateway in its production configuration, as its own process (dist/main.js, as `npm start`
// and the image run it): auth with a JWKS over HTTP, request rules and per-operation authorization,
// traffic protection with limits that never trip at bench rates (so they are evaluated, not hit),
// metrics, tracing bootstrap with context propagation and no exporter, logs at info.
// Sections the build does not have yet are left out, and said so (`missing`).
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { startProcess, waitUntil } from './processes.mjs';
import { PARTICIPANT_ID, USER_ID } from './tokens.mjs';

const TRACING_BOOTSTRAP = 'dist/telemetry/register.js';

/** Keeps only the keys the schema (a TypeBox object) knows, recursively for nested objects. */
function known(schema, value) {
  if (
    schema?.type !== 'object' ||
    schema.properties === undefined ||
    value === null ||
    typeof value !== 'object' ||
    Array.isArray(value)
  )
    return value;
  const kept = {};
  for (const [key, item] of Object.entries(value)) {
    if (key in schema.properties) kept[key] = known(schema.properties[key], item);
  }
  return kept;
}

export async function gatewaySettings(root, { apiPort, adminPort, upstreamUrl, idp }) {
  const { ConfigSchema } = await import(join(root, 'dist/config/schema.js'));
  const wanted = {
    server: { host: '127.0.0.1', port: apiPort },
    admin: { host: '127.0.0.1', port: adminPort },
    upstream: { url: upstreamUrl },
    log: { level: 'info' },
    auth: {
      issuers: [{ issuer: idp.issuer, jwksUrl: idp.jwksUrl }],
      participantId: PARTICIPANT_ID,
    },
    policy: {
      requestRules: true,
      // One authorization rule per measured operation, so the check runs on every call.
      rules: {
        getVersion: [{ anyAuthenticated: true }],
        'getV2StateLedger-end': [{ anyAuthenticated: true }],
        submitAndWaitForTransaction: [{ subjects: [USER_ID] }],
        getUpdateByOffset: [{ subjects: [USER_ID] }],
        onV2Updates: [{ subjects: [USER_ID] }],
      },
    },
    protection: {
      // A per-caller rate limit and concurrency cap far above what the bench sends: evaluated on
      // every call (in memory), never hit.
      default: { rate: { requests: 1_000_000, perSeconds: 1 }, maxInFlightPerPrincipal: 10_000 },
    },
    telemetry: { metrics: { exemplars: false } },
  };
  const config = known(ConfigSchema, wanted);
  const missing = Object.keys(wanted).filter((section) => !(section in config));
  const features = {
    auth: 'auth' in config ? 'RS256 via jwksUrl (verified-token cache: defaults)' : 'missing',
    rules:
      'policy' in config
        ? `requestRules ${config.policy.requestRules ?? 'default'}, ${Object.keys(config.policy.rules ?? {}).length} authorization rules`
        : 'missing',
    protection: 'protection' in config ? 'per-caller rate 1,000,000/s and 10,000 in flight (never hit)' : 'missing',
    metrics: 'on (admin /metrics)',
    tracing: existsSync(join(root, TRACING_BOOTSTRAP))
      ? `--import ./${TRACING_BOOTSTRAP}, no exporter`
      : `missing (${TRACING_BOOTSTRAP} not built)`,
    logging: 'info',
  };
  return { config, missing, features };
}

/**
 * Starts dist/main.js with the settings (and `nodeArgs` for node itself, `env` added to its
 * environment) and waits for /readyz (keys loaded, upstream answering).
 */
export async function startGateway(root, dir, name, settings, { core, logFile, nodeArgs = [], env: extraEnv = {} }) {
  const configFile = join(dir, `${name}.yaml`);
  writeFileSync(configFile, stringify(settings.config));
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !key.startsWith('OTEL_') && !key.startsWith('LEDGER_GATEWAY_')),
  );
  env.NODE_ENV = 'production';
  Object.assign(env, extraEnv);
  const tracing = existsSync(join(root, TRACING_BOOTSTRAP)) ? ['--import', `./${TRACING_BOOTSTRAP}`] : [];
  const handle = startProcess(
    name,
    process.execPath,
    [...nodeArgs, ...tracing, 'dist/main.js', '--config', configFile],
    {
      core,
      cwd: root,
      env,
      stdout: logFile,
      stderr: join(dir, `${name}.stderr.log`),
    },
  );
  const readyz = `http://127.0.0.1:${settings.config.admin.port}/readyz`;
  await waitUntil(handle, 'ready (/readyz 200)', async () => (await fetch(readyz)).status === 200, 30_000);
  return {
    ...handle,
    baseUrl: `http://127.0.0.1:${settings.config.server.port}`,
    metricsUrl: `http://127.0.0.1:${settings.config.admin.port}/metrics`,
  };
}

/** A metric that counts signature verifications, if the build exports one (the token-cache counter). */
const VERIFICATION_METRIC =
  /^(ledger_gateway_[a-z_]*(?:signature|verification|verif)[a-z_]*?)(?:_total)?(?:\{[^}]*\})?\s+([0-9.e+]+)$/m;

export async function verificationCount(metricsUrl) {
  const text = await (await fetch(metricsUrl)).text();
  let total;
  let name;
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || /fail|error|refus/i.test(line)) continue;
    const match = VERIFICATION_METRIC.exec(line);
    if (match) {
      name = match[1];
      total = (total ?? 0) + Number(match[2]);
    }
  }
  return total === undefined ? undefined : { name, total };
}

/** The gateway's V8 heap in use (prom-client's nodejs_heap_size_used_bytes), in bytes; undefined if not on /metrics. */
export async function heapUsedBytes(metricsUrl) {
  const text = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(5_000) })).text();
  const match = /^nodejs_heap_size_used_bytes(?:\{[^}]*\})? ([0-9.e+]+)/m.exec(text);
  return match === null ? undefined : Number(match[1]);
}
