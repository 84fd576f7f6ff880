// The structure of src/ (issues 28, 33 and 41; .dependency-cruiser.cjs, its floor rules generated from
// the one table of floors, floors.cjs): no import cycle, type-only imports included; no room imports a
// floor above its own (the stages import no server/ or live/, telemetry/ no stage, exchange/, body/ and
// config/ none of the floors above), nor a room beside it (a stage another stage); proxy/ never imports
// telemetry/; nothing but main.ts imports the sandbox; every folder of src/ has a floor
// (ledger-policy/ a stage, proto/ the floor of protobuf values below the sandbox).
// The rules are also run on a small tree that breaks each of them, so that a rule which stopped
// matching (a renamed folder, a changed option, a table that lost a line) cannot pass for a clean src/.
import { readdirSync, readFileSync } from 'node:fs';
import ts from 'typescript';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { cruise, type ICruiseOptions, type IViolation } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';
import { afterAll, describe, expect, it } from 'vitest';
import floors from '../floors.cjs';
import { ROOT } from './helpers/process.js';

const CONFIG = join(ROOT, '.dependency-cruiser.cjs');

async function violations(baseDir: string, options: ICruiseOptions, tsConfigFile?: string): Promise<string[]> {
  const result = await cruise(
    ['src'],
    { ...options, baseDir },
    {},
    tsConfigFile === undefined ? {} : { tsConfig: extractTSConfig(tsConfigFile) },
  );
  if (typeof result.output === 'string') throw new Error('expected the cruise result as an object');
  return result.output.summary.violations.map((violation: IViolation) => {
    const path =
      violation.cycle === undefined
        ? [violation.from, violation.to]
        : [violation.from, ...violation.cycle.map((step) => step.name)];
    return `${violation.rule.name}: ${path.join(' -> ')}`;
  });
}

describe('the structure of src/', () => {
  it('keeps every rule', { timeout: 60_000 }, async () => {
    const options = await extractDepcruiseOptions(CONFIG);
    expect(await violations(ROOT, options, join(ROOT, 'tsconfig.json'))).toEqual([]);
  });

  describe('the rules themselves', () => {
    let fixture: string | undefined;
    afterAll(async () => {
      if (fixture !== undefined) await rm(fixture, { recursive: true, force: true });
    });

    it(
      'find a cycle (a type-only import too), proxy/ importing telemetry/, an import of the sandbox, a stage importing a stage or a floor above, telemetry/ importing a stage, a foundation importing above it, a folder without a floor',
      { timeout: 60_000 },
      async () => {
        fixture = await mkdtemp(join(tmpdir(), 'structure-'));
        const files: Record<string, string> = {
          'src/app.ts': "import { stage } from './auth/hooks.js';\nexport type T = () => void;\nexport { stage };\n",
          'src/auth/hooks.ts': "import type { T } from '../app.js';\nexport const stage: T = () => {};\n",
          'src/telemetry/metrics.ts': "import { CODE } from '../proxy/codes.js';\nexport const LABEL = CODE;\n",
          'src/proxy/codes.ts': 'export const CODE = 1;\n',
          'src/proxy/forward.ts': "import { format } from '../telemetry/format.js';\nexport const forward = format;\n",
          'src/telemetry/format.ts': 'export const format = 1;\n',
          'src/auth/dev-mode.ts': "import { SEED } from '../sandbox/seed.js';\nexport const id = SEED;\n",
          'src/sandbox/seed.ts': 'export const SEED = 1;\n',
          'src/main.ts': "import { SEED } from './sandbox/seed.js';\nexport const seed = SEED;\n",
          // Allowed: a stage importing its own room, exchange/, telemetry/, body/, config/ and the vocabulary.
          'src/cache/version-cache.ts':
            "import { A } from './entry.js';\nimport { B } from '../exchange/answer.js';\nimport { C } from '../body/read.js';\n" +
            "import { D } from '../config/schema.js';\nimport { format } from '../telemetry/format.js';\nimport { F } from '../errors.js';\n" +
            'export const all = [A, B, C, D, format, F];\n',
          'src/cache/entry.ts': 'export const A = 1;\n',
          'src/exchange/answer.ts': "import { F } from '../errors.js';\nexport const B = F;\n",
          'src/body/read.ts': "import { D } from '../config/schema.js';\nexport const C = D;\n",
          'src/config/schema.ts': 'export const D = 1;\n',
          'src/errors.ts': 'export const F = 1;\n',
          // Forbidden: sideways between stages, a stage importing server/ or live/, telemetry/ importing
          // a stage or live/, exchange/, body/ and config/ importing a stage, telemetry/ or server/.
          'src/cache/codes.ts': "import { CODE } from '../proxy/codes.js';\nexport const CACHED = CODE;\n",
          'src/proxy/websocket.ts': "import { TOKEN } from '../auth/extract.js';\nexport const T = TOKEN;\n",
          'src/auth/extract.ts': 'export const TOKEN = 1;\n',
          'src/policy/stage.ts': "import { UP } from '../server/upgrades.js';\nexport const S = UP;\n",
          'src/protection/stage.ts': "import { GEN } from '../live/generations.js';\nexport const P = GEN;\n",
          'src/server/upgrades.ts': 'export const UP = 1;\n',
          'src/live/generations.ts': 'export const GEN = 1;\n',
          'src/telemetry/request-telemetry.ts':
            "import { TOKEN } from '../auth/extract.js';\nexport const R = TOKEN;\n",
          'src/telemetry/logging.ts': "import { GEN } from '../live/generations.js';\nexport const L = GEN;\n",
          'src/exchange/refusal.ts': "import { format } from '../telemetry/format.js';\nexport const X = format;\n",
          'src/body/json.ts': "import { CODE } from '../proxy/codes.js';\nexport const J = CODE;\n",
          'src/config/load.ts': "import { UP } from '../server/upgrades.js';\nexport const CF = UP;\n",
          // The consumers' room is a stage like the others: never beside one, never above.
          'src/consumers/stage.ts': "import { P } from '../protection/stage.js';\nexport const Q = P;\n",
          'src/consumers/usage.ts': "import { UP } from '../server/upgrades.js';\nexport const U = UP;\n",
          'src/telemetry/access-log.ts': "import { Q } from '../consumers/stage.js';\nexport const A = Q;\n",
          // A folder with no floor (issue 41 tried src/validation/ importing proxy/, live/ and server/,
          // imported by policy/): every import to or from it is refused until it takes a floor.
          'src/validation/schema.ts':
            "import { CODE } from '../proxy/codes.js';\nimport { GEN } from '../live/generations.js';\n" +
            "import { UP } from '../server/upgrades.js';\nexport const V = [CODE, GEN, UP];\n",
          'src/policy/validate.ts': "import { V } from '../validation/schema.js';\nexport const PV = V;\n",
          // The ledger policy is a stage like the others; proto/ stands below it and the sandbox.
          'src/ledger-policy/decide.ts': "import { TOKEN } from '../auth/extract.js';\nexport const LP = TOKEN;\n",
          'src/proto/daml-value.ts': "import { LP } from '../ledger-policy/decide.js';\nexport const PB = LP;\n",
          'tsconfig.json': JSON.stringify({
            compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true },
            include: ['src/**/*.ts'],
          }),
        };
        for (const [name, text] of Object.entries(files)) {
          await mkdir(dirname(join(fixture, name)), { recursive: true });
          await writeFile(join(fixture, name), text);
        }
        const options = await extractDepcruiseOptions(CONFIG);
        const found = await violations(
          fixture,
          { ...options, tsConfig: { fileName: join(fixture, 'tsconfig.json') } },
          join(fixture, 'tsconfig.json'),
        );
        expect(found.sort()).toEqual([
          'bodies-not-up: src/body/json.ts -> src/proxy/codes.ts',
          'configuration-not-up: src/config/load.ts -> src/server/upgrades.ts',
          'folder-without-floor: src/policy/validate.ts -> src/validation/schema.ts',
          'folder-without-floor: src/validation/schema.ts -> src/live/generations.ts',
          'folder-without-floor: src/validation/schema.ts -> src/proxy/codes.ts',
          'folder-without-floor: src/validation/schema.ts -> src/server/upgrades.ts',
          'no-cycle: src/app.ts -> src/auth/hooks.ts -> src/app.ts',
          'one-request-not-up: src/exchange/refusal.ts -> src/telemetry/format.ts',
          'protobuf-values-not-up: src/proto/daml-value.ts -> src/ledger-policy/decide.ts',
          'proxy-not-to-telemetry: src/proxy/forward.ts -> src/telemetry/format.ts',
          'sandbox-stays-aside: src/auth/dev-mode.ts -> src/sandbox/seed.ts',
          'stages-not-sideways: src/cache/codes.ts -> src/proxy/codes.ts',
          'stages-not-sideways: src/consumers/stage.ts -> src/protection/stage.ts',
          'stages-not-sideways: src/ledger-policy/decide.ts -> src/auth/extract.ts',
          'stages-not-sideways: src/proxy/websocket.ts -> src/auth/extract.ts',
          'stages-not-up: src/auth/hooks.ts -> src/app.ts',
          'stages-not-up: src/consumers/usage.ts -> src/server/upgrades.ts',
          'stages-not-up: src/policy/stage.ts -> src/server/upgrades.ts',
          'stages-not-up: src/protection/stage.ts -> src/live/generations.ts',
          'telemetry-not-up: src/telemetry/access-log.ts -> src/consumers/stage.ts',
          'telemetry-not-up: src/telemetry/logging.ts -> src/live/generations.ts',
          'telemetry-not-up: src/telemetry/metrics.ts -> src/proxy/codes.ts',
          'telemetry-not-up: src/telemetry/request-telemetry.ts -> src/auth/extract.ts',
        ]);
      },
    );
  });
});

describe('the rooms of src/', () => {
  const src = join(ROOT, 'src');
  const entries = readdirSync(src, { withFileTypes: true });

  it('keeps the root to the process and the shared vocabulary: at most 8 files', () => {
    const files = entries.filter((entry) => entry.isFile()).map((entry) => entry.name);
    expect(files.length, files.join(', ')).toBeLessThanOrEqual(8);
    expect(files).toEqual(expect.arrayContaining(['main.ts', 'app.ts', 'errors.ts', 'operations.ts']));
  });

  it('gives every folder a floor in the one table (floors.cjs)', () => {
    expect(floors.foldersWithoutFloor(src)).toEqual([]);
  });

  it('finds a folder without a floor (the check can fail)', async () => {
    const tree = await mkdtemp(join(tmpdir(), 'floors-'));
    try {
      for (const folder of ['auth', 'validation']) await mkdir(join(tree, folder));
      expect(floors.foldersWithoutFloor(tree)).toEqual(['validation']);
    } finally {
      await rm(tree, { recursive: true, force: true });
    }
  });

  it("shows each room on its table's floor, top to bottom, in docs/development.md's layout", () => {
    const rows = readFileSync(join(ROOT, 'docs', 'development.md'), 'utf8')
      .split('\n')
      .filter((line) => /^\| [a-z ]+ \| `src\//.test(line))
      .map((line) => {
        const [floor, rooms] = line.split(' | ').map((cell) => cell.replace(/^\| /, ''));
        return { floor: floor!, rooms: [...rooms!.matchAll(/`src\/([^/`]+)/g)].map((match) => match[1]!) };
      });
    const shown = new Map(rows.flatMap((row) => row.rooms.map((room) => [room, row.floor] as const)));
    for (const [room, floor] of Object.entries(floors.ROOMS)) expect(shown.get(room), room).toBe(floor);
    const order = rows.map((row) => floors.FLOORS.indexOf(row.floor));
    expect(order).not.toContain(-1);
    expect(order).toEqual([...order].sort((a, b) => a - b));
  });

  it('opens every folder with one line saying what it holds and what it may import', () => {
    const folders = entries.filter((entry) => entry.isDirectory()).map((entry) => entry.name);
    expect(folders).toEqual(expect.arrayContaining(['exchange', 'server', 'live', 'proxy', 'telemetry', 'consumers']));
    for (const folder of folders) {
      const opening = readFileSync(join(src, folder, 'README.md'), 'utf8').trim();
      expect(opening.split('\n'), folder).toHaveLength(1);
      expect(opening, folder).toMatch(/[Mm]ay import|imports no|may not import|import nothing/);
    }
  });
});

/** Every function in src/ (declarations, expressions, arrows, methods) longer than `most` lines. */
function longFunctions(most: number): string[] {
  const long: string[] = [];
  const files = readdirSync(join(ROOT, 'src'), { recursive: true, encoding: 'utf8' }).filter(
    (file) => file.endsWith('.ts') && file !== join('config', 'schema.ts'),
  );
  for (const file of files) {
    const source = ts.createSourceFile(
      file,
      readFileSync(join(ROOT, 'src', file), 'utf8'),
      ts.ScriptTarget.Latest,
      true,
    );
    const visit = (node: ts.Node): void => {
      if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
        const first = source.getLineAndCharacterOfPosition(node.getStart()).line;
        const lines = source.getLineAndCharacterOfPosition(node.end).line - first + 1;
        if (lines > most) long.push(`${file}:${first + 1} (${lines} lines)`);
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return long;
}

describe('the size of what a reader must hold at once', () => {
  it('has no function over 120 lines outside the config schema', () => {
    expect(longFunctions(120)).toEqual([]);
  });

  it('finds a long function (the check can fail)', () => {
    expect(longFunctions(60).length).toBeGreaterThan(0);
  });
});
