// A Sentinel client that lost its master must reconnect whenever the sentinels' +switch-master
// arrives. ioredis's failover detector of the lost connection outlives it; when its message lands
// while the reconnect is still asking a sentinel for the master, ioredis aborts that connect and
// ends the client for good (seen in CI: a gateway never followed a promoted replica under load).
// The sentinel is a stand-in (rogue-redis.ts) that answers the reconnect's question only when the
// test lets it; the master is a real redis-server.
import { Redis } from 'ioredis';
import { afterEach, expect, it } from 'vitest';
import { openRedisConnection, type RedisConnection } from '../../src/protection/redis-connection.js';
import { describeNeeding } from '../helpers/tool-groups.js';
import { startRedisServer, type RedisServer } from './redis-server.js';
import { startRogueRedis, type RogueRedis } from './rogue-redis.js';

let master: RedisServer | undefined;
let sentinel: RogueRedis | undefined;
let connection: RedisConnection | undefined;
let admin: Redis | undefined;
afterEach(async () => {
  connection?.disconnect();
  admin?.disconnect();
  await sentinel?.close();
  await master?.stop();
});

describeNeeding('redis-server')('a Sentinel client whose reconnect meets +switch-master', () => {
  it('connects again instead of ending', async () => {
    master = await startRedisServer();
    let holding = false;
    let held: (() => void) | undefined;
    sentinel = await startRogueRedis({
      masterPort: master.port,
      onMasterQuery: (answer) => (holding ? (held = answer) : answer()),
    });
    connection = openRedisConnection({
      sentinel: { nodes: [`127.0.0.1:${sentinel.port}`], masterName: 'mymaster' },
      password: master.password,
      commandTimeoutMs: 1_000,
      connectTimeoutMs: 1_000,
      maxReplyBytes: 1024 * 1024,
    });
    connection.on('error', () => {});
    await expect.poll(() => connection!.status, { timeout: 5_000 }).toBe('ready');
    await expect.poll(() => sentinel!.switchSubscribers, { timeout: 5_000 }).toBe(1);

    // The master drops the connection; the reconnect's question to the sentinel is held.
    holding = true;
    admin = new Redis({ port: master.port, password: master.password });
    const clients = String(await admin.client('LIST'));
    const id = /^id=(\d+) .* name=ledger-gateway /m.exec(clients)![1]!;
    await admin.client('KILL', 'ID', id);
    await expect.poll(() => held, { timeout: 5_000 }).toBeDefined();
    // The failover is announced meanwhile, and the detector acts on it (it drops its subscription).
    sentinel.publishSwitchMaster();
    await expect.poll(() => sentinel!.switchSubscribers, { timeout: 5_000 }).toBe(0);
    holding = false;
    held!();

    await expect.poll(() => connection!.status, { timeout: 10_000 }).toBe('ready');
    expect(await connection.ping()).toBe('PONG');
  }, 30_000);
});
