// docs/security.md's inventory of what a caller can make the process hold (issue 40): every row names
// the tests that drive its bound, and each named test exists in the file named; every key of its
// default is a config key, every metric a metric; and what the issue lists is there.
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ConfigSchema } from '../src/config/schema.js';
import { MetricNames } from '../src/telemetry/metrics.js';
import { ROOT } from './helpers/process.js';

const HEADING = '## What a caller can make the process hold';

interface Row {
  readonly what: string;
  readonly defaults: string;
  readonly reportedBy: string;
  /** Each named test: its file and title. */
  readonly tests: ReadonlyArray<{ readonly file: string; readonly title: string }>;
}

function inventory(): Row[] {
  const text = readFileSync(`${ROOT}/docs/security.md`, 'utf8');
  const start = text.indexOf(HEADING);
  expect(start, `docs/security.md has "${HEADING}"`).toBeGreaterThan(-1);
  const section = text.slice(start, text.indexOf('\n## ', start + HEADING.length));
  const lines = section.split('\n').filter((line) => line.startsWith('| ') && !line.startsWith('| what |'));
  return lines.map((line) => {
    const cells = line
      .split('|')
      .slice(1, -1)
      .map((cell) => cell.trim());
    expect(cells, line).toHaveLength(6);
    const tests: Array<{ file: string; title: string }> = [];
    let file = '';
    // `test/file.ts`: "a title"; "another title of the same file" (process); `test/other.ts`: "..."
    for (const match of cells[5]!.matchAll(/`(test\/[^`]+)`|"([^"]+)"/g)) {
      if (match[1] !== undefined) file = match[1];
      else tests.push({ file, title: match[2]! });
    }
    return { what: cells[0]!, defaults: cells[3]!, reportedBy: cells[4]!, tests };
  });
}

/** The schema node at a dotted key path, or undefined. */
function configKey(path: string): unknown {
  let node: unknown = ConfigSchema;
  for (const part of path.split('.')) {
    node = (node as { properties?: Record<string, unknown> }).properties?.[part];
    if (node === undefined) return undefined;
  }
  return node;
}

describe('the inventory of what a caller can make the process hold (docs/security.md)', () => {
  it('names, for every bound, tests that exist', () => {
    const rows = inventory();
    expect(rows.length).toBeGreaterThan(10);
    for (const row of rows) {
      expect(row.tests.length, `"${row.what}" names no test`).toBeGreaterThan(0);
      for (const { file, title } of row.tests) {
        expect(file, `"${row.what}": a title before any file`).not.toBe('');
        expect(existsSync(`${ROOT}/${file}`), `"${row.what}": ${file} does not exist`).toBe(true);
        const source = readFileSync(`${ROOT}/${file}`, 'utf8');
        // "a describe > a test" names both; each part as written in the file (a prefix of a long title may stand for it).
        for (const part of title.split(' > '))
          expect(source.includes(part), `"${row.what}": ${file} has no test "${title}"`).toBe(true);
      }
    }
  });

  it('gives defaults that are config keys and metrics that are metrics', () => {
    const rows = inventory();
    const metrics = new Set<string>(Object.values(MetricNames));
    const sections = new Set(Object.keys(ConfigSchema.properties));
    for (const row of rows) {
      for (const [, key] of row.defaults.matchAll(/`([a-zA-Z]+(?:\.[a-zA-Z]+)+)`/g)) {
        if (sections.has(key!.split('.')[0]!)) expect(configKey(key!), `"${row.what}": ${key}`).toBeDefined();
      }
      for (const [name] of row.reportedBy.matchAll(/ledger_gateway_\w+/g)) {
        expect(metrics.has(name), `"${row.what}": ${name} is not a metric`).toBe(true);
      }
    }
  });

  it('lists what issue 40 names: pipelined requests, parsed bodies, body bytes, WebSocket bytes, log lines, tokens, Redis replies, reload input', () => {
    const whats = inventory()
      .map((row) => row.what)
      .join('\n');
    for (const kind of [
      'Pipelined requests',
      'Parsed body',
      'Request body bytes',
      'WebSocket client',
      'Log lines',
      'tokens',
    ]) {
      expect(whats, kind).toContain(kind);
    }
  });
});
