// `ledger-gateway keys create|list|revoke`: gateway keys in the store the configuration names
// (consumers.keys: a file, or protection.redis). A new key is printed once, with its id; only its
// hash is stored. Exit 0 done, 1 the store could not be read or written, 2 a bad command line.
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { loadConfiguration } from '../config/load.js';
import type { GatewayConfig } from '../config/schema.js';
import { createGatewayKey, keyRecordProblem, type KeyRecord } from '../consumers/gateway-keys.js';
import { readKeyFileSync, writeKeyFileSync } from '../consumers/key-file.js';
import { listRedisKeys, putRedisKey, type RedisClient } from '../consumers/key-redis.js';
import { openRedisConnection, redisMode } from '../protection/redis-connection.js';

export const KEYS_USAGE = [
  'usage: ledger-gateway keys create --consumer <name> [--expires-in <N>d|h] [--expires-at <ISO time>]',
  '                                  [--source <IP or CIDR>]... [--operation <name>]... [--description <text>]',
  '       ledger-gateway keys list',
  '       ledger-gateway keys revoke <key id>',
  '       (each with --config <file>, else LEDGER_GATEWAY_CONFIG: consumers.keys names the store)',
].join('\n');

export interface KeysCommandResult {
  readonly code: number;
  readonly output: string;
}

/** What the commands need of a store: read every record, and write one (new or revoked). */
interface KeyStoreAccess {
  list(): Promise<KeyRecord[]>;
  put(record: KeyRecord): Promise<void>;
  close(): Promise<void>;
}

async function openStore(config: GatewayConfig): Promise<KeyStoreAccess> {
  const { store, file } = config.consumers.keys;
  if (store === 'file') {
    return {
      list: async () => readKeyFileSync(file!),
      put: async (record) => {
        const records = readKeyFileSync(file!).filter((entry) => entry.id !== record.id);
        writeKeyFileSync(file!, [...records, record]);
      },
      close: async () => undefined,
    };
  }
  if (store === 'redis' && redisMode(config.protection.redis) !== undefined) {
    const client: RedisClient = openRedisConnection(config.protection.redis);
    client.on('error', () => {});
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('Redis did not answer within 5 s')), 5_000);
      client.once('ready', () => {
        clearTimeout(timer);
        resolve();
      });
    }).catch((error: unknown) => {
      client.disconnect();
      throw error;
    });
    const prefix = config.protection.redis.keyPrefix;
    return {
      list: () => listRedisKeys(client, prefix),
      put: (record) => putRedisKey(client, prefix, record),
      close: async () => {
        if (client instanceof Redis) await client.quit().catch(() => undefined);
        else client.disconnect();
      },
    };
  }
  throw new UsageError('consumers.keys.store is none: the configuration names no key store (file or redis)');
}

class UsageError extends Error {}

/** `90d`, `12h`: a lifetime in milliseconds. */
function lifetimeMs(text: string): number {
  const match = /^(\d{1,5})([dh])$/.exec(text);
  if (match === null) throw new UsageError(`--expires-in: "${text}" is not a number of days (90d) or hours (12h)`);
  return Number(match[1]) * (match[2] === 'd' ? 86_400_000 : 3_600_000);
}

type Options = Record<string, string | boolean | string[] | undefined>;

async function create(config: GatewayConfig, store: KeyStoreAccess, values: Options): Promise<string> {
  const consumer = values.consumer as string | undefined;
  if (consumer === undefined) throw new UsageError('--consumer is required');
  if (!config.consumers.list.some((entry) => entry.name === consumer))
    throw new UsageError(`--consumer: "${consumer}" is not in consumers.list of the configuration`);
  const expiresAt =
    values['expires-at'] !== undefined
      ? new Date(Date.parse(values['expires-at'] as string))
      : new Date(Date.now() + lifetimeMs((values['expires-in'] as string | undefined) ?? '90d'));
  if (Number.isNaN(expiresAt.getTime()) || expiresAt.getTime() <= Date.now())
    throw new UsageError('--expires-at: a time in the future (ISO 8601)');
  const sources = values.source as string[] | undefined;
  const operations = values.operation as string[] | undefined;
  const description = values.description as string | undefined;
  const { key, record } = createGatewayKey({
    consumer,
    expiresAt: expiresAt.toISOString(),
    ...(sources !== undefined && { sources }),
    ...(operations !== undefined && { operations }),
    ...(description !== undefined && { description }),
  });
  const problem = keyRecordProblem(record);
  if (problem !== undefined) throw new UsageError(problem);
  await store.put(record);
  return `${key}\n# key id ${record.id}, consumer ${consumer}, expires ${record.expiresAt}. The key is shown this once: only its hash is stored.\n`;
}

function listing(records: readonly KeyRecord[]): string {
  const now = Date.now();
  const lines = ['id            consumer              state    expires                   sources  operations'];
  for (const record of records) {
    const state =
      record.revokedAt !== undefined ? 'revoked' : Date.parse(record.expiresAt) <= now ? 'expired' : 'active';
    lines.push(
      [
        record.id.padEnd(13),
        record.consumer.padEnd(21),
        state.padEnd(8),
        record.expiresAt.padEnd(25),
        (record.sources?.join(',') ?? '*').padEnd(8),
        record.operations?.join(',') ?? '*',
      ].join(' '),
    );
  }
  return `${lines.join('\n')}\n`;
}

async function revoke(store: KeyStoreAccess, id: string | undefined): Promise<string> {
  if (id === undefined) throw new UsageError('revoke: name the key id');
  const record = (await store.list()).find((entry) => entry.id === id);
  if (record === undefined) throw new UsageError(`no key with id ${id}`);
  if (record.revokedAt !== undefined) return `key ${id} was already revoked at ${record.revokedAt}\n`;
  await store.put({ ...record, revokedAt: new Date().toISOString() });
  return `key ${id} (consumer ${record.consumer}) revoked\n`;
}

export async function runKeysCommand(
  argv: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<KeysCommandResult> {
  let values: Options;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: [...argv],
      options: {
        config: { type: 'string', short: 'c' },
        consumer: { type: 'string' },
        'expires-in': { type: 'string' },
        'expires-at': { type: 'string' },
        source: { type: 'string', multiple: true },
        operation: { type: 'string', multiple: true },
        description: { type: 'string' },
      },
      allowPositionals: true,
      strict: true,
    }));
  } catch (error) {
    return { code: 2, output: `${(error as Error).message}\n${KEYS_USAGE}\n` };
  }
  const [command, ...rest] = positionals;
  if (command !== 'create' && command !== 'list' && command !== 'revoke') return { code: 2, output: `${KEYS_USAGE}\n` };
  let store: KeyStoreAccess | undefined;
  try {
    const config = loadConfiguration((values.config as string | undefined) ?? env.LEDGER_GATEWAY_CONFIG, env).config;
    store = await openStore(config);
    if (command === 'create') return { code: 0, output: await create(config, store, values) };
    if (command === 'list') return { code: 0, output: listing(await store.list()) };
    return { code: 0, output: await revoke(store, rest[0]) };
  } catch (error) {
    const usage = error instanceof UsageError || (error as Error).name === 'ConfigError';
    return { code: usage ? 2 : 1, output: `keys ${command}: ${(error as Error).message}\n` };
  } finally {
    await store?.close();
  }
}
