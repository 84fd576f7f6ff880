// The structure of src/ (issue 28; .dependency-cruiser.cjs): no import cycle, type-only imports
// included; telemetry/ and proxy/ never import each other; nothing but main.ts imports the sandbox.
// The rules are also run on a small tree that breaks each of them, so that a rule which stopped
// matching (a renamed folder, a changed option) cannot pass for a clean src/.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { cruise, type ICruiseOptions, type IViolation } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';
import { afterAll, describe, expect, it } from 'vitest';
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
      'find a cycle (a type-only import too), telemetry/ and proxy/ importing each other, an import of the sandbox',
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
          'no-cycle: src/app.ts -> src/auth/hooks.ts -> src/app.ts',
          'proxy-not-to-telemetry: src/proxy/forward.ts -> src/telemetry/format.ts',
          'sandbox-stays-aside: src/auth/dev-mode.ts -> src/sandbox/seed.ts',
          'telemetry-not-to-proxy: src/telemetry/metrics.ts -> src/proxy/codes.ts',
        ]);
      },
    );
  });
});
