// Loading: the YAML file, the environment's settings (environment.ts) and ${file:...} references
// (file-references.ts), validated once against the schema. Bad config stops the process at boot
// with every bad key path named, and the environment variable that set it.
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { createSecureContext } from 'node:tls';
import { Ajv, type ErrorObject } from 'ajv';
import { OPERATION_NAMES, WRITE_OPERATION_NAMES } from '../operations.js';
import { parseConfigYaml, readConfigText } from './config-file.js';
import { applySetting, ENVIRONMENT_ALIASES, environmentSettings, nearest } from './environment.js';
import { resolveFileReferences, type ReferenceOutcome } from './file-references.js';
import { variableOf, type ConfigProvenance } from './provenance.js';
import {
  allowedValues,
  childSchema,
  namedKeys,
  pathText,
  ROOT_SCHEMA,
  schemaAt,
  type KeyPath,
  type SchemaNode,
} from './schema-paths.js';
import { ConfigError, ConfigSchema, type GatewayConfig } from './schema.js';

// What loadConfig() throws, for its callers (main.ts, the token tool).
export { ConfigError };

/** The short environment names of the per-pod keys (environment.ts has the convention for every key). */
export const ENVIRONMENT_OVERRIDES = ENVIRONMENT_ALIASES;

const ajv = new Ajv({ allErrors: true, useDefaults: true, coerceTypes: false, strict: false });
const validateConfig = ajv.compile<GatewayConfig>(ConfigSchema);

/** An ajv instance path as key path segments: list indexes as numbers, read from the data itself. */
function segmentsOf(instancePath: string, data: unknown): (string | number)[] {
  const segments: (string | number)[] = [];
  let node = data;
  for (const part of instancePath.split('/').slice(1)) {
    const key = part.replace(/~1/g, '/').replace(/~0/g, '~');
    const index = Array.isArray(node) && /^\d+$/.test(key) ? Number(key) : undefined;
    segments.push(index ?? key);
    node =
      node !== null && typeof node === 'object' ? (node as Record<string | number, unknown>)[index ?? key] : undefined;
  }
  return segments;
}

function valueAt(data: unknown, path: KeyPath): unknown {
  let node = data;
  for (const segment of path)
    node = node !== null && typeof node === 'object' ? (node as Record<string | number, unknown>)[segment] : undefined;
  return node;
}

/** The key the error is about, with the key an unknown-key or missing-key error names. */
function keyOf(error: ErrorObject, data: unknown): KeyPath {
  const base = segmentsOf(error.instancePath, data);
  if (error.keyword === 'additionalProperties')
    return [...base, (error.params as { additionalProperty: string }).additionalProperty];
  if (error.keyword === 'required') return [...base, (error.params as { missingProperty: string }).missingProperty];
  return base;
}

/** How problems name a key, as every other check and --check name it: `auth.issuers[0].bogus`. */
const dotted = pathText;

/** Every key path the schema names, for a key written at the wrong level (`port` at the top). */
const KNOWN_PATHS: readonly (readonly string[])[] = (() => {
  const paths: string[][] = [];
  const walk = (node: ReturnType<typeof schemaAt>, prefix: string[]) => {
    for (const key of namedKeys(node)) {
      paths.push([...prefix, key]);
      walk(schemaAt([key], node), [...prefix, key]);
    }
  };
  walk(schemaAt([]), []);
  return paths;
})();

/**
 * "; did you mean `port`?" for a key in the wrong case, a key of another section (`port` at the top),
 * or one a typo or two away from a key at the same level.
 */
function suggestionFor(parent: KeyPath, key: string): string {
  const siblings = namedKeys(schemaAt(parent));
  const lower = key.toLowerCase();
  const sameName = siblings.find((name) => name.toLowerCase() === lower);
  if (sameName !== undefined) return `; did you mean \`${sameName}\`?`;
  const elsewhere = KNOWN_PATHS.filter((path) => path.at(-1)!.toLowerCase() === lower).map(
    (path) => `\`${path.join('.')}\``,
  );
  if (elsewhere.length > 0) return `; did you mean ${elsewhere.slice(0, 3).join(' or ')}?`;
  const near = nearest(key, siblings);
  return near === undefined ? '' : `; did you mean \`${near}\`?`;
}

/** "must be one of a, b, c" */
function oneOf(values: readonly unknown[]): string {
  const texts = values.map((value) => (typeof value === 'string' ? value : JSON.stringify(value)));
  return `must be one of ${texts.join(', ')}`;
}

/**
 * Why a URL-valued key lacks its scheme (`participant:7575` parses as the scheme "participant:"),
 * or undefined. A host[:port] is echoed to show the fix, never a secret key's value.
 */
function missingSchemeProblem(value: unknown, schemes: readonly string[], secret: boolean): string | undefined {
  if (typeof value !== 'string' || /^[a-z][a-z\d+.-]*:\/\//i.test(value)) return undefined;
  const add = `add ${schemes.join(' or ')}`;
  if (!secret && /^(?:[\w.-]+|\[[\da-f:.]+\])(?::\d{1,5})?(?:\/\S*)?$/i.test(value))
    return `${value} has no scheme: ${add}, e.g. ${schemes[0]}${value}`;
  return `has no scheme: ${add}`;
}

/** A problem with its key, so that the variable or file that set the key can be named with it. */
interface Problem {
  readonly path: KeyPath;
  readonly text: string;
}

function describe(error: ErrorObject, data: unknown): Problem {
  const path = keyOf(error, data);
  const schema = schemaAt(path);
  const problem = (text: string): Problem => ({ path, text: `${dotted(path)}: ${text}` });
  switch (error.keyword) {
    case 'additionalProperties':
      return problem(`unknown key${suggestionFor(path.slice(0, -1), String(path.at(-1)))}`);
    case 'required':
      return problem('required');
    case 'enum':
    case 'const':
    case 'anyOf': {
      const allowed = allowedValues(schema);
      if (allowed !== undefined) return problem(oneOf(allowed));
      const shapes = (schema?.anyOf ?? []).map((branch) => (branch.type === 'object' ? 'an object' : branch.type));
      return problem(shapes.length > 0 ? `must be ${shapes.join(' or ')}` : 'must be one of the allowed values');
    }
    case 'pattern': {
      // ^rediss?:// -> redis:// or rediss://
      const pattern = (error.params as { pattern: string }).pattern;
      const schemes = /^\^([a-z]+)(s)\?:\/\/$/.exec(pattern);
      if (schemes !== null) {
        const list = [`${schemes[1]}://`, `${schemes[1]}${schemes[2]}://`];
        return problem(
          missingSchemeProblem(valueAt(data, path), list, schema?.secret === true) ??
            `must start with ${list.join(' or ')}`,
        );
      }
      return problem(error.message ?? 'invalid');
    }
    default:
      return problem(error.message ?? 'invalid');
  }
}

/**
 * Ajv fills no default inside a union's branch (`rate: { ... } | null`): fills the object branch's
 * defaults where the value is an object, so that `rate: { requests: 10 }` takes perSeconds' default.
 */
function fillUnionDefaults(value: unknown, node: SchemaNode | undefined): void {
  if (node === undefined || value === null || typeof value !== 'object') return;
  if (Array.isArray(value)) {
    const items = node.anyOf?.find((branch) => branch.items !== undefined)?.items ?? node.items;
    for (const item of value) fillUnionDefaults(item, items);
    return;
  }
  const object = value as Record<string, unknown>;
  if (node.anyOf !== undefined) {
    const branch = node.anyOf.find((candidate) => candidate.properties !== undefined);
    for (const [key, child] of Object.entries(branch?.properties ?? {}))
      if (object[key] === undefined && (child as { default?: unknown }).default !== undefined)
        object[key] = structuredClone((child as { default?: unknown }).default);
  }
  for (const key of Object.keys(object)) fillUnionDefaults(object[key], childSchema(node, key));
}

/**
 * Whether an error is a union's bookkeeping rather than a problem: the union's own "must match a
 * schema in anyOf", and the branches the value plainly is not (`must be null` for an object), when
 * the branch of the value's shape named the real problem.
 */
function unionNoise(error: ErrorObject, errors: readonly ErrorObject[], data: unknown): boolean {
  const path = error.instancePath;
  const value = valueAt(data, segmentsOf(path, data));
  const structuredValue = value !== null && typeof value === 'object';
  const deeper = errors.some(
    (other) =>
      other !== error &&
      other.keyword !== 'anyOf' &&
      !(other.keyword === 'type' && other.instancePath === path) &&
      (other.instancePath.startsWith(`${path}/`) || (other.instancePath === path && other.keyword !== 'const')),
  );
  const union = errors.some((other) => other.keyword === 'anyOf' && other.instancePath === path);
  // A value of no branch's shape (`rate: "x"`): the union's line alone says what it may be.
  if (!(structuredValue && deeper)) return union && error.keyword === 'type';
  if (error.keyword === 'anyOf') return true;
  return error.keyword === 'type' && (error.params as { type?: string }).type === 'null';
}

function schemaProblems(errors: readonly ErrorObject[], data: unknown): Problem[] {
  // A union (log.level) reports one error per branch and one for the union; say it once.
  const seen = new Set<string>();
  const problems: Problem[] = [];
  for (const error of errors) {
    if (error.keyword === 'const' && errors.some((e) => e.keyword === 'anyOf' && e.instancePath === error.instancePath))
      continue;
    if (unionNoise(error, errors, data)) continue;
    const problem = describe(error, data);
    if (!seen.has(problem.text)) {
      seen.add(problem.text);
      problems.push(problem);
    }
  }
  return problems;
}

/** Why a server.trustedProxies entry is not an IP address or CIDR, or undefined when it is one. */
function addressOrCidrProblem(entry: string): string | undefined {
  const slash = entry.indexOf('/');
  const address = slash === -1 ? entry : entry.slice(0, slash);
  const version = isIP(address);
  if (version === 0)
    return `"${entry}" is not an IP address or CIDR (e.g. 10.0.0.0/8, fd00::/8; host names are not resolved)`;
  if (slash === -1) return undefined;
  const prefix = entry.slice(slash + 1);
  const most = version === 4 ? 32 : 128;
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > most)
    return `"${entry}": the prefix length must be a whole number from 0 to ${most}`;
  return undefined;
}

/**
 * Why upstream.url is not "sandbox" or a base URL the gateway can forward to, or undefined. The value
 * is echoed only when it is a bare host[:port]: it may hold credentials.
 */
function upstreamUrlProblem(value: string): string | undefined {
  if (value === 'sandbox') return undefined;
  const scheme = missingSchemeProblem(value, ['http://', 'https://'], false);
  if (scheme !== undefined) return scheme;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'not a URL: "sandbox" or the participant\'s base URL, e.g. http://127.0.0.1:7575';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return `must be an http: or https: URL, not ${url.protocol}`;
  if (url.username !== '' || url.password !== '')
    return 'must not carry user information: callers authenticate with their own bearer token';
  if (url.search !== '' || url.hash !== '')
    return "must not carry a query or fragment: each call's own path and query are appended to it";
  return undefined;
}

/** Why upstream.replicas cannot serve: each entry is checked like upstream.url, never "sandbox", names unique. */
function replicaProblems(config: GatewayConfig, urlGiven: boolean, say: (path: KeyPath, text: string) => void): void {
  const replicas = config.upstream.replicas ?? [];
  if (urlGiven) say(['upstream'], "upstream: set url or replicas, not both (replicas are the participant's replicas)");
  const names = new Set<string>();
  replicas.forEach((entry, index) => {
    const { url, name } = typeof entry === 'string' ? { url: entry, name: undefined } : entry;
    const problem = url === 'sandbox' ? 'must be a base URL: the sandbox has no replicas' : upstreamUrlProblem(url);
    if (problem !== undefined) say(['upstream', 'replicas', index], `upstream.replicas[${index}]: ${problem}`);
    const label = name ?? String(index);
    if (names.has(label)) {
      say(
        ['upstream', 'replicas', index, 'name'],
        `upstream.replicas[${index}].name: "${label}" names another replica too`,
      );
    }
    names.add(label);
  });
}

/** Every operation name, `unknown` included (the label of /v2 routes outside the catalogue, which are forwarded). */
const OPERATIONS: ReadonlySet<string> = new Set(OPERATION_NAMES);

function unreadable(file: string, error: unknown): string {
  return `cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`;
}

/** Why a PEM file of CA certificates holds none Node can use, or undefined (Node ignores a bad CA silently). */
function caBundleProblem(pem: string): string | undefined {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) return 'holds no PEM certificate (-----BEGIN CERTIFICATE-----)';
  for (const [index, block] of blocks.entries()) {
    try {
      new X509Certificate(block);
    } catch (error) {
      return `certificate ${index + 1} cannot be read (${(error as Error).message})`;
    }
  }
  return undefined;
}

/** The upstream TLS files, read and parsed: the forwarder reads them only when it is built. */
function upstreamTlsProblems(tls: GatewayConfig['upstream']['tls'], say: (path: KeyPath, text: string) => void): void {
  const files = new Map<'caFile' | 'certFile' | 'keyFile', Buffer>();
  for (const key of ['caFile', 'certFile', 'keyFile'] as const) {
    const file = tls[key];
    if (file === undefined) continue;
    try {
      files.set(key, readFileSync(file));
    } catch (error) {
      say(['upstream', 'tls', key], `upstream.tls.${key}: ${unreadable(file, error)}`);
    }
  }
  const ca = files.get('caFile');
  const caProblem = ca === undefined ? undefined : caBundleProblem(ca.toString('utf8'));
  if (caProblem !== undefined) say(['upstream', 'tls', 'caFile'], `upstream.tls.caFile: ${tls.caFile} ${caProblem}`);
  if ((tls.certFile === undefined) !== (tls.keyFile === undefined)) {
    say(
      ['upstream', 'tls'],
      'upstream.tls: certFile and keyFile go together (the client certificate for mutual TLS and its key)',
    );
    return;
  }
  const cert = files.get('certFile');
  const key = files.get('keyFile');
  if (cert === undefined || key === undefined) return;
  try {
    createSecureContext({ cert, key });
  } catch (error) {
    say(
      ['upstream', 'tls', 'certFile'],
      `upstream.tls: the client certificate or its key cannot be used (${(error as Error).message})`,
    );
  }
}

/**
 * Values the schema's types cannot judge, named by key path like the schema's own problems; only in
 * the sections the schema found sound (`clean`), so that one run names every problem it can.
 */
function valueProblems(config: GatewayConfig, urlGiven: boolean, clean: (section: string) => boolean): Problem[] {
  const problems: Problem[] = [];
  const say = (path: KeyPath, text: string) => problems.push({ path, text });
  if (clean('server')) serverValueProblems(config, say);
  if (clean('upstream')) upstreamValueProblems(config, urlGiven, say);
  if (clean('protection')) redisValueProblems(config.protection.redis, say);
  // Both listeners on one port fail only at listen (EADDRINUSE, exit 1); port 0 picks a free one each.
  if (clean('server') && clean('admin') && config.admin.port !== 0 && config.admin.port === config.server.port) {
    say(
      ['admin', 'port'],
      `admin.port: ${config.admin.port} is server.port too: the admin listener needs a port of its own`,
    );
  }
  return problems;
}

/** Why a Redis host:port (a sentinel or cluster node) cannot be connected to, or undefined. */
function redisNodeProblem(entry: string): string | undefined {
  const colon = entry.lastIndexOf(':');
  const host = entry.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
  const port = Number(entry.slice(colon + 1));
  if (host === '') return `"${entry}" names no host`;
  if (!Number.isInteger(port) || port < 1 || port > 65_535) return `"${entry}": the port must be 1 to 65535`;
  return undefined;
}

/**
 * Redis addresses the schema's patterns cannot judge (a port of 99999 was taken, and failed at each
 * connection). The URL is never echoed: it may carry the password.
 */
function redisValueProblems(redis: GatewayConfig['protection']['redis'], say: (path: KeyPath, text: string) => void) {
  if (redis.url !== undefined) {
    let url: URL | undefined;
    try {
      url = new URL(redis.url);
    } catch {
      say(
        ['protection', 'redis', 'url'],
        'protection.redis.url: not a URL (redis://[user:password@]host[:port][/db]; a port must be 1 to 65535)',
      );
    }
    if (url !== undefined && url.hostname === '')
      say(['protection', 'redis', 'url'], 'protection.redis.url: names no host');
    else if (url !== undefined && url.port === '0')
      say(['protection', 'redis', 'url'], 'protection.redis.url: the port must be 1 to 65535');
  }
  for (const mode of ['sentinel', 'cluster'] as const) {
    redis[mode]?.nodes.forEach((entry, index) => {
      const problem = redisNodeProblem(entry);
      if (problem !== undefined)
        say(['protection', 'redis', mode, 'nodes', index], `protection.redis.${mode}.nodes[${index}]: ${problem}`);
    });
  }
}

function upstreamValueProblems(config: GatewayConfig, urlGiven: boolean, say: (path: KeyPath, text: string) => void) {
  const url = upstreamUrlProblem(config.upstream.url);
  if (url !== undefined) say(['upstream', 'url'], `upstream.url: ${url}`);
  if (config.upstream.replicas !== undefined) replicaProblems(config, urlGiven, say);
  for (const name of Object.keys(config.upstream.operationTimeoutsMs)) {
    if (!OPERATIONS.has(name))
      say(
        ['upstream', 'operationTimeoutsMs', name],
        `upstream.operationTimeoutsMs.${name}: unknown operation name (docs/request-policy.md "Routes and operations" lists them)`,
      );
  }
  for (const name of Object.keys(config.audit.policy.levels)) {
    if (!WRITE_OPERATION_NAMES.has(name))
      say(
        ['audit', 'policy', 'levels', name],
        `audit.policy.levels.${name}: not a write operation (docs/audit.md "What is audited" lists them)`,
      );
  }
  // Read at start by the forwarder: a missing file was an unnamed ENOENT and exit 1.
  upstreamTlsProblems(config.upstream.tls, say);
}

function serverValueProblems(config: GatewayConfig, say: (path: KeyPath, text: string) => void) {
  config.server.trustedProxies.forEach((entry, index) => {
    const problem = addressOrCidrProblem(entry);
    if (problem !== undefined) say(['server', 'trustedProxies', index], `server.trustedProxies[${index}]: ${problem}`);
  });
  const serverTls = config.server.tls;
  if ((serverTls.certFile === undefined) !== (serverTls.keyFile === undefined)) {
    say(['server', 'tls'], "server.tls: certFile and keyFile go together (the listener's certificate and its key)");
  } else if (serverTls.clientCaFile !== undefined && serverTls.certFile === undefined) {
    say(
      ['server', 'tls', 'clientCaFile'],
      'server.tls.clientCaFile: client certificates need TLS on the listener (certFile and keyFile)',
    );
  } else if (serverTls.certFile !== undefined) {
    const problem = serverTlsProblem(serverTls);
    if (problem !== undefined) say(['server', 'tls'], problem);
  }
}

/** The listener's TLS files, read (throws naming the key of a file that cannot be read). */
export function readServerTls(tls: GatewayConfig['server']['tls']): { cert: Buffer; key: Buffer; ca?: Buffer } {
  const read = (key: 'certFile' | 'keyFile' | 'clientCaFile', file: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (error) {
      throw new Error(
        `server.tls.${key}: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
        { cause: error },
      );
    }
  };
  return {
    cert: read('certFile', tls.certFile!),
    key: read('keyFile', tls.keyFile!),
    ...(tls.clientCaFile !== undefined && { ca: read('clientCaFile', tls.clientCaFile) }),
  };
}

/**
 * Why the listener's TLS files cannot serve (unreadable, not PEM, a key that does not match, a CA file
 * without a certificate), or undefined.
 */
function serverTlsProblem(tls: GatewayConfig['server']['tls']): string | undefined {
  try {
    const files = readServerTls(tls);
    createSecureContext(files);
    const caProblem = files.ca === undefined ? undefined : caBundleProblem(files.ca.toString('utf8'));
    return caProblem === undefined ? undefined : `server.tls.clientCaFile: ${tls.clientCaFile} ${caProblem}`;
  } catch (error) {
    const message = (error as Error).message;
    return message.startsWith('server.tls.')
      ? message
      : `server.tls: the certificate, key or client CA cannot be used (${message})`;
  }
}

/** A loaded configuration and where each of its values came from. */
export interface LoadedConfig {
  readonly config: GatewayConfig;
  readonly provenance: ConfigProvenance;
  /** Variables ignored because they hold a Kubernetes service link (`LEDGER_GATEWAY_PORT=tcp://...`). */
  readonly serviceLinks: readonly string[];
}

/**
 * Validates an already-parsed config (the file's contents), after the environment's settings and
 * the ${file:...} references are applied; fills defaults. Precedence: default < file < environment.
 * Every problem is named at once, with the variable that set the key when one did.
 */
export function validateConfiguration(
  raw: unknown,
  source = 'config',
  env: NodeJS.ProcessEnv = {},
  file?: string,
): LoadedConfig {
  if (raw === null || raw === undefined) raw = {};
  if (typeof raw !== 'object' || Array.isArray(raw))
    throw new ConfigError(source, ['(root): must be a mapping of sections']);
  const fileValues = raw;
  const copy = structuredClone(raw) as Record<string, unknown>;
  const references: ReferenceOutcome = { resolved: [], failed: [], problems: [] };
  resolveFileReferences(copy, [], references);
  const { settings, problems, serviceLinks } = environmentSettings(env);
  for (const setting of settings) {
    const value = resolveFileReferences(
      setting.value,
      setting.path,
      references,
      (path) => `${setting.variable} (${pathText(path)})`,
    );
    const problem = applySetting(copy, { ...setting, value });
    if (problem !== undefined) problems.push(problem);
  }
  problems.push(...references.problems);
  // Read before the schema fills in url's default ("sandbox"): replicas take url's place.
  const urlGiven = (copy.upstream as { url?: unknown } | undefined)?.url !== undefined;
  // A value whose file could not be read has its problem already; the schema would judge the reference's text.
  const failed = references.failed.map(pathText);
  const unread = ({ path }: Problem) => failed.some((text) => pathText(path).startsWith(text));
  const provenance: ConfigProvenance = {
    file,
    variables: settings.map(({ variable, path }) => ({ variable, path })),
    fromFiles: new Set(references.resolved.map(pathText)),
    fileSets: (path) => valueAt(fileValues, path) !== undefined,
  };
  const named = ({ path, text }: Problem) => {
    const variable = variableOf(provenance, path);
    return variable === undefined ? text : `${text} (set by ${variable})`;
  };
  fillUnionDefaults(copy, ROOT_SCHEMA);
  const found = validateConfig(copy) ? [] : schemaProblems(validateConfig.errors ?? [], copy);
  // Every problem in one run: the checks of values run in each section whose types are sound.
  const dirty = new Set([...found.map(({ path }) => path), ...references.failed].map((path) => String(path[0] ?? '')));
  const sound = (section: string) => !dirty.has(section) && !dirty.has('');
  problems.push(...found.filter((problem) => !unread(problem)).map(named));
  const config = copy as unknown as GatewayConfig;
  problems.push(...valueProblems(config, urlGiven, sound).map(named));
  if (problems.length > 0) throw new ConfigError(source, problems, { config, sound });
  // With replicas, url holds the first replica's: code that asks "the sandbox or a participant?" stays right.
  const first = config.upstream.replicas?.[0];
  if (first !== undefined) config.upstream.url = typeof first === 'string' ? first : first.url;
  return { config, provenance, serviceLinks };
}

/** validateConfiguration's config alone. */
export function validateGatewayConfig(raw: unknown, source = 'config', env: NodeJS.ProcessEnv = {}): GatewayConfig {
  return validateConfiguration(raw, source, env).config;
}

/** Read, parse and validate a YAML config file (none: the defaults), with the environment's settings. */
export function loadConfiguration(file: string | undefined, env: NodeJS.ProcessEnv = process.env): LoadedConfig {
  if (file === undefined) return validateConfiguration({}, 'defaults + environment', env);
  const read = readConfigText(file);
  if ('problem' in read) throw new ConfigError(file, [read.problem]);
  const parsed = parseConfigYaml(read.text, true);
  if ('problem' in parsed) throw new ConfigError(file, [parsed.problem]);
  return validateConfiguration(parsed.parsed, file, env, file);
}

/** Read, parse and validate a YAML config file, with the environment's settings. */
export function loadConfig(file: string | undefined, env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  return loadConfiguration(file, env).config;
}
