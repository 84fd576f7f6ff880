// The trail's tamper evidence: every record names the SHA-256 of the line before it (a chain that
// runs on across files: a file's first record names the previous file's last line), and a digest
// record, signed with Ed25519, at a bounded interval and at each file's end, so that a trail
// rewritten whole, every hash recomputed, no longer carries valid signatures (AWS CloudTrail's log
// file integrity validation is the model: a hash chain plus signed digest files).
import { readFileSync } from 'node:fs';
import { createPrivateKey, createPublicKey, hash, sign, verify, type KeyObject } from 'node:crypto';
import { ConfigError } from '../config/schema.js';

/** The format of a record; docs/audit.md documents it, and a reader refuses a version it does not know. */
export const AUDIT_RECORD_VERSION = 1;

/** What the first record ever written names as the line before it. */
export const GENESIS_HASH = '0'.repeat(64);

export const lineHash = (line: string): string => hash('sha256', line, 'hex');

/** The text a digest record's signature covers: its position, its time and the chain up to it. */
export function digestMessage(seq: number, time: string, prev: string): Buffer {
  return Buffer.from(`ledger-gateway-audit/${AUDIT_RECORD_VERSION} digest ${seq} ${time} ${prev}`);
}

/** The first 16 hex digits of the SHA-256 of the public key's DER (SubjectPublicKeyInfo): which key signed a digest. */
export function keyIdOf(publicKey: KeyObject): string {
  return hash('sha256', publicKey.export({ type: 'spki', format: 'der' }), 'hex').slice(0, 16);
}

/** The id trails written before it was the documented digest carry: the SHA-256 of the DER's hex text. */
export function legacyKeyIdOf(publicKey: KeyObject): string {
  return lineHash(publicKey.export({ type: 'spki', format: 'der' }).toString('hex')).slice(0, 16);
}

export interface DigestSigner {
  readonly keyId: string;
  sign(seq: number, time: string, prev: string): string;
}

/** Why the signing key cannot be used, in one line naming the file (never the key's content). */
function signingKeyProblem(file: string, pem: Buffer): { key?: KeyObject; problem?: string } {
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch {
    return { problem: `audit.signingKeyFile: ${file} is not a PEM private key` };
  }
  if (key.asymmetricKeyType !== 'ed25519')
    return { problem: `audit.signingKeyFile: ${file} is an ${key.asymmetricKeyType ?? 'unknown'} key, not Ed25519` };
  return { key };
}

/** Reads the signing key file, or says in one line why it cannot be used (missing, unreadable, not Ed25519). */
export function readSigningKey(file: string): { key?: KeyObject; problem?: string } {
  let pem: Buffer;
  try {
    pem = readFileSync(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code;
    return { problem: `audit.signingKeyFile: cannot read ${file} (${why})` };
  }
  return signingKeyProblem(file, pem);
}

/** A signer from the Ed25519 private key in `file`; a key that cannot be used is a ConfigError (one line). */
export function digestSigner(file: string): DigestSigner {
  const { key, problem } = readSigningKey(file);
  if (key === undefined) throw new ConfigError('audit', [problem!]);
  return {
    keyId: keyIdOf(createPublicKey(key)),
    sign: (seq, time, prev) => sign(null, digestMessage(seq, time, prev), key).toString('base64'),
  };
}

/** A public key the verifier cannot use: the message is one line, naming the file. */
export class PublicKeyError extends Error {}

export interface DigestChecker {
  readonly keyId: string;
  /** Whether a digest names this key (by its id, or by the id trails written before named it). */
  names(keyId: unknown): boolean;
  check(seq: number, time: string, prev: string, signature: string): boolean;
}

/** A checker of digest signatures from the PEM Ed25519 public key (or a private key, whose public half is used). */
export function digestChecker(pem: string | Buffer, file = 'the public key'): DigestChecker {
  let key: KeyObject;
  try {
    key = createPublicKey(pem);
  } catch {
    throw new PublicKeyError(`${file} is not a PEM public key (expected "-----BEGIN PUBLIC KEY-----", Ed25519)`);
  }
  if (key.asymmetricKeyType !== 'ed25519')
    throw new PublicKeyError(`${file} is an ${key.asymmetricKeyType ?? 'unknown'} key, not Ed25519`);
  const keyId = keyIdOf(key);
  const legacy = legacyKeyIdOf(key);
  return {
    keyId,
    names: (named) => named === keyId || named === legacy,
    check: (seq, time, prev, signature) => {
      try {
        return verify(null, digestMessage(seq, time, prev), key, Buffer.from(signature, 'base64'));
      } catch {
        return false;
      }
    },
  };
}
