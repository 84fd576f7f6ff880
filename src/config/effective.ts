// The effective configuration as `--check` prints it: every default filled in, each key set by an
// environment variable marked with its name, and every secret redacted (the keys the schema marks
// `secret`, and every value read from a file with ${file:...}).
import { Document, isMap, isScalar, isSeq, type Node } from 'yaml';
import type { ConfigProvenance } from './provenance.js';
import { pathText, schemaAt, type KeyPath } from './schema-paths.js';
import type { GatewayConfig } from './schema.js';

export const REDACTED = 'REDACTED';

/** A redacted secret: a URL keeps its scheme, host, port and path (the user information is the secret), anything else is REDACTED. */
export function redactSecret(value: unknown): unknown {
  if (typeof value !== 'string') return REDACTED;
  if (/^[a-z][a-z\d+.-]*:\/\//i.test(value)) {
    try {
      const url = new URL(value);
      if (url.host !== '') {
        const credentials = url.username !== '' || url.password !== '';
        const path = url.pathname === '/' && !value.endsWith('/') ? '' : url.pathname;
        // A query may carry a password too (ioredis reads ?password=).
        return `${url.protocol}//${credentials ? `${REDACTED}@` : ''}${url.host}${path}${url.search === '' ? '' : `?${REDACTED}`}`;
      }
    } catch {
      // not a URL after all: redacted whole
    }
  }
  return REDACTED;
}

function redactInPlace(value: unknown, path: KeyPath, provenance: ConfigProvenance): unknown {
  if (provenance.fromFiles.has(pathText(path)) || schemaAt(path)?.secret === true) return redactSecret(value);
  if (Array.isArray(value)) return value.map((item, index) => redactInPlace(item, [...path, index], provenance));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, child]) => [key, redactInPlace(child, [...path, key], provenance)]));
  }
  return value;
}

/** A copy of the config with every secret redacted. */
export function redactedConfig(config: GatewayConfig, provenance: ConfigProvenance): Record<string, unknown> {
  return redactInPlace(config, [], provenance) as Record<string, unknown>;
}

function nodeAt(document: Document, path: KeyPath): Node | undefined {
  const node = document.getIn(path, true);
  return isScalar(node) || isMap(node) || isSeq(node) ? node : undefined;
}

/** The effective configuration as YAML, secrets redacted, keys set from the environment commented with the variable. */
export function effectiveConfigYaml(config: GatewayConfig, provenance: ConfigProvenance): string {
  const document = new Document(redactedConfig(config, provenance));
  for (const { variable, path } of provenance.variables) {
    const node = nodeAt(document, path);
    if (node === undefined) continue;
    if (isScalar(node)) node.comment = ` ${variable}`;
    else node.commentBefore = ` ${variable}`;
  }
  return document.toString({ lineWidth: 0 });
}
