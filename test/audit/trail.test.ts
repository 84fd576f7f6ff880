// The trail on disk: records chained across rotated files and restarts, signed digests, and a
// verifier that finds the first record removed, changed or reordered, and a file rewritten whole.
import { readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { digestChecker, digestSigner, GENESIS_HASH } from '../../src/audit/chain.js';
import { openTrailWriter, recordText, type TrailWriterOptions } from '../../src/audit/trail-writer.js';
import { verifyTrail } from '../../src/audit/verify.js';
import { runAuditCommand } from '../../src/cli/audit-verify.js';
import { keyFiles, readTrail, rechain, records, rewriteTrail, trailDirectory } from './support.js';

const keys = keyFiles();
const check = digestChecker(keys.publicKeyPem);

function options(directory: string, overrides: Partial<TrailWriterOptions> = {}): TrailWriterOptions {
  return {
    directory,
    durable: true,
    maxPendingRecords: 10_000,
    maxPendingBytes: 8 << 20,
    maxBatchRecords: 64,
    rotateBytes: 4096,
    retainFiles: 0,
    maxTrailBytes: 0,
    retryIntervalMs: 50,
    digestIntervalMs: 60_000,
    writeTimeoutMs: 5_000,
    signer: digestSigner(keys.privateKeyFile),
    ...overrides,
  };
}

const intent = (n: number) =>
  recordText({ kind: 'intent', time: new Date().toISOString(), id: `r${n}`, commandId: `c${n}` });

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
    expect(report).toMatchObject({ ok: true, records: 300 + 2 * files.length, unsignedTail: 0 }); // a file and an end record each
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
    expect(verifyTrail(files, check)).toMatchObject({ ok: true, records: 5, unsealedFiles: 1 });
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
    const command = await runAuditCommand(['verify', '--public-key', keys.publicKeyFile, directory]);
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
    // The same length (the end records' sizes hold), every hash after it recomputed, across files.
    rewriteTrail(directory, (lines, file) =>
      file === 0 ? lines.map((line, i) => (i === 4 ? line.replace('"c2"', '"c9"') : line)) : lines,
    );
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
    expect(report.problem?.problem).toBe(
      `the file does not open with a digest signed by key ${check.keyId} (rewritten)`,
    );
  });

  it('reports a trail written without a signing key, naming the key its digests should be signed by', async () => {
    const directory = trailDirectory();
    const writer = await openTrailWriter(options(directory, { signer: undefined }));
    await Promise.all([writer.append(intent(1)), writer.append(intent(2))]);
    await writer.close();
    expect(verifyTrail(readTrail(directory)).ok).toBe(true);
    const report = verifyTrail(readTrail(directory), check);
    expect(report.status).toBe('failed');
    expect(report.problem?.problem).toBe(
      `the file does not open with a digest signed by key ${check.keyId} (rewritten)`,
    );
  });

  it('reports a digest signed by another key', async () => {
    const directory = await writtenTrail(10);
    const other = digestChecker(keyFiles().publicKeyPem);
    expect(verifyTrail(readTrail(directory), other).problem?.problem).toMatch(
      new RegExp(`names key \\w+, not key ${other.keyId} \\(another key signed it`),
    );
  });

  it('reports a file left out of the middle of the trail', async () => {
    const directory = await writtenTrail(300);
    const files = readTrail(directory);
    const report = verifyTrail([files[0]!, ...files.slice(2)], check);
    expect(report.problem?.problem).toMatch(/missing \(removed\)/);
  });
});

describe('the trail writer when it cannot write', () => {
  it('retries a new file on its own timer: writable again without a record written', async () => {
    const directory = trailDirectory();
    // The first file is a link to /dev/full: every write fails (ENOSPC), as a full volume does.
    const full = join(directory, 'audit-0000000000000001-20260101T000000Z.jsonl');
    symlinkSync('/dev/full', full);
    const writer = await openTrailWriter(options(directory, { retryIntervalMs: 100 }));
    expect(writer.writable).toBe(false);
    rmSync(full);
    await expect.poll(() => writer.writable, { timeout: 5_000, interval: 50 }).toBe(true);
    await writer.append(intent(1));
    await writer.close();
    expect(verifyTrail(readTrail(directory), check)).toMatchObject({ ok: true });
  });

  it('makes a last try at close whatever the retry time, and ends the trail sealed', async () => {
    const directory = trailDirectory();
    const full = join(directory, 'audit-0000000000000001-20260101T000000Z.jsonl');
    symlinkSync('/dev/full', full);
    const writer = await openTrailWriter(options(directory, { retryIntervalMs: 600_000 }));
    expect(writer.writable).toBe(false);
    rmSync(full);
    await writer.close();
    expect(verifyTrail(readTrail(directory), check)).toMatchObject({ ok: true, sealed: { seq: expect.any(Number) } });
  });

  it('refuses a record past audit.maxPendingBytes of records waiting', async () => {
    const directory = trailDirectory();
    const writer = await openTrailWriter(options(directory, { maxPendingBytes: 64 * 1024 }));
    const filler = 'x'.repeat(1000);
    const results = await Promise.allSettled(
      Array.from({ length: 100 }, (_, n) =>
        writer.append(recordText({ kind: 'intent', time: new Date().toISOString(), id: `r${n}`, filler })),
      ),
    );
    const refused = results.filter((result) => result.status === 'rejected');
    expect(refused.length).toBeGreaterThan(20);
    expect(String((refused[0] as PromiseRejectedResult).reason)).toMatch(/bytes waiting \(audit\.maxPendingBytes\)/);
    expect(writer.pendingBytes).toBe(0);
    await writer.close();
  });
});

describe('the trail writer on restart', () => {
  it('begins the file the last end record named when a crash came between the two', async () => {
    const directory = await writtenTrail(60);
    const names = readTrail(directory).map((file) => file.name);
    // As if killed right after the rotation's end record: the named file was never begun.
    rmSync(names.at(-1)!);
    const promised = names.at(-1)!.slice(names.at(-1)!.lastIndexOf('/') + 1);
    const writer = await openTrailWriter(options(directory));
    expect(writer.currentFile).toBe(promised);
    await writer.close();
    expect(verifyTrail(readTrail(directory), check)).toMatchObject({ ok: true });
  });

  it('begins in a newest file that was begun and never written, leaving no empty file behind', async () => {
    const directory = trailDirectory();
    const first = await openTrailWriter(options(directory));
    await first.append(intent(1)); // killed: no end record
    const end = records(directory).at(-1)!;
    const unwritten = `audit-${String(end.seq + 1).padStart(16, '0')}-20260101T000000Z.jsonl`;
    writeFileSync(join(directory, unwritten), '');
    const second = await openTrailWriter(options(directory));
    expect(second.currentFile).toBe(unwritten);
    await second.close();
    expect(verifyTrail(readTrail(directory), check)).toMatchObject({ ok: true, unsealedFiles: 1 });
  });

  it('keeps the directory within audit.retainFiles and audit.maxTrailBytes, naming what it removed first', async () => {
    const byCount = trailDirectory();
    const writer = await openTrailWriter(options(byCount, { retainFiles: 3 }));
    for (let n = 0; n < 300; n += 20)
      await Promise.all(Array.from({ length: 20 }, (_, i) => writer.append(intent(n + i))));
    await writer.close();
    expect(readTrail(byCount)).toHaveLength(3);
    expect(verifyTrail(readTrail(byCount), check)).toMatchObject({
      ok: true,
      startsAfter: expect.stringMatching(/^audit-/),
    });
    const bySize = trailDirectory();
    const sized = await openTrailWriter(options(bySize, { maxTrailBytes: 12_288 }));
    for (let n = 0; n < 300; n += 20)
      await Promise.all(Array.from({ length: 20 }, (_, i) => sized.append(intent(n + i))));
    await sized.close();
    const total = readTrail(bySize).reduce((sum, file) => sum + Buffer.byteLength(file.text), 0);
    // Checked as each file begins: the files kept, and the one written since, at most a rotation's worth over.
    expect(total).toBeLessThanOrEqual(12_288 + 4096 + 2048);
    expect(records(bySize).filter((record) => record.kind === 'retention').length).toBeGreaterThan(0);
    expect(verifyTrail(readTrail(bySize), check)).toMatchObject({ ok: true });
  });
});
