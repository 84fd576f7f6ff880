// The connection to the shared store, in the three ways operators run Redis: one node (a URL),
// Sentinel (the sentinels name the master; a failover is followed) and Cluster (seed nodes; slot
// moves and failovers are followed). Every mode is bounded alike: no offline queue, a command
// timeout, and no resend of a command that may have run on a master now gone (a refund sent twice
// would give a caller a unit twice); only a redirection Redis answers before running the command
// (MOVED, ASK, TRYAGAIN) is followed, at most MAX_REDIRECTIONS times.
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { ProtectionConfig } from '../config/schema.js';

type RedisSection = ProtectionConfig['redis'];
export type RedisConnectionConfig = Pick<
  RedisSection,
  'url' | 'sentinel' | 'cluster' | 'username' | 'password' | 'commandTimeoutMs' | 'connectTimeoutMs' | 'maxReplyBytes'
>;

/**
 * What went wrong with Redis besides its absence, each logged and counted apart from an outage
 * (ledger_gateway_protection_store_errors_total{reason}): the credentials were refused; a reply grew
 * past maxReplyBytes (the connection was cut); a sentinel named its own address as the master.
 */
export type RedisProblem = 'authentication' | 'reply_too_large' | 'master_at_sentinel';
export const REDIS_PROBLEMS: readonly RedisProblem[] = ['authentication', 'reply_too_large', 'master_at_sentinel'];

/** Redis's answers to AUTH (or to a command before it) with the wrong or no credentials: WRONGPASS (6+), ERR invalid password (before 6), NOAUTH. */
export function isAuthenticationFailure(error: Error): boolean {
  return /^(WRONGPASS|NOAUTH)\b|^ERR invalid (password|username-password)/.test(error.message);
}
export type RedisConnection = Redis | Cluster;
export type RedisMode = 'node' | 'sentinel' | 'cluster';

/** Reconnect attempts back off to this (also how often a lost master is asked for again). */
const MAX_BACKOFF_MS = 2_000;
const MAX_REDIRECTIONS = 3;
/** How often a cluster client asks for the slot map even when nothing failed. */
const CLUSTER_SLOTS_REFRESH_MS = 1_000;

const backoff = (attempt: number) => Math.min(attempt * 100, MAX_BACKOFF_MS);

/** Which mode the section configures; undefined: none (limits in memory). */
export function redisMode(config: Pick<RedisSection, 'url' | 'sentinel' | 'cluster'>): RedisMode | undefined {
  if (config.sentinel !== undefined) return 'sentinel';
  if (config.cluster !== undefined) return 'cluster';
  return config.url === undefined ? undefined : 'node';
}

/** What the schema cannot say: one mode at most, and data-node credentials only where no URL carries them. */
export function redisConfigProblems(config: RedisSection): string[] {
  const set = (['url', 'sentinel', 'cluster'] as const).filter((key) => config[key] !== undefined);
  const problems: string[] = [];
  if (set.length > 1) problems.push(`protection.redis: set one of url, sentinel and cluster, not ${set.join(' and ')}`);
  for (const key of ['username', 'password'] as const) {
    if (config[key] !== undefined && config.url !== undefined) {
      problems.push(`protection.redis.${key}: only with sentinel or cluster (with url, the URL carries it)`);
    }
  }
  return problems;
}

function address(text: string): { host: string; port: number } {
  const colon = text.lastIndexOf(':');
  return { host: text.slice(0, colon).replace(/^\[(.*)\]$/, '$1'), port: Number(text.slice(colon + 1)) };
}

/**
 * Bounds what one reply can make this process hold. ioredis's parser keeps a reply in memory until it
 * ends (a bulk string of any announced length, an array of any depth), and a command that timed out
 * leaves its connection reading: a server that streams one endless reply would take the heap. The
 * bytes received since a reply last completed are counted; past maxReplyBytes the socket is
 * destroyed at once (ioredis's own disconnect ends it gracefully, reading on for 2 s) and the retry
 * strategy opens a new connection.
 */
function boundReplies(connection: Redis, maxReplyBytes: number, onProblem: (problem: RedisProblem) => void): void {
  connection.on('connect', () => {
    const stream = connection.stream;
    let unanswered = 0;
    let waiting = 0;
    // Both run in one 'data' emit, around the parser ioredis prepended when the connection opened.
    stream.prependListener('data', () => {
      waiting = connection.commandQueue.length;
    });
    stream.on('data', (chunk: Buffer) => {
      if (connection.commandQueue.length < waiting) unanswered = 0;
      else unanswered += chunk.length;
      if (unanswered <= maxReplyBytes || stream.destroyed) return;
      onProblem('reply_too_large');
      stream.destroy();
    });
  });
}

/** Options every connection to a data node gets (the cluster's nodes included). */
function boundedOptions(config: RedisConnectionConfig): RedisOptions {
  return {
    connectionName: 'ledger-gateway',
    connectTimeout: config.connectTimeoutMs,
    commandTimeout: config.commandTimeoutMs,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    // A master demoted without closing its clients (Sentinel closes them; REPLICAOF by hand does not)
    // answers writes with READONLY: reconnect to whatever is master now, without resending.
    reconnectOnError: (error) => (error.message.startsWith('READONLY') ? 1 : false),
    ...(config.username === undefined ? {} : { username: config.username }),
    ...(config.password === undefined ? {} : { password: config.password }),
  };
}

/**
 * A sentinel decides where the data nodes' credentials are sent. One that names its own address (or
 * another configured sentinel's) as the master is lying, or is no sentinel: its answer is refused,
 * as if it had not answered, and the next sentinel is asked. ioredis reads the master's address
 * through natMap; throwing there fails that sentinel's resolution.
 */
function refuseMasterAtSentinel(
  sentinels: ReadonlyArray<{ host: string; port: number }>,
  onProblem: (problem: RedisProblem) => void,
) {
  const addresses = new Set(sentinels.map(({ host, port }) => `${host}:${port}`));
  return (key: string) => {
    if (!addresses.has(key)) return null;
    onProblem('master_at_sentinel');
    throw new Error('the sentinel named a sentinel address as the master; refused');
  };
}

/**
 * A Sentinel client that never stays ended unless its owner closed it. ioredis's failover detector
 * outlives the connection it watched: its +switch-master, landing while a reconnect still asks a
 * sentinel for the master, aborts that connect, and ioredis then ends the client for good. Here the
 * client is opened again after the usual backoff.
 */
class SentinelClient extends Redis {
  private closedByOwner = false;
  private reopenings = 0;

  constructor(options: RedisOptions) {
    super(options);
    this.on('ready', () => (this.reopenings = 0));
    this.on('end', () => {
      if (this.closedByOwner) return;
      setTimeout(() => {
        if (!this.closedByOwner && this.status === 'end') this.connect().catch(() => {});
      }, backoff(++this.reopenings)).unref();
    });
  }

  override disconnect(reconnect = false): void {
    if (!reconnect) this.closedByOwner = true;
    super.disconnect(reconnect);
  }
}

/** Opens the connection the section configures (call only when redisMode is defined). */
export function openRedisConnection(
  config: RedisConnectionConfig,
  onProblem: (problem: RedisProblem) => void = () => undefined,
): RedisConnection {
  const { sentinel, cluster } = config;
  if (cluster !== undefined) {
    const client = new Cluster(cluster.nodes.map(address), {
      // A node's own queue holds a command only while its connection opens (bounded by the timeouts).
      redisOptions: boundedOptions(config),
      enableOfflineQueue: false,
      clusterRetryStrategy: backoff,
      maxRedirections: MAX_REDIRECTIONS,
      retryDelayOnFailover: 0, // a command lost with its connection may have run: never resent
      retryDelayOnClusterDown: 0, // while a master is being replaced: failMode, not a wait
      slotsRefreshInterval: CLUSTER_SLOTS_REFRESH_MS,
      slotsRefreshTimeout: config.commandTimeoutMs,
    });
    // ioredis opens a node's connection at its first command, and refuses the commands that come
    // while it opens: open each master's as soon as it is known (redisReady waits for them).
    client.on('+node', (node: Redis) => {
      boundReplies(node, config.maxReplyBytes, onProblem);
      if (node.options.readOnly !== true) node.connect().catch(() => {});
    });
    return client;
  }
  const bounded: RedisOptions = {
    ...boundedOptions(config),
    enableOfflineQueue: false,
    retryStrategy: backoff,
    lazyConnect: false,
  };
  if (sentinel !== undefined) {
    const sentinels = sentinel.nodes.map(address);
    const client = new SentinelClient({
      ...bounded,
      sentinels,
      // Only the configured sentinels are asked: one that answers must not add others (ioredis's
      // updateSentinels would take every sentinel it names, and ask it for the master next).
      updateSentinels: false,
      natMap: refuseMasterAtSentinel(sentinels, onProblem),
      name: sentinel.masterName,
      role: 'master',
      ...(sentinel.username === undefined ? {} : { sentinelUsername: sentinel.username }),
      ...(sentinel.password === undefined ? {} : { sentinelPassword: sentinel.password }),
      sentinelCommandTimeout: config.commandTimeoutMs,
      sentinelRetryStrategy: backoff,
      // Subscribes to the sentinels' +switch-master: the new master is followed at once, not at the next failure.
      failoverDetector: true,
      sentinelReconnectStrategy: backoff,
    });
    boundReplies(client, config.maxReplyBytes, onProblem);
    return client;
  }
  const client = new Redis(config.url!, bounded);
  boundReplies(client, config.maxReplyBytes, onProblem);
  return client;
}

/** Connected: the node, the master Sentinel named, or the cluster and every master it knows. */
export function redisReady(client: RedisConnection): boolean {
  if (client.status !== 'ready') return false;
  return !(client instanceof Cluster) || client.nodes('master').every((node) => node.status === 'ready');
}

/** Resolves when Redis answers again: one node, or every master of a cluster (each holds some callers' keys). */
export async function pingRedis(client: RedisConnection): Promise<void> {
  if (client instanceof Cluster) await Promise.all(client.nodes('master').map((node) => node.ping()));
  else await client.ping();
}
