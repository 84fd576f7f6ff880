// Reading the config file with bounds, before the YAML parser sees it: a file of 1 MiB of `[` (a
// ConfigMap's size) or of tens of MB ran every replica that watched it out of heap. A file over
// either bound is refused as invalid (at start: exit 2; on a reload: the running config stays).
import { createHash } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';

/** A Kubernetes ConfigMap holds at most 1 MiB; a real gateway config is a few KB. */
export const MAX_CONFIG_FILE_BYTES = 1024 * 1024;
/** The schema's deepest key is 6 levels down (policy.rules.<op>[i].subjects[j]); a margin above it. */
export const MAX_CONFIG_NESTING = 32;

/** The file's text, or why it is not read: bounded in size, a FIFO or a device refused, never waited on. */
export function readConfigText(file: string): { text: string } | { problem: string } {
  let descriptor: number;
  try {
    descriptor = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    return { problem: `cannot read the file: ${(error as Error).message}` };
  }
  try {
    const stat = fstatSync(descriptor);
    if (!stat.isFile()) return { problem: 'cannot read the file: not a regular file' };
    if (stat.size > MAX_CONFIG_FILE_BYTES)
      return { problem: `the file is larger than ${MAX_CONFIG_FILE_BYTES / 1024} KiB (${stat.size} bytes)` };
    const buffer = Buffer.alloc(MAX_CONFIG_FILE_BYTES + 1);
    let length = 0;
    for (let read = -1; read !== 0 && length < buffer.length;) {
      read = readSync(descriptor, buffer, length, buffer.length - length, null);
      length += read;
    }
    // It grew while being read.
    if (length > MAX_CONFIG_FILE_BYTES)
      return { problem: `the file is larger than ${MAX_CONFIG_FILE_BYTES / 1024} KiB` };
    return { text: buffer.toString('utf8', 0, length) };
  } catch (error) {
    return { problem: `cannot read the file: ${(error as Error).message}` };
  } finally {
    closeSync(descriptor);
  }
}

/**
 * How deep the YAML text nests, an upper estimate read without parsing: flow brackets open (outside
 * quotes and comments), block indentation levels, and `- ` / `? ` indicators that open a nested
 * collection on the same line (`- - - x`). The parser recurses per level, so depth is bounded first.
 */
export function yamlNestingDepth(text: string): number {
  let deepest = 0;
  let flow = 0;
  const indents: number[] = [];
  for (const line of text.split(/\r?\n/)) {
    let index = 0;
    while (line[index] === ' ') index++;
    if (flow === 0 && index < line.length && line[index] !== '#') {
      while (indents.length > 0 && indents.at(-1)! >= index) indents.pop();
      indents.push(index);
    }
    let inline = 0;
    while (/^[-?](?: |$)/.test(line.slice(index))) {
      inline++;
      index += 2;
      while (line[index] === ' ') index++;
    }
    let quote: string | undefined;
    for (; index < line.length; index++) {
      const char = line[index];
      if (quote !== undefined) {
        if (char === '\\' && quote === '"') index++;
        else if (char === quote) quote = undefined;
      } else if (char === '"' || char === "'") quote = char;
      else if (char === '#' && (index === 0 || /\s/.test(line[index - 1]!))) break;
      else if (char === '[' || char === '{') deepest = Math.max(deepest, indents.length + inline + ++flow);
      else if ((char === ']' || char === '}') && flow > 0) flow--;
    }
    deepest = Math.max(deepest, indents.length + inline + flow);
  }
  return deepest;
}

/** What a reload compares between two versions of the file: its digest and the keys it names. */
export interface ConfigFileShape {
  readonly digest: string;
  /** Its sections and their keys (`policy`, `policy.rules`), as the file writes them. */
  readonly keys: ReadonlySet<string>;
}

/** The file's shape, or undefined when it cannot be read or parsed (the reload then judges it as invalid). */
export function configFileShape(file: string): ConfigFileShape | undefined {
  const read = readConfigText(file);
  if ('problem' in read || yamlNestingDepth(read.text) > MAX_CONFIG_NESTING) return undefined;
  let parsed: unknown;
  try {
    parsed = parseYaml(read.text, { uniqueKeys: true });
  } catch {
    return undefined;
  }
  const keys = new Set<string>();
  const mapping = (value: unknown): value is Record<string, unknown> =>
    value !== null && typeof value === 'object' && !Array.isArray(value);
  if (mapping(parsed))
    for (const [section, body] of Object.entries(parsed)) {
      keys.add(section);
      if (mapping(body)) for (const key of Object.keys(body)) keys.add(`${section}.${key}`);
    }
  return { digest: createHash('sha256').update(read.text).digest('hex'), keys };
}
