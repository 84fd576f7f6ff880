// Gateway keys: opaque bearer keys of 256 random bits with a recognisable prefix (`lgk_`, so that a
// leaked one is found by a secret scanner and never taken for a JWT), kept only as the SHA-256 of
// the key. A fast hash is enough: a key has 256 bits of entropy, so its hash cannot be reversed by
// guessing, however fast the guesses (a slow hash such as bcrypt or argon2 guards low-entropy
// passwords); it lets a call's key be found by one lookup, and an unknown key costs a hash, not a
// slow one an attacker could make the gateway compute at will (docs/consumers.md).
import { hash, randomBytes } from 'node:crypto';
import { BlockList, isIP } from 'node:net';
import { OPERATION_NAMES } from '../operations.js';

export const GATEWAY_KEY_PREFIX = 'lgk_';
/** `lgk_` and 32 random bytes in base64url (43 characters, no padding). */
export const GATEWAY_KEY_SHAPE = /^lgk_[A-Za-z0-9_-]{43}$/;
const ID_SHAPE = /^[a-f0-9]{12}$/;
const HASH_SHAPE = /^[A-Za-z0-9_-]{43}$/;
const NAME_SHAPE = /^[a-z0-9][a-z0-9_.-]{0,62}$/;

/** A key as stored: never the key itself. */
export interface KeyRecord {
  /** Names the key in `keys list` and `keys revoke` (12 hex digits, random). */
  readonly id: string;
  /** SHA-256 of the whole key, base64url. */
  readonly hash: string;
  readonly consumer: string;
  /** ISO 8601; the key is refused from then on. */
  readonly expiresAt: string;
  readonly createdAt: string;
  /** ISO 8601 when revoked (kept for the listing); absent while the key is in force. */
  readonly revokedAt?: string;
  /** IP addresses or CIDRs the key may be used from; absent: anywhere. */
  readonly sources?: readonly string[];
  /** Operation names the key may call; absent: every operation. */
  readonly operations?: readonly string[];
  readonly description?: string;
}

/** A key record ready for the request path. */
export interface CompiledKey {
  readonly record: KeyRecord;
  readonly expiresAtMs: number;
  readonly revoked: boolean;
  /** Whether a client address may use the key; undefined: any. */
  readonly fromSource: ((address: string) => boolean) | undefined;
  readonly operations: ReadonlySet<string> | undefined;
}

export function hashGatewayKey(key: string): string {
  return hash('sha256', key, 'base64url');
}

/** A new key and its record; the key is shown once and never stored. */
export function createGatewayKey(fields: Omit<KeyRecord, 'id' | 'hash' | 'createdAt' | 'revokedAt'>, now = new Date()) {
  const key = `${GATEWAY_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
  const record: KeyRecord = {
    id: randomBytes(6).toString('hex'),
    hash: hashGatewayKey(key),
    createdAt: now.toISOString(),
    ...fields,
  };
  return { key, record };
}

function sourceList(entries: readonly string[]): BlockList | string {
  const list = new BlockList();
  for (const entry of entries) {
    const [address = '', prefix] = entry.split('/');
    const family = isIP(address);
    const bits = prefix === undefined ? (family === 4 ? 32 : 128) : Number(prefix);
    if (family === 0 || !Number.isInteger(bits) || bits < 0 || bits > (family === 4 ? 32 : 128))
      return `"${entry}" is not an IP address or CIDR`;
    list.addSubnet(address, bits, family === 4 ? 'ipv4' : 'ipv6');
  }
  return list;
}

/** Why a stored record cannot be used (a file edited by hand, a store written by another version); undefined when it can. */
export function keyRecordProblem(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object') return 'not an object';
  const record = value as Record<string, unknown>;
  if (typeof record.id !== 'string' || !ID_SHAPE.test(record.id)) return 'id is not 12 hex digits';
  if (typeof record.hash !== 'string' || !HASH_SHAPE.test(record.hash)) return 'hash is not a base64url SHA-256';
  if (typeof record.consumer !== 'string' || !NAME_SHAPE.test(record.consumer)) return 'consumer is not a name';
  for (const field of ['expiresAt', 'createdAt'] as const)
    if (typeof record[field] !== 'string' || Number.isNaN(Date.parse(record[field]))) return `${field} is not a time`;
  if (
    record.revokedAt !== undefined &&
    (typeof record.revokedAt !== 'string' || Number.isNaN(Date.parse(record.revokedAt)))
  )
    return 'revokedAt is not a time';
  if (record.sources !== undefined) {
    if (!Array.isArray(record.sources) || !record.sources.every((entry) => typeof entry === 'string'))
      return 'sources is not a list of addresses';
    const list = sourceList(record.sources);
    if (typeof list === 'string') return `sources: ${list}`;
  }
  if (record.operations !== undefined) {
    if (!Array.isArray(record.operations)) return 'operations is not a list';
    const operations = record.operations as unknown[];
    const unknown = operations.find((name) => typeof name !== 'string' || !OPERATION_NAMES.includes(name));
    if (unknown !== undefined) return `operations: unknown operation ${JSON.stringify(unknown)}`;
  }
  return undefined;
}

export function compileKey(record: KeyRecord): CompiledKey {
  const sources = record.sources === undefined ? undefined : (sourceList(record.sources) as BlockList);
  return {
    record,
    expiresAtMs: Date.parse(record.expiresAt),
    revoked: record.revokedAt !== undefined,
    fromSource:
      sources === undefined
        ? undefined
        : (address) => {
            const plain = address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
            const family = isIP(plain);
            return family !== 0 && sources.check(plain, family === 4 ? 'ipv4' : 'ipv6');
          },
    operations: record.operations === undefined ? undefined : new Set(record.operations),
  };
}

/** The keys in force now, by hash; each load is a new generation (a connection's memo of an older one is not trusted). */
export class KeyRing {
  private readonly byHash: ReadonlyMap<string, CompiledKey>;
  readonly generation: number;
  readonly records: readonly KeyRecord[];

  constructor(records: readonly KeyRecord[], generation: number) {
    this.records = records;
    this.generation = generation;
    this.byHash = new Map(records.map((record) => [record.hash, compileKey(record)]));
  }

  lookup(keyHash: string): CompiledKey | undefined {
    return this.byHash.get(keyHash);
  }
}

/** The valid records of a stored list, and what was wrong with the others (by id or index, never a hash). */
export function readKeyRecords(values: readonly unknown[]): { records: KeyRecord[]; problems: string[] } {
  const records: KeyRecord[] = [];
  const problems: string[] = [];
  values.forEach((value, index) => {
    const problem = keyRecordProblem(value);
    const id = (value as { id?: unknown } | null)?.id;
    if (problem === undefined) records.push(value as KeyRecord);
    else problems.push(`key ${typeof id === 'string' && ID_SHAPE.test(id) ? id : `#${index}`}: ${problem}`);
  });
  return { records, problems };
}
