// `ledger-gateway audit verify [--public-key K] <files or directories>`: checks a trail's hash chain,
// its start and its end and, with the public key, its signed digests (src/audit/verify.ts), reading
// each file as a stream, so that a trail of any size is checked in bounded memory. Exit 0 when it
// holds and is sealed; 1 with the first record changed, removed or reordered; 3 when it holds but
// ends without a seal (cut, or the gateway killed or still writing); 2 for a bad command line, an
// unreadable file or key.
import { createReadStream, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { digestChecker, PublicKeyError, type DigestChecker } from '../audit/chain.js';
import { isTrailFileName } from '../audit/trail-files.js';
import { TrailVerifier, type TrailReport } from '../audit/verify.js';

export const AUDIT_USAGE =
  'usage: ledger-gateway audit verify [--public-key <PEM file>] <trail files or directories...>';

export interface AuditCommandResult {
  readonly code: number;
  readonly output: string;
}

/** A line longer than this is no record the gateway writes (audit.maxRecordBytes is at most 1 MiB). */
const MAX_LINE_BYTES = 2 * 1024 * 1024;

/** The files to check, in chain order: a directory's trail files sorted by name, files as given. */
function trailPaths(paths: readonly string[]): string[] {
  return paths.flatMap((path) =>
    statSync(path).isDirectory()
      ? readdirSync(path)
          .filter(isTrailFileName)
          .sort()
          .map((name) => join(path, name))
      : [path],
  );
}

/** Feeds one file to the verifier, line by line; false once it found a problem. */
async function verifyFile(verifier: TrailVerifier, path: string): Promise<boolean> {
  if (verifier.beginFile(path) !== undefined) return false;
  const pending: Buffer[] = [];
  let pendingBytes = 0;
  for await (const chunk of createReadStream(path, { highWaterMark: 256 * 1024 }) as AsyncIterable<Buffer>) {
    let from = 0;
    for (let newline = chunk.indexOf(10); newline !== -1; newline = chunk.indexOf(10, from)) {
      const piece = chunk.subarray(from, newline);
      const line = pendingBytes === 0 ? piece : Buffer.concat([...pending, piece], pendingBytes + piece.length);
      pending.length = 0;
      pendingBytes = 0;
      from = newline + 1;
      if (verifier.line(line) !== undefined) return false;
    }
    if (from < chunk.length) {
      pending.push(chunk.subarray(from));
      pendingBytes += chunk.length - from;
      if (pendingBytes > MAX_LINE_BYTES) {
        verifier.overlongLine(MAX_LINE_BYTES);
        return false;
      }
    }
  }
  return verifier.endFile(pendingBytes > 0) === undefined;
}

const range = (report: TrailReport) =>
  report.firstSeq === null ? 'no record' : `seq ${report.firstSeq}..${report.lastSeq}`;

/** What holds of the trail (every report says it, the failed ones about what lies before the problem). */
function holds(report: TrailReport, key: DigestChecker | undefined): string {
  const counts = `${report.files} file(s), ${report.records} record(s), ${report.digests} digest(s)`;
  if (key === undefined) return `${counts}, ${range(report)} (hash chain only: no --public-key)`;
  const signed =
    report.signedThrough === null
      ? 'none signed'
      : `signed through seq ${report.signedThrough.seq} (${report.signedThrough.time})`;
  const tail =
    report.unsignedTail > 0 ? `; the last ${report.unsignedTail} record(s) are not covered by a signed digest` : '';
  return `${counts}, ${range(report)}, every digest signature valid (key ${key.keyId}), ${signed}${tail}`;
}

export function describe(report: TrailReport, key: DigestChecker | undefined): string {
  if (report.problem !== undefined) {
    const { file, line, seq, problem } = report.problem;
    const keyNote = key === undefined ? '' : ` (key ${key.keyId})`;
    const before = report.firstSeq === null ? 'nothing' : `${range(report)}${keyNote}`;
    return `FAILED: ${file} line ${line}${seq === null ? '' : ` (seq ${seq})`}: ${problem}\nWhat holds before it: ${before}\n`;
  }
  const notes = [
    ...(report.startsAfter === null
      ? []
      : [`it starts after ${report.startsAfter}, removed by the gateway's retention`]),
    ...(report.unsealedFiles === 0
      ? []
      : [
          `${report.unsealedFiles} file(s) end unsealed where the gateway stopped without closing them (killed, or a write failed), each continued by the next`,
        ]),
  ].map((note) => `; ${note}`);
  if (report.status === 'incomplete')
    return `INCOMPLETE: ${report.incomplete}: it may have been cut (the gateway killed, a write failed, or it is still writing)\nWhat holds: ${holds(report, key)}${notes.join('')}\n`;
  const seal = `sealed at seq ${report.sealed!.seq} (${report.sealed!.time}: the gateway closed it)`;
  return `OK: ${holds(report, key)}; ${seal}${notes.join('')}\n`;
}

const EXIT = { ok: 0, failed: 1, incomplete: 3 } as const;

export async function runAuditCommand(argv: readonly string[]): Promise<AuditCommandResult> {
  let values: { 'public-key'?: string };
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: [...argv],
      options: { 'public-key': { type: 'string' } },
      allowPositionals: true,
      strict: true,
    }));
  } catch (error) {
    return { code: 2, output: `${(error as Error).message}\n${AUDIT_USAGE}\n` };
  }
  const [command, ...paths] = positionals;
  if (command !== 'verify' || paths.length === 0) return { code: 2, output: `${AUDIT_USAGE}\n` };
  let key: DigestChecker | undefined;
  let files: string[];
  try {
    const keyFile = values['public-key'];
    if (keyFile !== undefined) key = digestChecker(readFileSync(keyFile), `--public-key ${keyFile}`);
    files = trailPaths(paths);
  } catch (error) {
    const message = error instanceof PublicKeyError ? error.message : oneLine(error);
    return { code: 2, output: `cannot verify: ${message}\n` };
  }
  // No file is no trail: removed whole, or never written here.
  if (files.length === 0)
    return {
      code: 1,
      output: `FAILED: no trail file (audit-*.jsonl) in ${paths.join(' ')}: the trail was removed, or never written there\n`,
    };
  const verifier = new TrailVerifier(key);
  try {
    for (const file of files) if (!(await verifyFile(verifier, file))) break;
  } catch (error) {
    return { code: 2, output: `cannot verify: ${oneLine(error)}\n` };
  }
  const report = verifier.finish();
  return { code: EXIT[report.status], output: describe(report, key) };
}

/** A file system error in one line: its code and path (Node's message says both). */
function oneLine(error: unknown): string {
  return String((error as Error).message ?? error).split('\n')[0]!;
}
