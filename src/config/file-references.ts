// `${file:/path}` in a string value, in the config file or an environment variable, is replaced by
// that file's contents (trailing line breaks removed): secrets such as the Redis password or an HMAC
// secret can stay in a mounted Kubernetes Secret instead of the config file. The syntax is the
// OpenTelemetry Collector's file config provider's. Values read this way are never printed.
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { rememberFileSecret } from './file-secrets.js';
import { pathText, type KeyPath } from './schema-paths.js';

const REFERENCE = /\$\{file:([^}]*)\}/g;

/** A secret is a line or a PEM block; a larger file is a mistake (or a device that never ends). */
export const MAX_REFERENCED_FILE_BYTES = 64 * 1024;

/** The file's text, or why it cannot be read. Bounded: a FIFO or a device is refused, never waited on. */
function readReferencedFile(file: string): { text: string } | { problem: string } {
  let descriptor: number;
  try {
    descriptor = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    return { problem: `cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})` };
  }
  try {
    if (!fstatSync(descriptor).isFile()) return { problem: `${file} is not a regular file` };
    const buffer = Buffer.alloc(MAX_REFERENCED_FILE_BYTES + 1);
    let length = 0;
    for (let read = -1; read !== 0 && length < buffer.length;) {
      read = readSync(descriptor, buffer, length, buffer.length - length, null);
      length += read;
    }
    if (length > MAX_REFERENCED_FILE_BYTES)
      return { problem: `${file} is larger than ${MAX_REFERENCED_FILE_BYTES / 1024} KiB` };
    return { text: buffer.toString('utf8', 0, length).replace(/[\r\n]+$/, '') };
  } catch (error) {
    return { problem: `cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})` };
  } finally {
    closeSync(descriptor);
  }
}

export interface ReferenceOutcome {
  /** Key paths whose value took a file's contents. */
  readonly resolved: KeyPath[];
  /** Key paths whose file could not be read (the value keeps the reference's text). */
  readonly failed: KeyPath[];
  readonly problems: string[];
}

/**
 * Replaces every reference in the strings of `value` (walked in place where it is a list or an
 * object) and returns the new value. `label` names the key in problems (and the variable, if any).
 */
export function resolveFileReferences(
  value: unknown,
  path: KeyPath,
  outcome: ReferenceOutcome,
  label = pathText,
): unknown {
  if (typeof value === 'string') {
    if (!value.includes('${file:')) return value;
    let failed = false;
    const text = value.replace(REFERENCE, (_whole, file: string) => {
      if (file === '') {
        outcome.problems.push(`${label(path)}: \${file:} names no file`);
        failed = true;
        return '';
      }
      const read = readReferencedFile(file);
      if ('problem' in read) {
        outcome.problems.push(`${label(path)}: ${read.problem}`);
        failed = true;
        return '';
      }
      rememberFileSecret(read.text);
      return read.text;
    });
    (failed ? outcome.failed : outcome.resolved).push(path);
    if (!failed) rememberFileSecret(text); // the whole value too: `host:${file:...}` echoed whole
    return failed ? value : text;
  }
  if (Array.isArray(value)) {
    value.forEach((item, index) => {
      value[index] = resolveFileReferences(item, [...path, index], outcome, label);
    });
  } else if (value !== null && typeof value === 'object') {
    const object = value as Record<string, unknown>;
    for (const key of Object.keys(object))
      object[key] = resolveFileReferences(object[key], [...path, key], outcome, label);
  }
  return value;
}
