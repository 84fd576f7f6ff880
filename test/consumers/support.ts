// Gateway keys in a key file for a test gateway, and calls made with them.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createGatewayKey, type KeyRecord } from '../../src/consumers/gateway-keys.js';
import { writeKeyFileSync } from '../../src/consumers/key-file.js';
import { rawRequest } from '../auth/support/http.js';

export function keyFilePath(): string {
  return join(mkdtempSync(join(tmpdir(), 'gateway-keys-')), 'keys.json');
}

/** A new key of `consumer`, valid for an hour unless `fields` say otherwise. */
export function newKey(consumer: string, fields: Partial<Omit<KeyRecord, 'id' | 'hash'>> = {}) {
  return createGatewayKey({ consumer, expiresAt: new Date(Date.now() + 3_600_000).toISOString(), ...fields });
}

export function writeKeys(path: string, records: readonly KeyRecord[]): void {
  writeKeyFileSync(path, records);
}

export const ledgerEnd = (url: string, authorization: string, extra: string[] = []) =>
  rawRequest(url, '/v2/state/ledger-end', { headers: ['authorization', authorization, ...extra] });

/** A consumers section with one consumer `payments` and keys in `file`. */
export function consumersWithKeyFile(file: string, consumer: Record<string, unknown> = {}) {
  return {
    list: [{ name: 'payments', ...consumer }],
    keys: { store: 'file', file, refreshIntervalMs: 100 },
  };
}
