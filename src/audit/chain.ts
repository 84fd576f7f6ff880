// The trail's tamper evidence: every record names the SHA-256 of the line before it (a chain that
// runs on across files: a file's first record names the previous file's last line), and a digest
// record, signed with Ed25519, at a bounded interval and at each file's end, so that a trail
// rewritten whole, every hash recomputed, no longer carries valid signatures (AWS CloudTrail's log
// file integrity validation is the model: a hash chain plus signed digest files).
import { createPrivateKey, createPublicKey, hash, sign, verify, type KeyObject } from 'node:crypto';

/** The format of a record; docs/audit.md documents it, and a reader refuses a version it does not know. */
export const AUDIT_RECORD_VERSION = 1;

/** What the first record ever written names as the line before it. */
export const GENESIS_HASH = '0'.repeat(64);

export const lineHash = (line: string): string => hash('sha256', line, 'hex');

/** The text a digest record's signature covers: its position, its time and the chain up to it. */
export function digestMessage(seq: number, time: string, prev: string): Buffer {
  return Buffer.from(`ledger-gateway-audit/${AUDIT_RECORD_VERSION} digest ${seq} ${time} ${prev}`);
}

/** The first 16 hex digits of the SHA-256 of the public key's DER: which key signed a digest. */
export function keyIdOf(publicKey: KeyObject): string {
  return lineHash(publicKey.export({ type: 'spki', format: 'der' }).toString('hex')).slice(0, 16);
}

export interface DigestSigner {
  readonly keyId: string;
  sign(seq: number, time: string, prev: string): string;
}

/** A signer from a PEM Ed25519 private key; throws a plain Error naming the problem (never the key). */
export function digestSigner(pem: string | Buffer): DigestSigner {
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch {
    throw new Error('audit.signingKeyFile: not a PEM private key');
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new Error('audit.signingKeyFile: not an Ed25519 key');
  const keyId = keyIdOf(createPublicKey(key));
  return {
    keyId,
    sign: (seq, time, prev) => sign(null, digestMessage(seq, time, prev), key).toString('base64'),
  };
}

/** A checker of digest signatures from the PEM Ed25519 public key (or a private key, whose public half is used). */
export function digestChecker(pem: string | Buffer): {
  keyId: string;
  check(seq: number, time: string, prev: string, signature: string): boolean;
} {
  const key = createPublicKey(pem);
  if (key.asymmetricKeyType !== 'ed25519') throw new Error('the public key is not an Ed25519 key');
  return {
    keyId: keyIdOf(key),
    check: (seq, time, prev, signature) => {
      try {
        return verify(null, digestMessage(seq, time, prev), key, Buffer.from(signature, 'base64'));
      } catch {
        return false;
      }
    },
  };
}
