// `ledger-gateway audit verify [--public-key K] <files or directories>`: checks a trail's hash chain
// and, with the public key, its signed digests (src/audit/verify.ts); exit 0 when it holds, 1 with
// the first record that was changed, removed or reordered, 2 for a bad command line.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { digestChecker } from '../audit/chain.js';
import { isTrailFileName } from '../audit/trail-files.js';
import { verifyTrail, type TrailReport } from '../audit/verify.js';

export const AUDIT_USAGE =
  'usage: ledger-gateway audit verify [--public-key <PEM file>] <trail files or directories...>';

export interface AuditCommandResult {
  readonly code: number;
  readonly output: string;
}

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

export function describe(report: TrailReport, signed: boolean): string {
  const counts = `${report.files} file(s), ${report.records} record(s), ${report.digests} digest(s)`;
  if (report.problem !== undefined) {
    const { file, line, seq, problem } = report.problem;
    return `FAILED: ${file} line ${line}${seq === null ? '' : ` (seq ${seq})`}: ${problem}\n${counts}\n`;
  }
  const tail =
    signed && report.unsignedTail > 0
      ? `; the last ${report.unsignedTail} record(s) are not yet covered by a signed digest`
      : '';
  return `OK: ${counts}${signed ? ', every digest signature valid' : ' (hash chain only: no --public-key)'}${tail}\n`;
}

export function runAuditCommand(argv: readonly string[]): AuditCommandResult {
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
  try {
    const key = values['public-key'] === undefined ? undefined : digestChecker(readFileSync(values['public-key']));
    const files = trailPaths(paths).map((path) => ({ name: path, text: readFileSync(path, 'utf8') }));
    if (files.length === 0) return { code: 2, output: `no trail files in ${paths.join(' ')}\n` };
    const report = verifyTrail(files, key);
    return { code: report.ok ? 0 : 1, output: describe(report, key !== undefined) };
  } catch (error) {
    return { code: 2, output: `cannot verify: ${(error as Error).message}\n` };
  }
}
