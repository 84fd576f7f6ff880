// Checks a trail: every record's `prev` is the SHA-256 of the line before it (across files, in the
// order given), sequence numbers run without a gap, and, with the public key, every digest's
// signature holds and every record but the trail's last few is covered by one. Reports the first
// record that was changed, removed or reordered. Pure: the CLI (cli/audit-verify.ts) reads the files.
import { AUDIT_RECORD_VERSION, lineHash } from './chain.js';

export interface TrailText {
  readonly name: string;
  readonly text: string;
}

export interface DigestCheck {
  readonly keyId: string;
  check(seq: number, time: string, prev: string, signature: string): boolean;
}

export interface TrailProblem {
  readonly file: string;
  /** 1-based line in that file. */
  readonly line: number;
  readonly seq: number | null;
  readonly problem: string;
}

export interface TrailReport {
  readonly ok: boolean;
  readonly files: number;
  readonly records: number;
  readonly digests: number;
  /** Records after the last valid digest (the trail's newest; only with a key). */
  readonly unsignedTail: number;
  readonly problem?: TrailProblem;
}

interface ParsedRecord {
  v?: unknown;
  seq?: unknown;
  prev?: unknown;
  kind?: unknown;
  time?: unknown;
  file?: unknown;
  previousFile?: unknown;
  keyId?: unknown;
  signature?: unknown;
}

export function verifyTrail(files: readonly TrailText[], key?: DigestCheck): TrailReport {
  let records = 0;
  let digests = 0;
  let unsigned = 0; // records since the last valid digest
  let firstUnsigned: { file: string; line: number; seq: number } | undefined;
  let expectedSeq: number | undefined;
  let prevHash: string | undefined;
  let prevFile: string | undefined;
  const report = (problem?: TrailProblem): TrailReport => ({
    ok: problem === undefined,
    files: files.length,
    records,
    digests,
    unsignedTail: unsigned,
    ...(problem !== undefined && { problem }),
  });

  for (const { name, text } of files) {
    const lines = text.split('\n');
    if (lines[lines.length - 1] !== '')
      return report({ file: name, line: lines.length, seq: null, problem: 'the last line is cut short (no newline)' });
    for (let index = 0; index < lines.length - 1; index++) {
      const at = { file: name, line: index + 1 };
      const text = lines[index]!;
      let record: ParsedRecord;
      try {
        record = JSON.parse(text) as ParsedRecord;
      } catch {
        return report({ ...at, seq: null, problem: 'not a JSON record (changed)' });
      }
      const seq = typeof record.seq === 'number' ? record.seq : null;
      if (record.v !== AUDIT_RECORD_VERSION)
        return report({ ...at, seq, problem: `unknown record version ${JSON.stringify(record.v)}` });
      if (seq === null || typeof record.prev !== 'string')
        return report({ ...at, seq, problem: 'no seq or prev (changed)' });
      if (expectedSeq !== undefined && seq !== expectedSeq)
        return report({ ...at, seq, problem: sequenceProblem(seq, expectedSeq, lines.slice(index + 1)) });
      if (prevHash !== undefined && record.prev !== prevHash) {
        const where = index === 0 ? `the last record of ${prevFile}` : `the record on line ${index}`;
        return report({
          ...at,
          line: index === 0 ? at.line : index,
          file: index === 0 ? (prevFile ?? name) : name,
          seq: seq - 1,
          problem: `${where} (seq ${seq - 1}) was changed: its hash is not the prev of seq ${seq}`,
        });
      }
      if (index === 0 && record.kind === 'file') {
        const problem = fileRecordProblem(record, name, prevFile);
        if (problem !== undefined) return report({ ...at, seq, problem });
      }
      // Every file opens with its file record and a signed digest of it: a file rewritten whole lacks one.
      if (key !== undefined && index === 1 && record.kind !== 'digest')
        return report({ ...at, seq, problem: 'the file does not open with a signed digest (rewritten)' });
      if (record.kind === 'digest') {
        if (key !== undefined) {
          const valid =
            record.keyId === key.keyId &&
            typeof record.time === 'string' &&
            typeof record.signature === 'string' &&
            key.check(seq, record.time, record.prev, record.signature);
          if (!valid)
            return report({
              ...at,
              seq,
              problem:
                firstUnsigned === undefined
                  ? 'the digest signature is not valid (the trail was rewritten, or another key signed it)'
                  : `the digest signature is not valid: a record from seq ${firstUnsigned.seq} (${firstUnsigned.file} line ${firstUnsigned.line}) to ${seq - 1} was changed, or the trail rewritten`,
            });
          unsigned = 0;
          firstUnsigned = undefined;
        }
        digests++;
      } else {
        records++;
        if (key !== undefined) {
          unsigned++;
          firstUnsigned ??= { ...at, seq };
        }
      }
      expectedSeq = seq + 1;
      prevHash = lineHash(text);
    }
    prevFile = name;
  }
  if (key !== undefined && digests === 0 && records > 0)
    return report({ file: files[0]!.name, line: 1, seq: null, problem: 'no signed digest at all' });
  return report();
}

/** Why a record's seq is not the one expected: repeated or reordered, or the records between removed. */
function sequenceProblem(seq: number, expected: number, linesAfter: readonly string[]): string {
  if (seq < expected) return `seq ${seq} where ${expected} was expected (reordered or repeated)`;
  const later = linesAfter.some((other) => other.startsWith(`{"v":${AUDIT_RECORD_VERSION},"seq":${expected},`));
  return later
    ? `seq ${seq} where ${expected} was expected: record ${expected} comes later (reordered)`
    : `records ${expected}${seq - 1 > expected ? `..${seq - 1}` : ''} are missing (removed)`;
}

/** A file's first record names the file and the one before it: a file renamed or swapped does not match. */
function fileRecordProblem(record: ParsedRecord, name: string, prevFile: string | undefined): string | undefined {
  if (record.file !== basename(name)) return `the file record names ${String(record.file)} (renamed or swapped)`;
  if (prevFile !== undefined && record.previousFile !== basename(prevFile))
    return `the file record names ${String(record.previousFile)} before it, not ${prevFile}`;
  return undefined;
}

const basename = (path: string) => path.slice(path.lastIndexOf('/') + 1);
