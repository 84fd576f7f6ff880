// Redis as operators run it, from real redis-server processes on loopback ports: a master with a
// replica watched by three sentinels, and a cluster of three masters each with a replica. Short
// failure detection (1 s) keeps the failover tests short. Persistence off; config files (Sentinel and
// Cluster rewrite theirs) live in a temporary directory removed at close.
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { ephemeralNodeArgs, freePort, launchRedis } from './redis-server.js';

const DETECTION_MS = 1_000;

async function stopProcess(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGCONT');
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

/** Polls `check` every 50 ms until it holds; throws naming `what` after `timeoutMs`. */
export async function until(check: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function client(port: number, password: string): Redis {
  const redis = new Redis({ host: '127.0.0.1', port, password, maxRetriesPerRequest: 1, lazyConnect: false });
  redis.on('error', () => {});
  return redis;
}

function dataNodeArgs(port: number, password: string, dir: string): string[] {
  return [
    ...ephemeralNodeArgs(port, password),
    '--dir',
    dir,
    '--masterauth',
    password,
    // A replica syncs at once, not after the default 5 s wait for other replicas.
    '--repl-diskless-sync-delay',
    '0',
  ];
}

export interface SentinelGroup {
  readonly masterName: string;
  /** Of the data nodes (requirepass and masterauth). */
  readonly password: string;
  /** Of the sentinels (their requirepass). */
  readonly sentinelPassword: string;
  /** host:port of each sentinel. */
  readonly sentinels: readonly string[];
  /** The master's port as the sentinels name it now. */
  masterPort(): Promise<number>;
  /** A plain client on the current master, as an operator would use. */
  master(): Promise<Redis>;
  /** SIGKILL of the current master (a crash); resolves with its port. */
  killMaster(): Promise<number>;
  /** SENTINEL FAILOVER: the replica is promoted and the old master, alive, becomes its replica. */
  failover(): Promise<void>;
  close(): Promise<void>;
}

/** A master, its replica and three sentinels (quorum 2), ready when every sentinel knows the others and the replica. */
export async function startSentinelGroup(): Promise<SentinelGroup> {
  const dir = await mkdtemp(path.join(tmpdir(), 'ledger-gateway-sentinel-'));
  const password = `data-secret-${process.pid}`;
  const sentinelPassword = `sentinel-secret-${process.pid}`;
  const masterName = 'ledger-limits';
  const nodes = new Map<number, ChildProcess>();
  const sentinels: Array<{ port: number; child: ChildProcess }> = [];
  const clients: Redis[] = [];
  const close = async () => {
    for (const redis of clients) redis.disconnect();
    await Promise.all([
      ...sentinels.map(({ child }) => stopProcess(child)),
      ...[...nodes.values()].map((child) => stopProcess(child)),
    ]);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const masterPort = await freePort();
    nodes.set(masterPort, await launchRedis(dataNodeArgs(masterPort, password, dir)));
    const replicaPort = await freePort();
    nodes.set(
      replicaPort,
      await launchRedis(
        [...dataNodeArgs(replicaPort, password, dir), '--replicaof', '127.0.0.1', String(masterPort)],
        'MASTER <-> REPLICA sync: Finished with success',
      ),
    );
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const file = path.join(dir, `sentinel-${port}.conf`);
      await writeFile(
        file,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `requirepass ${sentinelPassword}`,
          `sentinel monitor ${masterName} 127.0.0.1 ${masterPort} 2`,
          `sentinel auth-pass ${masterName} ${password}`,
          `sentinel down-after-milliseconds ${masterName} ${DETECTION_MS}`,
          `sentinel failover-timeout ${masterName} 10000`,
          '',
        ].join('\n'),
      );
      sentinels.push({ port, child: await launchRedis([file, '--sentinel'], '+monitor master') });
    }
    for (const { port } of sentinels) {
      const sentinel = client(port, sentinelPassword);
      clients.push(sentinel);
      await until(async () => {
        const peers = (await sentinel.call('SENTINEL', 'SENTINELS', masterName)) as unknown[];
        const replicas = (await sentinel.call('SENTINEL', 'REPLICAS', masterName)) as string[][];
        return peers.length === 2 && replicas.length === 1 && !replicas[0]!.join(' ').includes('disconnected');
      }, `sentinel ${port} to know its peers and the replica`);
    }
  } catch (error) {
    await close();
    throw error;
  }
  const masterPort = async () => {
    const [, port] = (await clients[0]!.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', masterName)) as [string, string];
    return Number(port);
  };
  return {
    masterName,
    password,
    sentinelPassword,
    sentinels: sentinels.map(({ port }) => `127.0.0.1:${port}`),
    masterPort,
    async master() {
      const redis = client(await masterPort(), password);
      clients.push(redis);
      return redis;
    },
    async killMaster() {
      const port = await masterPort();
      await stopProcess(nodes.get(port)!, 'SIGKILL');
      return port;
    },
    async failover() {
      await clients[0]!.call('SENTINEL', 'FAILOVER', masterName);
    },
    close,
  };
}

export interface RedisClusterGroup {
  readonly password: string;
  /** host:port of every node (any serves as a seed). */
  readonly nodes: readonly string[];
  /** The port of the master that serves `key` now. */
  masterPortOf(key: string): Promise<number>;
  /** Moves the slot of `key` to another master (MIGRATING/IMPORTING, MIGRATE, SETSLOT NODE), keys and all. */
  moveSlotOf(key: string): Promise<{ from: number; to: number }>;
  /** A plain cluster-unaware client on one node. */
  node(port: number): Redis;
  /** SIGKILL of the node on `port` (a crash). */
  kill(port: number): Promise<void>;
  close(): Promise<void>;
}

async function run(command: string, args: readonly string[]): Promise<string> {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (data: Buffer) => (output += data.toString()));
  child.stderr.on('data', (data: Buffer) => (output += data.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  clearTimeout(timer);
  if (code !== 0) throw new Error(`${command} exited with ${code}:\n${output}`);
  return output;
}

/** Three masters with a replica each (redis-cli --cluster create), ready when every node reports cluster_state:ok. */
export async function startRedisCluster(): Promise<RedisClusterGroup> {
  const dir = await mkdtemp(path.join(tmpdir(), 'ledger-gateway-cluster-'));
  const password = `cluster-secret-${process.pid}`;
  const nodes = new Map<number, ChildProcess>();
  const clients = new Map<number, Redis>();
  const close = async () => {
    for (const redis of clients.values()) redis.disconnect();
    await Promise.all([...nodes.values()].map((child) => stopProcess(child)));
    await rm(dir, { recursive: true, force: true });
  };
  const node = (port: number) => {
    if (!clients.has(port)) clients.set(port, client(port, password));
    return clients.get(port)!;
  };
  try {
    for (let i = 0; i < 6; i++) {
      const port = await freePort();
      const busPort = await freePort();
      nodes.set(
        port,
        await launchRedis([
          ...dataNodeArgs(port, password, dir),
          '--cluster-enabled',
          'yes',
          '--cluster-port',
          String(busPort),
          '--cluster-config-file',
          path.join(dir, `nodes-${port}.conf`),
          '--cluster-node-timeout',
          String(DETECTION_MS),
        ]),
      );
    }
    await run('redis-cli', [
      '--no-auth-warning',
      '-a',
      password,
      '--cluster',
      'create',
      ...[...nodes.keys()].map((port) => `127.0.0.1:${port}`),
      '--cluster-replicas',
      '1',
      '--cluster-yes',
    ]);
    for (const port of nodes.keys()) {
      const redis = node(port);
      await until(async () => {
        const info = String(await redis.call('CLUSTER', 'INFO'));
        const replication = await redis.info('replication');
        return (
          info.includes('cluster_state:ok') &&
          info.includes('cluster_known_nodes:6') &&
          (replication.includes('role:master') || replication.includes('master_link_status:up'))
        );
      }, `cluster node ${port} to be ready (a replica: in sync)`);
    }
  } catch (error) {
    await close();
    throw error;
  }
  const anyLive = () => [...nodes].find(([, child]) => child.exitCode === null && child.signalCode === null)![0];
  const slotMap = async () =>
    (await node(anyLive()).call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number]]>;
  const slotOf = async (key: string) => Number(await node(anyLive()).call('CLUSTER', 'KEYSLOT', key));
  const masterPortOf = async (key: string) => {
    const slot = await slotOf(key);
    const range = (await slotMap()).find(([from, to]) => slot >= from && slot <= to);
    if (range === undefined) throw new Error(`no master serves slot ${slot}`);
    return Number(range[2][1]);
  };
  return {
    password,
    nodes: [...nodes.keys()].map((port) => `127.0.0.1:${port}`),
    masterPortOf,
    async moveSlotOf(key) {
      // The resharding steps of https://redis.io/docs/latest/commands/cluster-setslot/, for one slot.
      const slot = await slotOf(key);
      const from = await masterPortOf(key);
      const masters = [...new Set((await slotMap()).map((range) => Number(range[2][1])))];
      const to = masters.find((port) => port !== from)!;
      const [source, target] = [node(from), node(to)];
      const [sourceId, targetId] = await Promise.all([source.call('CLUSTER', 'MYID'), target.call('CLUSTER', 'MYID')]);
      await target.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', String(sourceId));
      await source.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', String(targetId));
      for (;;) {
        const keys = (await source.call('CLUSTER', 'GETKEYSINSLOT', slot, 100)) as string[];
        if (keys.length === 0) break;
        await source.call('MIGRATE', '127.0.0.1', to, '', 0, 5_000, 'AUTH', password, 'KEYS', ...keys);
      }
      for (const port of [to, from, ...masters.filter((p) => p !== to && p !== from)])
        await node(port).call('CLUSTER', 'SETSLOT', slot, 'NODE', String(targetId));
      return { from, to };
    },
    node,
    async kill(port) {
      await stopProcess(nodes.get(port)!, 'SIGKILL');
    },
    close,
  };
}
