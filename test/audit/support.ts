// An Ed25519 key pair in PEM files and trail helpers for the audit tests.
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lineHash } from '../../src/audit/chain.js';
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
