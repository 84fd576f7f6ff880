// The effective configuration as `--check` prints it: every default filled in, each key set by an
// environment variable marked with its name, and every secret redacted (the keys the schema marks
// `secret`, every value read from a file with ${file:...}, and the query of every URL).
import { Document, isMap, isScalar } from 'yaml';
import type { ConfigProvenance } from './provenance.js';
import { namedKeys, pathText, schemaAt, type KeyPath } from './schema-paths.js';
import type { GatewayConfig } from './schema.js';

export const REDACTED = 'REDACTED';

/**
 * A redacted secret: a URL keeps its scheme, host, port and path (the user information is the
 * secret), anything else is REDACTED.
 */
export function redactSecret(value: unknown): unknown {
  if (typeof value !== 'string') return REDACTED;
  if (/^[a-z][a-z\d+.-]*:\/\//i.test(value)) {
    try {
      const url = new URL(value);
      if (url.host !== '') {
        const credentials = url.username !== '' || url.password !== '';
        const path = url.pathname === '/' && !value.endsWith('/') ? '' : url.pathname;
        // A query may carry a password too (ioredis reads ?password=).
        const query = url.search === '' ? '' : `?${REDACTED}`;
        return `${url.protocol}//${credentials ? `${REDACTED}@` : ''}${url.host}${path}${query}`;
      }
    } catch {
      // not a URL after all: redacted whole
    }
  }
  return REDACTED;
}

const ABSOLUTE_URL = /^[a-z][a-z\d+.-]*:\/\/[^?#]*[?#]/i;

/**
 * A URL whose query or fragment may carry a credential (`jwksUrl: https://idp/keys?access_token=...`):
 * each query value is REDACTED (a name stays when it looks like one; an element without `=` is all
 * value), and a fragment is REDACTED whole. Any other value is returned as it is.
 */
export function redactUrlQuery(value: string): string {
  if (!ABSOLUTE_URL.test(value)) return value;
  const hash = value.indexOf('#');
  const beforeHash = hash === -1 ? value : value.slice(0, hash);
  const question = beforeHash.indexOf('?');
  const base = question === -1 ? beforeHash : beforeHash.slice(0, question);
  const query =
    question === -1
      ? ''
      : `?${beforeHash
          .slice(question + 1)
          .split('&')
          .map((pair) => {
            const equals = pair.indexOf('=');
            if (equals === -1) return pair === '' ? '' : REDACTED;
            const name = pair.slice(0, equals);
            return `${/^[\w.-]{1,64}$/.test(name) ? name : REDACTED}=${REDACTED}`;
          })
          .join('&')}`;
  return `${base}${query}${hash === -1 ? '' : `#${REDACTED}`}`;
}

/** What redaction needs to know of where the values came from: which were read from files. */
type SecretSources = Pick<ConfigProvenance, 'fromFiles'>;

function redactInPlace(value: unknown, path: KeyPath, provenance: SecretSources): unknown {
  if (provenance.fromFiles.has(pathText(path)) || schemaAt(path)?.secret === true) return redactSecret(value);
  if (typeof value === 'string') return redactUrlQuery(value);
  if (Array.isArray(value)) return value.map((item, index) => redactInPlace(item, [...path, index], provenance));
  if (value !== null && typeof value === 'object') {
    // In the schema's order (the environment's settings were added last).
    const order = namedKeys(schemaAt(path));
    const rank = (key: string) => (order.includes(key) ? order.indexOf(key) : order.length);
    const entries = Object.entries(value).sort(([a], [b]) => rank(a) - rank(b));
    return Object.fromEntries(entries.map(([key, child]) => [key, redactInPlace(child, [...path, key], provenance)]));
  }
  return value;
}

/**
 * A copy of the config with every secret redacted: the keys the schema marks `secret`, every
 * value `provenance.fromFiles` names (read with ${file:...}), and the query of every URL.
 */
export function redactedConfig(config: GatewayConfig, provenance: SecretSources): Record<string, unknown> {
  return redactInPlace(config, [], provenance) as Record<string, unknown>;
}

/** The key of the pair at `path` (where a comment on the whole entry goes), or the scalar value itself. */
function commentTarget(
  document: Document,
  path: KeyPath,
): { commentBefore?: string | null; comment?: string | null } | undefined {
  const value = document.getIn(path, true);
  if (isScalar(value)) return value;
  const parent = document.getIn(path.slice(0, -1), true);
  if (!isMap(parent)) return undefined;
  const pair = parent.items.find((item) => isScalar(item.key) && item.key.value === path.at(-1));
  return pair !== undefined && isScalar(pair.key) ? pair.key : undefined;
}

/** The effective configuration as YAML, secrets redacted, keys set from the environment commented with the variable. */
export function effectiveConfigYaml(config: GatewayConfig, provenance: ConfigProvenance): string {
  const document = new Document(redactedConfig(config, provenance));
  for (const { variable, path } of provenance.variables) {
    const target = commentTarget(document, path);
    if (target === undefined) continue;
    if (isScalar(document.getIn(path, true))) target.comment = ` ${variable}`;
    else target.commentBefore = ` ${variable}`;
  }
  return document.toString({ lineWidth: 0 });
}
