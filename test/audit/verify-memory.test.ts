// `ledger-gateway audit verify` reads a trail as a stream: a trail three times the size of the
// process's heap verifies under it (the pod's heap flag is --max-old-space-size=160; a 192 MiB trail
// once aborted verify inside the pod, every file read whole at once).
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { isTrailFileName } from '../../src/audit/trail-files.js';
import { openTrailWriter } from '../../src/audit/trail-writer.js';
import { buildDist, runToExit } from '../helpers/process.js';
import { intentRecord, keyFiles, trailDirectory, writerOptions } from './support.js';

const keys = keyFiles();
const HEAP_MIB = 32;
const TRAIL_MIB = 96;

beforeAll(() => buildDist());

/** A sealed trail of about `mib` MiB: records of about 1 KiB, in files of 32 MiB. */
async function largeTrail(mib: number): Promise<string> {
  const directory = trailDirectory();
  const writer = await openTrailWriter(
    writerOptions(directory, keys, { rotateBytes: 32 << 20, maxBatchRecords: 4096, digestIntervalMs: 100 }),
  );
  const filler = 'x'.repeat(900);
  const records = Math.ceil((mib << 20) / 1040);
  for (let n = 0; n < records; n += 4096)
    await Promise.all(
      Array.from({ length: Math.min(4096, records - n) }, (_, i) => writer.append(intentRecord(n + i, { filler }))),
    );
  await writer.close();
  return directory;
}

describe('audit verify in bounded memory', () => {
  it('verifies a 96 MiB trail under --max-old-space-size=32', async () => {
    const directory = await largeTrail(TRAIL_MIB);
    const names = readdirSync(directory).filter(isTrailFileName);
    const size = names.reduce((sum, name) => sum + statSync(join(directory, name)).size, 0);
    expect(size).toBeGreaterThan(TRAIL_MIB * 0.95 * (1 << 20));
    const result = await runToExit(
      [
        `--max-old-space-size=${HEAP_MIB}`,
        'dist/main.js',
        'audit',
        'verify',
        '--public-key',
        keys.publicKeyFile,
        directory,
      ],
      {},
      240_000,
    );
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^OK: 4 file\(s\), \d+ record\(s\)/);
  }, 300_000);
});
