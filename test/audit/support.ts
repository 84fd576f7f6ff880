// An Ed25519 key pair in PEM files and trail helpers for the audit tests.
import { generateKeyPairSync } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { digestSigner, lineHash } from '../../src/audit/chain.js';
import {
  openTrailWriter,
  recordText,
  type TrailWriter,
  type TrailWriterOptions,
} from '../../src/audit/trail-writer.js';
import { isTrailFileName } from '../../src/audit/trail-files.js';

export interface KeyFiles {
  readonly privateKeyFile: string;
  readonly publicKeyFile: string;
  readonly publicKeyPem: string;
}

export function keyFiles(): KeyFiles {
  const dir = mkdtempSync(join(tmpdir(), 'audit-key-'));
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const privateKeyFile = join(dir, 'signing.pem');
  const publicKeyFile = join(dir, 'public.pem');
  const publicKeyPem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
  writeFileSync(privateKeyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }));
  writeFileSync(publicKeyFile, publicKeyPem);
  return { privateKeyFile, publicKeyFile, publicKeyPem };
}

export const trailDirectory = () => mkdtempSync(join(tmpdir(), 'audit-trail-'));

/** The trail files of a directory, oldest first (the newest `last` only), as { name, text } (what verifyTrail reads). */
export function readTrail(directory: string, last = Infinity): Array<{ name: string; text: string }> {
  const names = readdirSync(directory).filter(isTrailFileName).sort();
  return names
    .slice(Math.max(0, names.length - last))
    .map((name) => ({ name: join(directory, name), text: readFileSync(join(directory, name), 'utf8') }));
}

export type TrailRecord = Record<string, unknown> & { seq: number; kind: string; prev: string };

export function records(directory: string): TrailRecord[] {
  return readTrail(directory).flatMap(({ text }) =>
    text
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as TrailRecord),
  );
}

/** Lines re-chained from the first: each `prev` recomputed, as someone rewriting the file would. */
export function rechain(lines: string[], firstPrev: string): string[] {
  let prev = firstPrev;
  return lines.map((line) => {
    const record = JSON.parse(line) as Record<string, unknown>;
    record.prev = prev;
    const text = JSON.stringify(record);
    prev = lineHash(text);
    return text;
  });
}

/**
 * Rewrites the whole trail as someone with write access but not the key would: `edit` changes lines
 * of a file, then every `prev` from there on is recomputed, across files.
 */
export function rewriteTrail(directory: string, edit: (lines: string[], file: number) => string[]): void {
  let prev: string | undefined;
  readTrail(directory).forEach(({ name, text }, index) => {
    const lines = edit(text.split('\n').slice(0, -1), index);
    const first = JSON.parse(lines[0]!) as { prev: string };
    const rewritten = rechain(lines, prev ?? first.prev);
    prev = lineHash(rewritten[rewritten.length - 1]!);
    writeFileSync(name, `${rewritten.join('\n')}\n`);
  });
}

export const intentRecord = (n: number, extra: Record<string, unknown> = {}) =>
  recordText({ kind: 'intent', time: new Date().toISOString(), id: `r${n}`, commandId: `c${n}`, ...extra });

/** The writer's options for a test trail in `directory`, signed with `keys` (small files: several rotations). */
export function writerOptions(
  directory: string,
  keys: KeyFiles,
  overrides: Partial<TrailWriterOptions> = {},
): TrailWriterOptions {
  return {
    directory,
    durable: false,
    maxPendingRecords: 100_000,
    maxPendingBytes: 64 << 20,
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

/** A trail of `count` records in `directory`, written in turns of 16 (several files), closed (sealed) unless `close` is false. */
export async function writeTrail(
  directory: string,
  keys: KeyFiles,
  count: number,
  overrides: Partial<TrailWriterOptions> = {},
  close = true,
): Promise<TrailWriter> {
  const writer = await openTrailWriter(writerOptions(directory, keys, overrides));
  for (let n = 0; n < count; n += 16)
    await Promise.all(Array.from({ length: Math.min(16, count - n) }, (_, i) => writer.append(intentRecord(n + i))));
  if (close) await writer.close();
  return writer;
}

/** A copy of a trail's directory, to take apart. */
export function copyTrail(directory: string): string {
  const copy = trailDirectory();
  cpSync(directory, copy, { recursive: true });
  return copy;
}
