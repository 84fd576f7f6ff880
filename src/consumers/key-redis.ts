// Gateway keys kept in Redis (protection.redis), shared by every replica: one hash of records by id
// and a version counter beside it (one hash slot, so that a change is one transaction on a Cluster
// too), and a notice on a channel at each change. A replica reads the whole set at start and again
// whenever a notice comes or its poll of the version (every consumers.keys.refreshIntervalMs) sees
// a new one: a notice missed while its subscription reconnects is still seen within the interval.
import type { Cluster, Redis } from 'ioredis';
import { KeyRing, readKeyRecords, type KeyRecord } from './gateway-keys.js';
import type { KeyWatch, KeyWatchOptions } from './key-store.js';

export type RedisClient = Redis | Cluster;

export function keyStoreNames(prefix: string) {
  return {
    records: `${prefix}{gateway-keys}`,
    version: `${prefix}{gateway-keys}:version`,
    channel: `${prefix}gateway-keys`,
  };
}

export async function listRedisKeys(client: RedisClient, prefix: string): Promise<KeyRecord[]> {
  const stored = await client.hgetall(keyStoreNames(prefix).records);
  const { records, problems } = readKeyRecords(Object.values(stored).map((text) => JSON.parse(text) as unknown));
  if (problems.length > 0) throw new Error(problems.join('; '));
  return records.sort((a, b) => a.createdAt.localeCompare(b.createdAt));
}

/** Stores a record (a new key, or a changed one) and tells every replica. */
export async function putRedisKey(client: RedisClient, prefix: string, record: KeyRecord): Promise<void> {
  const names = keyStoreNames(prefix);
  const result = await client.multi().hset(names.records, record.id, JSON.stringify(record)).incr(names.version).exec();
  const failed = result?.find(([error]) => error !== null);
  if (result === null || failed !== undefined) throw failed?.[0] ?? new Error('the key store transaction was aborted');
  await client.publish(names.channel, String(result[1]![1]));
}

/** Reads the whole set once it changed: at start, on a notice, and when the polled version moved. */
function keyReader(client: RedisClient, prefix: string, options: KeyWatchOptions) {
  const names = keyStoreNames(prefix);
  let ring = new KeyRing([], 0);
  let loaded = false;
  let version: string | null | undefined;
  let failing = false;
  let reading: Promise<void> | undefined;

  async function read(force: boolean): Promise<void> {
    try {
      const now = await client.get(names.version);
      if (!force && loaded && now === version) return;
      const stored = await client.hgetall(names.records);
      const { records, problems } = readKeyRecords(
        Object.values(stored).map((text) => {
          try {
            return JSON.parse(text) as unknown;
          } catch {
            return null;
          }
        }),
      );
      for (const problem of problems) options.log.warn({ problem }, 'gateway key left out');
      version = now;
      ring = new KeyRing(records, ring.generation + 1);
      if (!loaded || failing) options.log.info({ keys: records.length }, 'gateway keys loaded from Redis');
      loaded = true;
      failing = false;
    } catch (error) {
      if (!failing)
        options.log.warn(
          { error: (error as Error).message.slice(0, 200) },
          'gateway keys not read from Redis; the last keys stay',
        );
      failing = true;
    }
  }
  return {
    names,
    get ring() {
      return ring;
    },
    get loaded() {
      return loaded;
    },
    /** One read at a time; a notice during a read reads again after it (it may have missed the change). */
    tick(force = false): Promise<void> {
      const run = (reading ?? Promise.resolve()).then(() => read(force));
      reading = run.finally(() => {
        if (reading === run) reading = undefined;
      });
      return run;
    },
  };
}

export function watchRedisKeys(client: RedisClient, prefix: string, options: KeyWatchOptions): KeyWatch {
  const reader = keyReader(client, prefix, options);
  // A subscribed connection can do nothing else: one of its own.
  const subscriber = client.duplicate();
  subscriber.on('error', () => {}); // its reconnects are the client's; a failed poll is logged instead
  subscriber.on('message', () => void reader.tick(true));
  subscriber.subscribe(reader.names.channel).catch(() => {});
  const first = reader.tick(true);
  const timer = setInterval(() => void reader.tick(), options.refreshIntervalMs);
  timer.unref();
  return {
    get ring() {
      return reader.ring;
    },
    get loaded() {
      return reader.loaded;
    },
    ready: () => first,
    close() {
      clearInterval(timer);
      subscriber.disconnect();
    },
  };
}
