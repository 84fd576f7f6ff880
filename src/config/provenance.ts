// Where each key's value came from: the default, the config file, an environment variable, or a
// file named with ${file:...}. Errors raised after loading (a port in use) name the source.
import { pathText, type KeyPath } from './schema-paths.js';

export interface ConfigProvenance {
  /** The config file, when one was given. */
  readonly file: string | undefined;
  /** The environment variables that set keys, with the key each set. */
  readonly variables: ReadonlyArray<{ readonly variable: string; readonly path: KeyPath }>;
  /** Keys (as pathText names them) whose value was read from a file: secrets, never printed. */
  readonly fromFiles: ReadonlySet<string>;
  /** Whether the config file itself sets the key. */
  fileSets(path: KeyPath): boolean;
}

/** The variable that set this key or one holding it (a whole section in JSON), if any. */
export function variableOf(provenance: ConfigProvenance, path: KeyPath): string | undefined {
  const text = pathText(path);
  let found: { variable: string; length: number } | undefined;
  for (const { variable, path: set } of provenance.variables) {
    const setText = pathText(set);
    const holds = text === setText || text.startsWith(`${setText}.`) || text.startsWith(`${setText}[`);
    if (holds && (found === undefined || set.length >= found.length)) found = { variable, length: set.length };
  }
  return found?.variable;
}

/** "set by LEDGER_GATEWAY_PORT", "set in gateway.yaml", or "the default". */
export function originOf(provenance: ConfigProvenance, path: KeyPath): string {
  const variable = variableOf(provenance, path);
  if (variable !== undefined) return `set by ${variable}`;
  if (provenance.file !== undefined && provenance.fileSets(path)) return `set in ${provenance.file}`;
  return 'the default';
}
