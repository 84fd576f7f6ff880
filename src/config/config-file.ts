// Reading the config file with bounds, before the YAML parser sees it: a file of 1 MiB of `[` (a
// ConfigMap's size) or of tens of MB ran every replica that watched it out of heap. A file over
// either bound is refused as invalid (at start: exit 2; on a reload: the running config stays).
import { createHash } from 'node:crypto';
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { CST, Lexer, parse as parseYaml } from 'yaml';

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

/** Most nodes (scalars, aliases, collections, list items) a config file may hold; parsing costs about 1 KiB of heap each. */
export const MAX_CONFIG_NODES = 10_000;

/** yaml's default, stated: an alias resolved more often than this (a "billion laughs") fails the parse. */
const MAX_ALIAS_COUNT = 100;

/** What the lexer saw of a YAML text: how deep it nests (an upper estimate) and how many nodes it holds. */
export interface YamlExtent {
  readonly depth: number;
  readonly nodes: number;
}

/** Tokens that hold no node and open no level. */
const NEUTRAL = new Set(['doc-mode', 'byte-order-mark', 'directive-line', 'doc-start', 'doc-end', 'anchor', 'tag']);

/**
 * How deep the YAML text nests and how many nodes it holds, read with yaml's own lexer (a generator
 * that keeps no tree: a few MB of heap for any file within MAX_CONFIG_FILE_BYTES), so quotes and
 * plain scalars are told apart exactly as the parser will (`it's [[[[` fooled a hand-written scan).
 * Depth: block indentation levels, `- ` / `? ` indicators that open a nested collection on the same
 * line (`- - - x`), and flow brackets. The parser builds its tree for the whole file before any key
 * is checked, about 1 KiB of heap per node, and recurses per level: both are bounded first.
 */
export function yamlExtent(text: string): YamlExtent {
  let depth = 0;
  let nodes = 0;
  let flow = 0;
  let inline = 0;
  let indent = 0;
  let lineStart = true;
  let scalarText = false;
  const indents: number[] = [];
  for (const token of new Lexer().lex(text)) {
    if (scalarText) {
      // The text of a plain or block scalar, after its marker token; a block scalar's ends its line.
      scalarText = false;
      if (token.endsWith('\n')) [lineStart, indent, inline] = [true, 0, 0];
      continue;
    }
    const type = CST.tokenType(token);
    if (type === 'newline') {
      [lineStart, indent, inline] = [true, 0, 0];
      continue;
    }
    if (type === 'space') {
      if (lineStart) indent = token.length;
      continue;
    }
    if (type === 'comment' || (typeof type === 'string' && NEUTRAL.has(type))) continue;
    if (lineStart && flow === 0) {
      while (indents.length > 0 && indents.at(-1)! >= indent) indents.pop();
      indents.push(indent);
    }
    lineStart = false;
    switch (type) {
      case 'scalar':
        scalarText = true;
        nodes++;
        break;
      case 'single-quoted-scalar':
      case 'double-quoted-scalar':
      case 'alias':
        nodes++;
        break;
      case 'seq-item-ind':
      case 'explicit-key-ind':
        inline++;
        nodes++;
        break;
      case 'flow-seq-start':
      case 'flow-map-start':
        flow++;
        nodes++;
        break;
      case 'flow-seq-end':
      case 'flow-map-end':
        if (flow > 0) flow--;
        break;
    }
    depth = Math.max(depth, indents.length + inline + flow);
  }
  return { depth, nodes };
}

/**
 * The config file's text parsed, or why it is not: nested deeper than MAX_CONFIG_NESTING or holding
 * more than MAX_CONFIG_NODES nodes (both judged before the parser builds anything), duplicate keys,
 * aliases past MAX_ALIAS_COUNT, or not YAML. Start and every reload parse through here alike.
 */
export function parseConfigYaml(text: string, prettyErrors = false): { parsed: unknown } | { problem: string } {
  const { depth, nodes } = yamlExtent(text);
  if (depth > MAX_CONFIG_NESTING)
    return { problem: `the file nests ${depth} levels deep; at most ${MAX_CONFIG_NESTING} are read` };
  if (nodes > MAX_CONFIG_NODES)
    return { problem: `the file holds ${nodes} YAML nodes; at most ${MAX_CONFIG_NODES} are read` };
  try {
    return { parsed: parseYaml(text, { prettyErrors, uniqueKeys: true, maxAliasCount: MAX_ALIAS_COUNT }) };
  } catch (error) {
    return { problem: `not valid YAML: ${(error as Error).message}` };
  }
}

/** What a reload compares between two versions of the file: its digest, the keys it names, whether it ends whole. */
export interface ConfigFileShape {
  readonly digest: string;
  /**
   * Every key and list item it writes, at any depth (`policy`, `policy.rules.submit[1].effect`): a
   * prefix of the file (a write cut short) lacks the ones after the cut, wherever it fell.
   */
  readonly keys: ReadonlySet<string>;
  /** Its last line ends with a line break (or it is empty): a write cut inside a line leaves one that does not. */
  readonly endsWhole: boolean;
}

/** Every key path in a parsed value, list items included (bounded: the file holds at most MAX_CONFIG_NODES nodes). */
function keyPaths(value: unknown, prefix: string, into: Set<string>): void {
  if (value === null || typeof value !== 'object') return;
  const entries = Array.isArray(value)
    ? value.map((item, index) => [`${prefix}[${index}]`, item] as const)
    : Object.entries(value as Record<string, unknown>).map(
        ([key, item]) => [prefix === '' ? key : `${prefix}.${key}`, item] as const,
      );
  for (const [path, item] of entries) {
    if (into.has(path)) continue; // an alias seen again
    into.add(path);
    keyPaths(item, path, into);
  }
}

/** The file's shape, or undefined when it cannot be read or parsed (the reload then judges it as invalid). */
export function configFileShape(file: string): ConfigFileShape | undefined {
  const read = readConfigText(file);
  if ('problem' in read) return undefined;
  const outcome = parseConfigYaml(read.text);
  if ('problem' in outcome) return undefined;
  const keys = new Set<string>();
  keyPaths(outcome.parsed, '', keys);
  return {
    digest: createHash('sha256').update(read.text).digest('hex'),
    keys,
    endsWhole: read.text === '' || read.text.endsWith('\n'),
  };
}
