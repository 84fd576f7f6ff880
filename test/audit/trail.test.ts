// The trail on disk: records chained across rotated files and restarts, signed digests, and a
// verifier that finds the first record removed, changed or reordered, and a file rewritten whole.
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { digestChecker, digestSigner, GENESIS_HASH } from '../../src/audit/chain.js';
import { openTrailWriter, type TrailWriterOptions } from '../../src/audit/trail-writer.js';
import { verifyTrail } from '../../src/audit/verify.js';
import { runAuditCommand } from '../../src/cli/audit-verify.js';
import { keyFiles, readTrail, rechain, records, trailDirectory } from './support.js';

const keys = keyFiles();
const check = digestChecker(keys.publicKeyPem);

function options(directory: string, overrides: Partial<TrailWriterOptions> = {}): TrailWriterOptions {
  return {
    directory,
    durable: true,
    maxPendingRecords: 10_000,
    maxBatchRecords: 64,
    rotateBytes: 4096,
    retainFiles: 0,
    retryIntervalMs: 50,
    digestIntervalMs: 60_000,
    writeTimeoutMs: 5_000,
    signer: digestSigner(readFileSync(keys.privateKeyFile)),
    ...overrides,
  };
}

const intent = (n: number) => ({ kind: 'intent', time: new Date().toISOString(), id: `r${n}`, commandId: `c${n}` });

/** A trail of `count` records written by concurrent appends, rotated every 4 KiB. */
async function writtenTrail(count: number): Promise<string> {
  const directory = trailDirectory();
  const writer = await openTrailWriter(options(directory));
  await Promise.all(Array.from({ length: count }, (_, n) => writer.append(intent(n))));
  await writer.close();
  return directory;
}

function replaceLine(path: string, edit: (lines: string[]) => string[]): void {
  const lines = readFileSync(path, 'utf8').split('\n').slice(0, -1);
  writeFileSync(path, `${edit(lines).join('\n')}\n`);
}

describe('the trail writer', () => {
  it('writes every record once, in order, across rotated files, and the whole trail verifies', async () => {
    const directory = await writtenTrail(300);
    const files = readTrail(directory);
    expect(files.length).toBeGreaterThan(3);
    const written = records(directory).filter((record) => record.kind === 'intent');
    expect(written.map((record) => record.commandId)).toEqual(Array.from({ length: 300 }, (_, n) => `c${n}`));
    const report = verifyTrail(files, check);
    expect(report).toMatchObject({ ok: true, records: 300 + files.length, unsignedTail: 0 });
    // Each file opens with its file record naming the one before, and a signed digest.
    const all = records(directory);
    expect(all[0]).toMatchObject({ kind: 'file', seq: 1, prev: GENESIS_HASH, previousFile: null });
    expect(all[1]).toMatchObject({ kind: 'digest' });
  });

  it('continues the chain after a restart, and a new file names the last one', async () => {
    const directory = trailDirectory();
    const first = await openTrailWriter(options(directory, { rotateBytes: 1 << 20 }));
    await first.append(intent(1));
    const firstFile = first.currentFile;
    // No close: as a killed process leaves it (no closing digest).
    const second = await openTrailWriter(options(directory, { rotateBytes: 1 << 20 }));
    await second.append(intent(2));
    await second.close();
    const files = readTrail(directory);
    expect(files).toHaveLength(2);
    expect(records(directory).find((r) => r.kind === 'file' && r.seq > 1)).toMatchObject({ previousFile: firstFile });
    expect(verifyTrail(files, check)).toMatchObject({ ok: true, records: 4 });
  });
});

describe('audit verify', () => {
  it('reports a removed record', async () => {
    const directory = await writtenTrail(60);
    const [file] = readTrail(directory);
    replaceLine(file!.name, (lines) => [...lines.slice(0, 5), ...lines.slice(6)]);
    const report = verifyTrail(readTrail(directory), check);
    expect(report.ok).toBe(false);
    expect(report.problem).toMatchObject({ seq: 7, problem: expect.stringContaining('records 6 are missing') });
    // Without the key the chain alone finds it too.
    expect(verifyTrail(readTrail(directory)).ok).toBe(false);
    // And the command line says so, exit 1.
    const command = runAuditCommand(['verify', '--public-key', keys.publicKeyFile, directory]);
    expect(command).toMatchObject({
      code: 1,
      output: expect.stringMatching(/^FAILED: .*line 6 \(seq 7\): records 6 are missing/),
    });
  });

  it('reports an edited record', async () => {
    const directory = await writtenTrail(60);
    const [file] = readTrail(directory);
    replaceLine(file!.name, (lines) => lines.map((line, i) => (i === 4 ? line.replace('"c2"', '"c999"') : line)));
    const report = verifyTrail(readTrail(directory));
    expect(report.problem).toMatchObject({ line: 5, seq: 5, problem: expect.stringContaining('was changed') });
  });

  it('reports two swapped records', async () => {
    const directory = await writtenTrail(60);
    const [file] = readTrail(directory);
    replaceLine(file!.name, (lines) => [...lines.slice(0, 4), lines[5]!, lines[4]!, ...lines.slice(6)]);
    const report = verifyTrail(readTrail(directory), check);
    expect(report.problem).toMatchObject({ line: 5, problem: expect.stringContaining('reordered') });
  });

  it('reports a file rewritten with every hash recomputed: its signatures no longer hold', async () => {
    const directory = await writtenTrail(60);
    const [file] = readTrail(directory);
    replaceLine(file!.name, (lines) => {
      const first = JSON.parse(lines[0]!) as { prev: string };
      return rechain(
        lines.map((line, i) => (i === 4 ? line.replace('"c2"', '"c999"') : line)),
        first.prev,
      );
    });
    // The chain holds (every hash recomputed): only the signatures find it.
    expect(verifyTrail(readTrail(directory)).ok).toBe(true);
    const report = verifyTrail(readTrail(directory), check);
    expect(report.ok).toBe(false);
    expect(report.problem?.problem).toMatch(/digest signature is not valid/);
  });

  it('reports a file rewritten without its digests', async () => {
    const directory = await writtenTrail(60);
    const files = readTrail(directory);
    const last = files[files.length - 1]!;
    replaceLine(last.name, (lines) => {
      const header = JSON.parse(lines[0]!) as { prev: string; seq: number };
      const renumbered = lines
        .filter((line) => !line.includes('"kind":"digest"'))
        .map((line, i) => JSON.stringify({ ...(JSON.parse(line) as object), seq: header.seq + i }));
      return rechain(renumbered, header.prev);
    });
    const report = verifyTrail(readTrail(directory), check);
    expect(report.ok).toBe(false);
    expect(report.problem?.problem).toMatch(/does not open with a signed digest/);
  });

  it('reports a digest signed by another key', async () => {
    const directory = await writtenTrail(10);
    const other = digestChecker(keyFiles().publicKeyPem);
    expect(verifyTrail(readTrail(directory), other).problem?.problem).toMatch(/signature is not valid/);
  });

  it('reports a file left out of the middle of the trail', async () => {
    const directory = await writtenTrail(300);
    const files = readTrail(directory);
    const report = verifyTrail([files[0]!, ...files.slice(2)], check);
    expect(report.problem?.problem).toMatch(/missing \(removed\)/);
  });
});
