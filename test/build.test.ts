// `npm start` builds incrementally: its build step (tsc --build, build info in dist/) compiles
// nothing and rewrites nothing when no source changed, so a second start is quick. A clean clone
// builds in full: the global setup runs this same command (test/helpers/process.ts buildDist).
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildDist, ROOT } from './helpers/process.js';

const scripts = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> })
  .scripts;

beforeAll(() => buildDist(), 120_000);

describe('npm start', () => {
  it('builds with tsc --build before it starts the gateway', () => {
    const [build, run] = scripts.start!.split('&&').map((part) => part.trim());
    expect(build).toBe('tsc --build tsconfig.json');
    expect(run).toMatch(/^node .*dist\/main\.js/);
    expect(scripts.build).toBe(build);
  });

  it('compiles and rewrites nothing when no source changed', () => {
    const outputs = ['main.js', 'app.js', 'config/load.js', '.tsbuildinfo'].map((file) => join(ROOT, 'dist', file));
    const before = outputs.map((file) => statSync(file).mtimeMs);
    const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
    const output = execFileSync(process.execPath, [tsc, '--build', '--verbose', join(ROOT, 'tsconfig.json')], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(output).toMatch(/is up to date/);
    expect(outputs.map((file) => statSync(file).mtimeMs)).toEqual(before);
  }, 60_000);
});
