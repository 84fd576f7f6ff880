// Checks a trail, line by line in bounded memory (the CLI streams the files: cli/audit-verify.ts):
// every record's `prev` is the SHA-256 of the line before it (across files, in the order given),
// sequence numbers run without a gap, each file opens with its file record naming itself and the
// file before, and, with the public key, every digest's signature holds. Removal shows wherever it
// is: in the middle by the chain; at the start by a first file that names a file before it which
// no signed retention record of the gateway removed; at the end by the end records: each file ends
// with one naming the next file (a rotation) or none (the gateway closed the trail: sealed). A trail
// whose last file has no end record stops where the gateway stopped writing (killed, or still
// writing) or where it was cut: it is reported incomplete, with what holds, never as OK.
import { hash } from 'node:crypto';
import { AUDIT_RECORD_VERSION, GENESIS_HASH, type DigestChecker } from './chain.js';

export interface TrailProblem {
  readonly file: string;
  /** 1-based line in that file. */
  readonly line: number;
  readonly seq: number | null;
  readonly problem: string;
}

export interface TrailReport {
  /** ok: the chain holds and the trail is sealed; incomplete: it holds but ends unsealed; failed: a record changed, removed or reordered. */
  readonly status: 'ok' | 'incomplete' | 'failed';
  readonly ok: boolean;
  readonly files: number;
  readonly records: number;
  readonly digests: number;
  readonly firstSeq: number | null;
  /** The last record that holds (before the problem, when there is one). */
  readonly lastSeq: number | null;
  /** The last record a valid digest covers, and that digest's time (with a key). */
  readonly signedThrough: { readonly seq: number; readonly time: string } | null;
  /** Records after the last valid digest (with a key). */
  readonly unsignedTail: number;
  /** The seal: the end record of a trail the gateway closed. */
  readonly sealed: { readonly seq: number; readonly time: string } | null;
  /** The newest file the gateway's retention removed before the first file given, when it starts later. */
  readonly startsAfter: string | null;
  /** Files before the last that end without an end record (the gateway stopped without closing them). */
  readonly unsealedFiles: number;
  /** Why an incomplete trail is not sealed. */
  readonly incomplete?: string;
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
  next?: unknown;
  bytes?: unknown;
  through?: unknown;
}

/** How the file being read stands. */
interface FileState {
  readonly name: string;
  lines: number;
  bytes: number;
  /** Its end record: the next file it names, or null (sealed); undefined while it has none. */
  end: { next: string | null; seq: number; time: string } | undefined;
  /** The end record's final digest was read. */
  endSigned: boolean;
}

const basename = (path: string) => path.slice(path.lastIndexOf('/') + 1);

export class TrailVerifier {
  private files = 0;
  private records = 0;
  private digests = 0;
  private firstSeq: number | null = null;
  private lastSeq: number | null = null;
  private expectedSeq: number | undefined;
  private prevHash: string | undefined;
  private previous: FileState | undefined;
  private current: FileState | undefined;
  private signedThrough: { seq: number; time: string } | null = null;
  private unsigned = 0;
  private firstUnsigned: { file: string; line: number; seq: number } | undefined;
  private unsealedFiles = 0;
  /** The first file names a file before it: the start is missing unless a signed retention record removed it. */
  private missingStart: { at: TrailProblem; before: string } | undefined;
  private retention: { through: string; seq: number }[] = [];
  /** A seq ahead of the one expected: reordered if the expected one follows in the file, else removed. */
  private gap: { at: TrailProblem; expected: number; prefix: string } | undefined;
  private problem: TrailProblem | undefined;

  constructor(private readonly key?: DigestChecker) {}

  /** A file begins (files in chain order); returns a problem when the file before it cannot be followed by it. */
  beginFile(name: string): TrailProblem | undefined {
    if (this.current !== undefined) this.endFile(false);
    const before = this.previous;
    this.current = { name, lines: 0, bytes: 0, end: undefined, endSigned: false };
    this.files++;
    if (before === undefined) return undefined;
    if (before.lines === 0)
      return this.fail({ file: before.name, line: 1, seq: null, problem: 'the file holds no record (emptied)' });
    if (typeof before.end?.next === 'string' && before.end.next !== basename(name))
      return this.fail({
        file: name,
        line: 1,
        seq: null,
        problem: `the file ${before.end.next} is missing (removed): ${basename(before.name)} ends naming it next, and ${basename(name)} follows`,
      });
    if (before.end === undefined) this.unsealedFiles++;
    return undefined;
  }

  /** One line of the current file (without its newline); returns the first problem found. */
  line(bytes: Buffer): TrailProblem | undefined {
    const file = this.current!;
    const at = { file: file.name, line: ++file.lines };
    const offset = file.bytes;
    file.bytes += bytes.length + 1;
    if (this.gap !== undefined) return this.lookForGap(bytes);
    let record: ParsedRecord;
    try {
      record = JSON.parse(bytes.toString('utf8')) as ParsedRecord;
    } catch {
      return this.fail({ ...at, seq: null, problem: 'not a JSON record (changed)' });
    }
    const seq = typeof record.seq === 'number' ? record.seq : null;
    if (record.v !== AUDIT_RECORD_VERSION)
      return this.fail({ ...at, seq, problem: `unknown record version ${JSON.stringify(record.v)}` });
    if (seq === null || typeof record.prev !== 'string')
      return this.fail({ ...at, seq, problem: 'no seq or prev (changed)' });
    const chained = this.chainProblem(at, seq, record.prev);
    if (chained !== undefined || this.gap !== undefined) return chained;
    const placed = this.placeProblem(file, { ...at, seq }, record, offset);
    if (placed !== undefined) return placed;
    if (record.kind === 'digest') {
      const invalid = this.digest({ ...at, seq }, record);
      if (invalid !== undefined) return invalid;
    } else this.counted({ ...at, seq }, record);
    this.firstSeq ??= seq;
    this.lastSeq = seq;
    this.expectedSeq = seq + 1;
    this.prevHash = hash('sha256', bytes, 'hex');
    return undefined;
  }

  /** A line of the current file longer than any record (`maxBytes`): not read, a problem. */
  overlongLine(maxBytes: number): TrailProblem {
    const file = this.current!;
    return this.fail({
      file: file.name,
      line: file.lines + 1,
      seq: null,
      problem: `a line longer than ${maxBytes} bytes: not a record the gateway writes (changed)`,
    });
  }

  /**
   * The current file ends; `cutShort`: text followed its last newline (a record cut short by a
   * crash: never acknowledged, so not counted; after the file's end record, appended).
   */
  endFile(cutShort: boolean): TrailProblem | undefined {
    const file = this.current;
    if (file === undefined) return undefined;
    this.current = undefined;
    this.previous = file;
    if (this.gap !== undefined) return this.fail({ ...this.gap.at, problem: this.gapProblem() });
    if (cutShort && file.end !== undefined)
      return this.fail({
        file: file.name,
        line: file.lines + 1,
        seq: null,
        problem: 'text after the file end record (appended)',
      });
    return undefined;
  }

  /** The whole trail was read: whether it holds, and whether it is sealed. */
  finish(): TrailReport {
    if (this.current !== undefined) this.endFile(false);
    if (this.problem === undefined) this.judgeEnds();
    return this.report();
  }

  private judgeEnds(): void {
    const key = this.key;
    if (key !== undefined && this.digests === 0 && this.records > 0) {
      this.fail({
        file: this.previous?.name ?? '',
        line: 1,
        seq: null,
        problem: `no digest at all, so none signed by key ${key.keyId} (written without audit.signingKeyFile, or its digests removed)`,
      });
      return;
    }
    if (this.missingStart !== undefined) {
      const { at, before } = this.missingStart;
      const removed = this.retention.some(
        (kept) => kept.through >= before && (key === undefined || kept.seq <= (this.signedThrough?.seq ?? 0)),
      );
      if (!removed) {
        this.fail({
          ...at,
          problem: `the trail's start is missing: ${basename(at.file)} names ${before} before it, which is not here, and no signed retention record of the gateway removed it (removed by hand? verify it with the files before it)`,
        });
        return;
      }
    }
    const last = this.previous;
    if (last !== undefined && typeof last.end?.next === 'string')
      this.fail({
        file: last.name,
        line: last.lines,
        seq: last.end.seq,
        problem: `the file ${last.end.next} is missing (removed): ${basename(last.name)} ends naming it next`,
      });
  }

  /** The chain: the seq expected and the hash of the line before. */
  private chainProblem(at: { file: string; line: number }, seq: number, prev: string): TrailProblem | undefined {
    const expected = this.expectedSeq;
    if (expected !== undefined && seq !== expected) {
      if (seq < expected)
        return this.fail({ ...at, seq, problem: `seq ${seq} where ${expected} was expected (reordered or repeated)` });
      this.gap = {
        at: { ...at, seq, problem: '' },
        expected,
        prefix: `{"v":${AUDIT_RECORD_VERSION},"seq":${expected},`,
      };
      return undefined;
    }
    if (this.prevHash === undefined || prev === this.prevHash) return undefined;
    const firstLine = at.line === 1;
    const before = this.previous;
    return this.fail({
      file: firstLine ? (before?.name ?? at.file) : at.file,
      line: firstLine ? (before?.lines ?? 1) : at.line - 1,
      seq: seq - 1,
      problem: `${firstLine ? `the last record of ${before?.name}` : `the record on line ${at.line - 1}`} (seq ${seq - 1}) was changed: its hash is not the prev of seq ${seq}`,
    });
  }

  /** A record's place: each file opens with its file record (and with a key a digest); nothing but a digest follows an end record. */
  private placeProblem(file: FileState, at: Omit<TrailProblem, 'problem'>, record: ParsedRecord, offset: number) {
    if (file.lines === 1) {
      if (record.kind !== 'file') return this.fail({ ...at, problem: 'the file does not open with its file record' });
      const named = this.fileRecordProblem(record, file.name);
      if (named !== undefined) return this.fail({ ...at, problem: named });
      if (this.previous === undefined) this.noteStart(at, record);
    }
    if (this.key !== undefined && file.lines === 2 && record.kind !== 'digest')
      return this.fail({
        ...at,
        problem: `the file does not open with a digest signed by key ${this.key.keyId} (rewritten)`,
      });
    if (file.end !== undefined && record.kind !== 'digest')
      return this.fail({ ...at, problem: `a record after the file's end record (appended)` });
    if (record.kind === 'end') {
      if (record.bytes !== offset)
        return this.fail({
          ...at,
          problem: `the end record says the file held ${String(record.bytes)} bytes before it; ${offset} were read (changed)`,
        });
      const next = typeof record.next === 'string' ? record.next : null;
      file.end = { next, seq: at.seq!, time: typeof record.time === 'string' ? record.time : '' };
    }
    return undefined;
  }

  /** The first file of the trail: the genesis record, or a file that names one before it (the start removed: retention, or by hand). */
  private noteStart(at: Omit<TrailProblem, 'problem'>, record: ParsedRecord): void {
    if (typeof record.previousFile === 'string') {
      this.missingStart = { at: { ...at, problem: '' }, before: record.previousFile };
    } else if (at.seq !== 1 || record.prev !== GENESIS_HASH) {
      this.missingStart = { at: { ...at, problem: '' }, before: '(the first file)' };
    }
  }

  /** A file's first record names the file and the one before it: a file renamed or swapped does not match. */
  private fileRecordProblem(record: ParsedRecord, name: string): string | undefined {
    if (record.file !== basename(name)) return `the file record names ${String(record.file)} (renamed or swapped)`;
    const before = this.previous;
    if (before !== undefined && record.previousFile !== basename(before.name))
      return `the file record names ${String(record.previousFile)} before it, not ${basename(before.name)}`;
    return undefined;
  }

  private digest(at: TrailProblem | Omit<TrailProblem, 'problem'>, record: ParsedRecord): TrailProblem | undefined {
    this.digests++;
    const key = this.key;
    if (key === undefined) return undefined;
    const time = typeof record.time === 'string' ? record.time : '';
    if (!key.names(record.keyId))
      return this.fail({
        ...at,
        problem: `the digest names key ${String(record.keyId)}, not key ${key.keyId} (another key signed it, or the trail was rewritten)`,
      });
    const valid =
      typeof record.signature === 'string' && key.check(at.seq!, time, record.prev as string, record.signature);
    if (!valid)
      return this.fail({
        ...at,
        problem:
          this.firstUnsigned === undefined
            ? `the digest signature is not valid for key ${key.keyId} (the trail was rewritten, or another key signed it)`
            : `the digest signature is not valid for key ${key.keyId}: a record from seq ${this.firstUnsigned.seq} (${this.firstUnsigned.file} line ${this.firstUnsigned.line}) to ${at.seq! - 1} was changed, or the trail rewritten`,
      });
    this.signedThrough = { seq: at.seq!, time };
    this.unsigned = 0;
    this.firstUnsigned = undefined;
    if (this.current?.end !== undefined) this.current.endSigned = true;
    return undefined;
  }

  private counted(at: Omit<TrailProblem, 'problem'>, record: ParsedRecord): void {
    this.records++;
    if (record.kind === 'retention' && typeof record.through === 'string')
      this.retention.push({ through: record.through, seq: at.seq! });
    if (this.key !== undefined) {
      this.unsigned++;
      this.firstUnsigned ??= { file: at.file, line: at.line, seq: at.seq! };
    }
  }

  /** After a seq ahead of the one expected: the expected one later in the file means reordered. */
  private lookForGap(bytes: Buffer): TrailProblem | undefined {
    const gap = this.gap!;
    if (bytes.length >= gap.prefix.length && bytes.toString('utf8', 0, gap.prefix.length) === gap.prefix) {
      this.gap = undefined;
      return this.fail({
        ...gap.at,
        problem: `seq ${gap.at.seq} where ${gap.expected} was expected: record ${gap.expected} comes later (reordered)`,
      });
    }
    return undefined;
  }

  private gapProblem(): string {
    const { at, expected } = this.gap!;
    this.gap = undefined;
    const last = at.seq! - 1;
    return `records ${expected}${last > expected ? `..${last}` : ''} are missing (removed)`;
  }

  private fail(problem: TrailProblem): TrailProblem {
    this.problem ??= problem;
    return this.problem;
  }

  private report(): TrailReport {
    const last = this.previous;
    const sealedEnd = last !== undefined && last.end !== undefined && last.end.next === null ? last.end : undefined;
    const signedSeal = sealedEnd !== undefined && (this.key === undefined || last!.endSigned);
    const incomplete =
      this.problem !== undefined || signedSeal
        ? undefined
        : last === undefined || last.lines === 0
          ? `${last === undefined ? 'the trail' : basename(last.name)} holds no record`
          : sealedEnd !== undefined
            ? `the trail's seal (seq ${sealedEnd.seq}) is not covered by a digest signed by key ${this.key!.keyId}`
            : `the trail ends without a seal after record ${this.lastSeq} (${basename(last.name)} line ${last.lines})`;
    const status = this.problem !== undefined ? 'failed' : incomplete !== undefined ? 'incomplete' : 'ok';
    const startsAfter = this.missingStart === undefined || this.problem !== undefined ? null : this.missingStart.before;
    return {
      status,
      ok: status === 'ok',
      files: this.files,
      records: this.records,
      digests: this.digests,
      firstSeq: this.firstSeq,
      lastSeq: this.lastSeq,
      signedThrough: this.signedThrough,
      unsignedTail: this.unsigned,
      sealed: signedSeal && sealedEnd !== undefined ? { seq: sealedEnd.seq, time: sealedEnd.time } : null,
      startsAfter,
      unsealedFiles: this.unsealedFiles,
      ...(incomplete !== undefined && { incomplete }),
      ...(this.problem !== undefined && { problem: this.problem }),
    };
  }
}

/** A trail held in memory (tests, small trails): each file's whole text, in chain order. */
export function verifyTrail(files: readonly { name: string; text: string }[], key?: DigestChecker): TrailReport {
  const verifier = new TrailVerifier(key);
  for (const { name, text } of files) {
    if (verifier.beginFile(name) !== undefined) return verifier.finish();
    const lines = text.split('\n');
    for (const line of lines.slice(0, -1)) if (verifier.line(Buffer.from(line)) !== undefined) return verifier.finish();
    if (verifier.endFile(lines[lines.length - 1] !== '') !== undefined) return verifier.finish();
  }
  return verifier.finish();
}
