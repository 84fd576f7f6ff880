// Settings from the environment. Any key can be set by one convention: LEDGER_GATEWAY_, then the
// key path with each key in upper snake case and `__` between levels (protection.redis.url is
// LEDGER_GATEWAY_PROTECTION__REDIS__URL; auth.issuers[0].audience is LEDGER_GATEWAY_AUTH__ISSUERS__0__AUDIENCE).
// The value is typed by the key's schema: integers, numbers, true/false, text, and JSON for lists,
// records and objects; then validated with the file. The first six short names stay as aliases.
import { closest, distance } from 'fastest-levenshtein';
import {
  childSchema,
  hasFreeKeys,
  namedKeys,
  pathText,
  ROOT_SCHEMA,
  schemaAt,
  valueKind,
  type KeyPath,
  type SchemaNode,
} from './schema-paths.js';

export const ENVIRONMENT_PREFIX = 'LEDGER_GATEWAY_';

/** The short names of the per-pod keys, older than the convention; both work. */
export const ENVIRONMENT_ALIASES: ReadonlyArray<{ readonly variable: string; readonly path: readonly string[] }> = [
  { variable: 'LEDGER_GATEWAY_UPSTREAM_URL', path: ['upstream', 'url'] },
  { variable: 'LEDGER_GATEWAY_HOST', path: ['server', 'host'] },
  { variable: 'LEDGER_GATEWAY_PORT', path: ['server', 'port'] },
  { variable: 'LEDGER_GATEWAY_ADMIN_HOST', path: ['admin', 'host'] },
  { variable: 'LEDGER_GATEWAY_ADMIN_PORT', path: ['admin', 'port'] },
  { variable: 'LEDGER_GATEWAY_LOG_LEVEL', path: ['log', 'level'] },
];

/** Variables with the prefix that the process reads but that set no key. */
export const PROCESS_VARIABLES: ReadonlyArray<{ readonly variable: string; readonly description: string }> = [
  { variable: 'LEDGER_GATEWAY_CONFIG', description: 'The YAML configuration file, when --config is not given.' },
  {
    variable: 'LEDGER_GATEWAY_DEV_DIR',
    description: 'Where the development signing key is kept (default .dev/ in the package).',
  },
];

/**
 * The names of Kubernetes' service-link variables (`<SERVICE>_SERVICE_HOST`, `<SERVICE>_SERVICE_PORT[_<port>]`,
 * `<SERVICE>_PORT_<n>_<PROTO>[_PROTO|_PORT|_ADDR]`), which the kubelet sets for every Service of the
 * namespace: a Service named `ledger-gateway-...` gives them this prefix. No key's variable has these shapes.
 */
const SERVICE_LINK_NAME =
  /_SERVICE_HOST$|_SERVICE_PORT(?:_[A-Z\d_]+)?$|_PORT_\d+_(?:TCP|UDP|SCTP)(?:_(?:PROTO|PORT|ADDR))?$/;
/** `<SERVICE>_PORT=tcp://10.96.0.12:8080`: the one service link whose name can be a key's (LEDGER_GATEWAY_PORT). */
const SERVICE_LINK_VALUE = /^(?:tcp|udp|sctp):\/\/[^/\s]+:\d+$/;

export interface EnvironmentSetting {
  readonly variable: string;
  readonly path: KeyPath;
  readonly value: unknown;
}

/** `requestTimeoutMs` -> `REQUEST_TIMEOUT_MS`. */
export function upperSnake(key: string): string {
  return key.replace(/([a-z\d])([A-Z])/g, '$1_$2').toUpperCase();
}

/** The convention's variable for a key path. */
export function environmentVariable(path: KeyPath): string {
  return (
    ENVIRONMENT_PREFIX +
    path.map((segment) => (typeof segment === 'number' ? String(segment) : upperSnake(segment))).join('__')
  );
}

/** The nearest of `candidates` to `name`, when it is near enough to be a typo of it. */
export function nearest(name: string, candidates: readonly string[]): string | undefined {
  if (candidates.length === 0) return undefined;
  const best = closest(name, candidates);
  const lower = name.toLowerCase();
  if (best.toLowerCase() === lower) return best;
  return distance(lower, best.toLowerCase()) <= Math.max(2, Math.floor(name.length / 4)) ? best : undefined;
}

type Parsed = { readonly value: unknown } | { readonly problem: string };

function parseValue(text: string, node: SchemaNode): Parsed {
  switch (valueKind(node)) {
    case 'string':
      return { value: text };
    case 'integer':
      return /^[+-]?\d+$/.test(text.trim()) ? { value: Number(text) } : { problem: 'must be an integer' };
    case 'number': {
      const value = Number(text);
      return text.trim() !== '' && Number.isFinite(value) ? { value } : { problem: 'must be a number' };
    }
    case 'boolean': {
      const lower = text.trim().toLowerCase();
      return lower === 'true' || lower === 'false' ? { value: lower === 'true' } : { problem: 'must be true or false' };
    }
    case 'json':
      try {
        return { value: JSON.parse(text) as unknown };
      } catch {
        const shape = node.type === 'array' ? 'a list' : node.type === 'object' ? 'an object' : 'a value';
        return { problem: `must be JSON (${shape}, e.g. ${node.type === 'array' ? '["a","b"]' : '{"key":1}'})` };
      }
  }
}

/** The key path a convention variable names, or why it names none (with the variable meant, when one is near). */
function pathOf(variable: string, corrections = 0): { path: KeyPath } | { problem: string } | undefined {
  const segments = variable.slice(ENVIRONMENT_PREFIX.length).split('__');
  const path: (string | number)[] = [];
  let node: SchemaNode = ROOT_SCHEMA;
  for (const [index, segment] of segments.entries()) {
    if (index > 0 && node.type === 'array' && /^\d+$/.test(segment)) {
      path.push(Number(segment));
      node = childSchema(node, Number(segment))!;
      continue;
    }
    if (hasFreeKeys(node) || node.type === 'array') {
      return { problem: `${pathText(path)} is set as a whole, in JSON: ${environmentVariable(path)}` };
    }
    const keys = namedKeys(node);
    const key = keys.find((name) => upperSnake(name) === segment);
    if (key !== undefined) {
      path.push(key);
      node = childSchema(node, key)!;
      continue;
    }
    // A variable that does not start with a section is someone else's (Kubernetes service links
    // such as LEDGER_GATEWAY_SERVICE_HOST), unless it has the convention's separator.
    if (index === 0 && segments.length === 1) return undefined;
    const problem = `no such key ${pathText([...path, segment.toLowerCase()])}`;
    const near = nearest(segment, keys.map(upperSnake));
    if (near === undefined || corrections >= 3) return { problem };
    const corrected = ENVIRONMENT_PREFIX + [...segments.slice(0, index), near, ...segments.slice(index + 1)].join('__');
    const meant = pathOf(corrected, corrections + 1);
    return { problem: meant !== undefined && 'path' in meant ? `${problem}; did you mean ${corrected}?` : problem };
  }
  return { path };
}

/**
 * The settings the environment makes, ordered so that a more specific variable is applied after a
 * whole section or list, and every problem (named by variable). Empty values count as unset.
 */
export function environmentSettings(env: NodeJS.ProcessEnv): {
  settings: EnvironmentSetting[];
  problems: string[];
  /** Variables that name a key but hold a service link's value (`tcp://...`): ignored, to be warned of once. */
  serviceLinks: string[];
} {
  const settings: EnvironmentSetting[] = [];
  const problems: string[] = [];
  const serviceLinks: string[] = [];
  const notKeys = new Set(PROCESS_VARIABLES.map(({ variable }) => variable));
  for (const variable of Object.keys(env).sort()) {
    const text = env[variable];
    if (!variable.startsWith(ENVIRONMENT_PREFIX) || text === undefined || text === '' || notKeys.has(variable))
      continue;
    // A Service's name must never be able to stop the gateway (issue 34: LEDGER_GATEWAY_PORT=tcp://...).
    if (SERVICE_LINK_NAME.test(variable)) continue;
    if (variable.endsWith('_PORT') && SERVICE_LINK_VALUE.test(text)) {
      serviceLinks.push(variable);
      continue;
    }
    const alias = ENVIRONMENT_ALIASES.find((entry) => entry.variable === variable);
    const resolved = alias !== undefined ? { path: alias.path } : pathOf(variable);
    if (resolved === undefined) continue;
    if ('problem' in resolved) {
      problems.push(`${variable}: ${resolved.problem}`);
      continue;
    }
    const parsed = parseValue(text, schemaAt(resolved.path)!);
    if ('problem' in parsed) problems.push(`${variable}: ${parsed.problem} (sets ${pathText(resolved.path)})`);
    else settings.push({ variable, path: resolved.path, value: parsed.value });
  }
  // An alias and the convention's name for the same key must agree: which one wins would be a guess.
  for (const [index, setting] of settings.entries()) {
    const other = settings.slice(index + 1).find((candidate) => pathText(candidate.path) === pathText(setting.path));
    if (other !== undefined && JSON.stringify(other.value) !== JSON.stringify(setting.value)) {
      problems.push(
        `${setting.variable} and ${other.variable} both set ${pathText(setting.path)}, to different values: keep one`,
      );
    }
  }
  settings.sort((a, b) => a.path.length - b.path.length);
  return { settings, problems, serviceLinks };
}

/**
 * Puts one setting into the raw config (the file's contents). Returns a problem when the file has
 * something else than a section or list where the path goes (that value is reported by the schema).
 */
export function applySetting(raw: Record<string, unknown>, setting: EnvironmentSetting): string | undefined {
  let node: Record<string | number, unknown> = raw;
  for (const [index, segment] of setting.path.entries()) {
    const last = index === setting.path.length - 1;
    if (Array.isArray(node) && typeof segment === 'number' && segment > node.length) {
      const list = pathText(setting.path.slice(0, index));
      return `${setting.variable}: ${list} has ${node.length} entries; set index ${node.length} or below`;
    }
    if (last) {
      node[segment] = setting.value;
      return undefined;
    }
    const child = node[segment];
    if (child === undefined || child === null) node[segment] = typeof setting.path[index + 1] === 'number' ? [] : {};
    else if (typeof child !== 'object') return undefined;
    node = node[segment] as Record<string | number, unknown>;
  }
  return undefined;
}
