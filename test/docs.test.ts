// The documentation holds together: the generated key reference matches the schema, and every
// relative link and #anchor in the README and docs/ leads somewhere.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { renderConfigReference, withConfigReference } from '../scripts/config-reference.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const documents = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

/** Markdown without fenced blocks and inline code, where a `[x](y)` is not a link. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchor for a heading (github-slugger): lower case, punctuation dropped, spaces to '-'. */
function slug(heading: string): string {
  const text = heading.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replaceAll(' ', '-');
}

function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const counts = new Map<string, number>();
  for (const [, heading] of markdown.replace(/^```[\s\S]*?^```/gm, '').matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const base = slug(heading!);
    const count = counts.get(base) ?? 0;
    counts.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

/** Every relative link of a document that leads nowhere, as `target: why`. */
function brokenLinks(document: string, markdown: string, readTarget: (path: string) => string | undefined): string[] {
  const problems: string[] = [];
  for (const [, target] of prose(markdown).matchAll(/\]\(([^)\s]+)(?: "[^"]*")?\)/g)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) continue;
    const [path = '', anchor] = target!.split('#', 2);
    const file = path === '' ? document : join(dirname(document), decodeURIComponent(path));
    const text = readTarget(file);
    if (text === undefined) {
      problems.push(`${target}: ${file} does not exist`);
      continue;
    }
    if (anchor !== undefined && !anchorsOf(text).has(anchor))
      problems.push(`${target}: no heading #${anchor} in ${file}`);
  }
  return problems;
}

function readInRepository(path: string): string | undefined {
  const absolute = join(root, path);
  if (relative(root, absolute).startsWith('..') || !existsSync(absolute)) return undefined;
  return statSync(absolute).isDirectory() ? '' : readFileSync(absolute, 'utf8');
}

describe('docs/configuration.md', () => {
  it('holds the key reference generated from the schema (npm run docs:config)', () => {
    const committed = readFileSync(join(root, 'docs/configuration.md'), 'utf8');
    expect(withConfigReference(committed)).toBe(committed);
  });

  it('has a row for every key of the schema, nested ones included', () => {
    const reference = renderConfigReference();
    for (const key of [
      'server.tls.reloadIntervalMs',
      'auth.issuers[].jwksUrl',
      'protection.redis.leaseMs',
      'policy.rules.<operation>[].subjects',
      'upstream.replicas[].url',
      'upstream.replicas[].name',
    ]) {
      expect(reference).toContain(`| \`${key}\` |`);
    }
  });

  it('gives each field of a list entry a row, an entry that may be a string or an object included', () => {
    const field = (description: string) => ({ type: 'string', description });
    // Each list's entry has a shape of its own: a shape seen before is referred to, not opened again.
    const endpoint = (what: string) => ({
      type: 'object',
      properties: { url: field(`Where ${what}.`), name: field(`What ${what}.`) },
      required: ['url'],
    });
    const reference = renderConfigReference({
      properties: {
        section: {
          description: 'A section.',
          properties: {
            objects: { type: 'array', description: 'Objects only.', items: endpoint('a') },
            described: {
              type: 'array',
              description: 'Strings or objects.',
              items: { anyOf: [{ type: 'string' }, endpoint('b')], description: 'A URL alone, or { url, name }.' },
            },
            plain: {
              type: 'array',
              description: 'Strings or objects.',
              items: { anyOf: [{ type: 'string' }, endpoint('c')] },
            },
            strings: { type: 'array', description: 'Strings only.', items: { type: 'string' } },
          },
        },
      },
    });
    const rows = reference.split('\n').filter((line) => line.startsWith('| `'));
    expect(rows).toEqual([
      '| `section.objects` | list of objects | unset | Objects only. |',
      '| `section.objects[].url` | string | required | Where a. |',
      '| `section.objects[].name` | string | unset | What a. |',
      '| `section.described` | list of (string or object) | unset | Strings or objects. |',
      '| `section.described[]` | string or object | unset | A URL alone, or { url, name }. |',
      '| `section.described[].url` | string | required | Where b. |',
      '| `section.described[].name` | string | unset | What b. |',
      '| `section.plain` | list of (string or object) | unset | Strings or objects. |',
      "| `section.plain[]` | string or object | unset | Each entry is string or object; an object's keys follow. |",
      '| `section.plain[].url` | string | required | Where c. |',
      '| `section.plain[].name` | string | unset | What c. |',
      '| `section.strings` | list of strings | unset | Strings only. |',
    ]);
  });
});

describe('links in the README and docs/', () => {
  it.each(documents)('%s: every relative link and #anchor resolves', (document) => {
    expect(brokenLinks(document, readFileSync(join(root, document), 'utf8'), readInRepository)).toEqual([]);
  });

  it('finds a missing file, a missing heading and a wrong anchor, and skips code', () => {
    const files: Record<string, string> = { 'docs/a.md': '# A\n\n## Key reference\n\n## `server`\n' };
    const markdown = [
      '[ok](a.md#key-reference) [ok](a.md#server) [ok](#here) [web](https://example.com/x#y)',
      '[gone](b.md) [wrong](a.md#keys) [self](#nowhere)',
      '`[in code](c.md)`',
      '```\n[in a block](d.md)\n```',
      '## Here',
    ].join('\n');
    const read = (path: string) => (path === 'docs/self.md' ? markdown : files[path]);
    expect(brokenLinks('docs/self.md', markdown, read)).toEqual([
      'b.md: docs/b.md does not exist',
      'a.md#keys: no heading #keys in docs/a.md',
      '#nowhere: no heading #nowhere in docs/self.md',
    ]);
  });
});
