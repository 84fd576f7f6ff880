// Loading: YAML file + environment overrides, validated once against the schema.
// Bad config stops the process at boot with every bad key path named.
import { accessSync, constants, readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { createSecureContext } from 'node:tls';
import { Ajv, type ErrorObject } from 'ajv';
import { parse as parseYaml } from 'yaml';
import { OPERATION_NAMES } from '../operations.js';
import { ConfigError, ConfigSchema, type GatewayConfig } from './schema.js';

// What loadConfig() throws, for its callers (main.ts, the token tool).
export { ConfigError };

/** The few keys operators set per pod, by environment variable. */
export const ENVIRONMENT_OVERRIDES: ReadonlyArray<{ variable: string; path: readonly string[]; type: 'string' | 'integer' }> = [
  { variable: 'LEDGER_GATEWAY_UPSTREAM_URL', path: ['upstream', 'url'], type: 'string' },
  { variable: 'LEDGER_GATEWAY_HOST', path: ['server', 'host'], type: 'string' },
  { variable: 'LEDGER_GATEWAY_PORT', path: ['server', 'port'], type: 'integer' },
  { variable: 'LEDGER_GATEWAY_ADMIN_HOST', path: ['admin', 'host'], type: 'string' },
  { variable: 'LEDGER_GATEWAY_ADMIN_PORT', path: ['admin', 'port'], type: 'integer' },
  { variable: 'LEDGER_GATEWAY_LOG_LEVEL', path: ['log', 'level'], type: 'string' },
];

const ajv = new Ajv({ allErrors: true, useDefaults: true, coerceTypes: false, strict: false });
const validateConfig = ajv.compile<GatewayConfig>(ConfigSchema);

function keyPath(error: ErrorObject): string {
  const base = error.instancePath.split('/').filter(Boolean).join('.');
  if (error.keyword === 'additionalProperties') {
    const extra = (error.params as { additionalProperty: string }).additionalProperty;
    return base ? `${base}.${extra}` : extra;
  }
  if (error.keyword === 'required') {
    const missing = (error.params as { missingProperty: string }).missingProperty;
    return base ? `${base}.${missing}` : missing;
  }
  return base || '(root)';
}

function describe(error: ErrorObject): string {
  const path = keyPath(error);
  switch (error.keyword) {
    case 'additionalProperties': return `${path}: unknown key`;
    case 'required': return `${path}: required`;
    case 'enum':
    case 'const': return `${path}: must be one of ${JSON.stringify((error.params as { allowedValues?: unknown[] }).allowedValues ?? (error.params as { allowedValue?: unknown }).allowedValue)}`;
    default: return `${path}: ${error.message ?? 'invalid'}`;
  }
}

function problemsOf(errors: readonly ErrorObject[]): string[] {
  // A union (log.level) reports one error per branch; say it once.
  const seen = new Set<string>();
  const problems: string[] = [];
  for (const error of errors) {
    if (error.keyword === 'const' && errors.some((e) => e.keyword === 'anyOf' && e.instancePath === error.instancePath)) continue;
    const text = error.keyword === 'anyOf' ? `${keyPath(error)}: must be one of the allowed values` : describe(error);
    if (!seen.has(text)) {
      seen.add(text);
      problems.push(text);
    }
  }
  return problems;
}

function applyEnvironment(raw: Record<string, unknown>, env: NodeJS.ProcessEnv, problems: string[]): void {
  for (const { variable, path, type } of ENVIRONMENT_OVERRIDES) {
    const value = env[variable];
    if (value === undefined || value === '') continue;
    let parsed: string | number = value;
    if (type === 'integer') {
      if (!/^\d+$/.test(value)) {
        problems.push(`${variable}: must be an integer (sets ${path.join('.')})`);
        continue;
      }
      parsed = Number(value);
    }
    let node = raw;
    for (const key of path.slice(0, -1)) {
      const child = node[key];
      if (child === undefined || child === null) node[key] = {};
      else if (typeof child !== 'object' || Array.isArray(child)) break;
      node = node[key] as Record<string, unknown>;
    }
    node[path[path.length - 1]!] = parsed;
  }
}

/** Why a server.trustedProxies entry is not an IP address or CIDR, or undefined when it is one. */
function addressOrCidrProblem(entry: string): string | undefined {
  const slash = entry.indexOf('/');
  const address = slash === -1 ? entry : entry.slice(0, slash);
  const version = isIP(address);
  if (version === 0) return `"${entry}" is not an IP address or CIDR (e.g. 10.0.0.0/8, fd00::/8; host names are not resolved)`;
  if (slash === -1) return undefined;
  const prefix = entry.slice(slash + 1);
  const most = version === 4 ? 32 : 128;
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > most) return `"${entry}": the prefix length must be a whole number from 0 to ${most}`;
  return undefined;
}

/** Why upstream.url is not "sandbox" or a base URL the gateway can forward to, or undefined. The value is never echoed: it may hold credentials. */
function upstreamUrlProblem(value: string): string | undefined {
  if (value === 'sandbox') return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'not a URL: "sandbox" or the participant\'s base URL, e.g. http://127.0.0.1:7575';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `must be an http: or https: URL, not ${url.protocol}`;
  if (url.username !== '' || url.password !== '') return 'must not carry user information: callers authenticate with their own bearer token';
  if (url.search !== '' || url.hash !== '') return 'must not carry a query or fragment: each call\'s own path and query are appended to it';
  return undefined;
}

/** Every operation name, `unknown` included (the label of /v2 routes outside the catalogue, which are forwarded). */
const OPERATIONS: ReadonlySet<string> = new Set(OPERATION_NAMES);

/** Values the schema's types cannot judge, named by key path like the schema's own problems. */
function valueProblems(config: GatewayConfig): string[] {
  const problems: string[] = [];
  config.server.trustedProxies.forEach((entry, index) => {
    const problem = addressOrCidrProblem(entry);
    if (problem !== undefined) problems.push(`server.trustedProxies[${index}]: ${problem}`);
  });
  const url = upstreamUrlProblem(config.upstream.url);
  if (url !== undefined) problems.push(`upstream.url: ${url}`);
  for (const name of Object.keys(config.upstream.operationTimeoutsMs)) {
    if (!OPERATIONS.has(name)) problems.push(`upstream.operationTimeoutsMs.${name}: unknown operation name (docs/request-policy.md "Routes and operations" lists them)`);
  }
  // Read at start by the forwarder: a missing file was an unnamed ENOENT and exit 1.
  for (const key of ['caFile', 'certFile', 'keyFile'] as const) {
    const file = config.upstream.tls[key];
    if (file === undefined) continue;
    try {
      accessSync(file, constants.R_OK);
    } catch (error) {
      problems.push(`upstream.tls.${key}: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
  }
  const serverTls = config.server.tls;
  if ((serverTls.certFile === undefined) !== (serverTls.keyFile === undefined)) {
    problems.push('server.tls: certFile and keyFile go together (the listener\'s certificate and its key)');
  } else if (serverTls.clientCaFile !== undefined && serverTls.certFile === undefined) {
    problems.push('server.tls.clientCaFile: client certificates need TLS on the listener (certFile and keyFile)');
  } else if (serverTls.certFile !== undefined) {
    const problem = serverTlsProblem(serverTls);
    if (problem !== undefined) problems.push(problem);
  }
  // Both listeners on one port fail only at listen (EADDRINUSE, exit 1); port 0 picks a free one each.
  if (config.admin.port !== 0 && config.admin.port === config.server.port) {
    problems.push(`admin.port: ${config.admin.port} is server.port too: the admin listener needs a port of its own`);
  }
  return problems;
}

/** The listener's TLS files, read (throws naming the key of a file that cannot be read). */
export function readServerTls(tls: GatewayConfig['server']['tls']): { cert: Buffer; key: Buffer; ca?: Buffer } {
  const read = (key: 'certFile' | 'keyFile' | 'clientCaFile', file: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (error) {
      throw new Error(`server.tls.${key}: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
  };
  return {
    cert: read('certFile', tls.certFile!),
    key: read('keyFile', tls.keyFile!),
    ...(tls.clientCaFile !== undefined && { ca: read('clientCaFile', tls.clientCaFile) }),
  };
}

/** Why the listener's TLS files cannot serve (unreadable, not PEM, a key that does not match), or undefined. */
function serverTlsProblem(tls: GatewayConfig['server']['tls']): string | undefined {
  try {
    const files = readServerTls(tls);
    createSecureContext(files);
    return undefined;
  } catch (error) {
    const message = (error as Error).message;
    return message.startsWith('server.tls.') ? message : `server.tls: the certificate, key or client CA cannot be used (${message})`;
  }
}

/** Validate an already-parsed config object (file contents + overrides); fills defaults. */
export function validateGatewayConfig(raw: unknown, source = 'config', env: NodeJS.ProcessEnv = {}): GatewayConfig {
  const problems: string[] = [];
  if (raw === null || raw === undefined) raw = {};
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new ConfigError(source, ['(root): must be a mapping of sections']);
  const copy = structuredClone(raw) as Record<string, unknown>;
  applyEnvironment(copy, env, problems);
  if (!validateConfig(copy)) problems.push(...problemsOf(validateConfig.errors ?? []));
  else problems.push(...valueProblems(copy as unknown as GatewayConfig));
  if (problems.length > 0) throw new ConfigError(source, problems);
  return copy as unknown as GatewayConfig;
}

/** Read, parse and validate a YAML config file, with environment overrides. */
export function loadConfig(file: string | undefined, env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  if (file === undefined) return validateGatewayConfig({}, 'defaults + environment', env);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(file, [`cannot read the file: ${(error as Error).message}`]);
  }
  let parsed: unknown;
  try {
    parsed = parseYaml(text, { prettyErrors: true, uniqueKeys: true });
  } catch (error) {
    throw new ConfigError(file, [`not valid YAML: ${(error as Error).message}`]);
  }
  return validateGatewayConfig(parsed, file, env);
}
