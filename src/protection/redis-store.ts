// Limits shared by every replica, in Redis. One atomic script per admission checks the caller's
// GCRA rate and both concurrency sets and counts the call only if all pass; Redis's own clock
// (TIME) is the only clock, so replicas' clocks never matter.
// Concurrency slots are leases in a sorted set scored by expiry (the counting semaphore of
// "Redis in Action" §6.3): a replica renews its leases every leaseMs/3 and removes them on release,
// so the slots of a replica that died come back within leaseMs.
// Every command is bounded: no offline queue, no resend after a reconnect, a command timeout
// (redis-connection.ts, for a single node, Sentinel and Cluster alike).
import { createHash, randomUUID } from 'node:crypto';
import {
  isAuthenticationFailure,
  openRedisConnection,
  pingRedis,
  redisMode,
  redisReady,
  type RedisConnection,
  type RedisConnectionConfig,
  type RedisProblem,
} from './redis-connection.js';
import {
  CONCURRENCY_RETRY_AFTER_MS,
  NO_LEASE,
  StoreUnavailableError,
  type AdmissionQuery,
  type LimitName,
  type LimitStore,
  type StoreVerdict,
} from './store.js';

export interface RedisStoreOptions {
  readonly connection: RedisConnectionConfig;
  readonly keyPrefix: string;
  readonly commandTimeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly leaseMs: number;
  /** The connection became usable (true) or was lost (false): once per change, not per reconnect attempt. */
  readonly onReadyChange?: (ready: boolean) => void;
  /** Each time Redis fails in a way an outage does not explain (redis-connection.ts's RedisProblem). */
  readonly onProblem?: (problem: RedisProblem) => void;
}

/** What an admission's failure says while a problem stands (never a credential: the kind alone). */
const PROBLEM_TEXT: Record<RedisProblem, string> = {
  authentication: 'Redis refused the credentials (authentication failed: check protection.redis)',
  reply_too_large: 'a Redis reply grew past protection.redis.maxReplyBytes; the connection was cut',
  master_at_sentinel: 'a sentinel named a sentinel address as the master; its answer was refused',
};

export interface RedisStore extends LimitStore {
  /** Leases this replica holds (tests: no slot leaks). */
  readonly heldLeases: number;
}

// KEYS: rate key, then the caller's slot set and the operation's, each only when needed (a key passed
// and never touched would still count in a Cluster slot move, where a script on keys half moved must wait).
// ARGV: emission interval ms (0: no rate), burst, lease ms, lease member, caller cap, operation cap (0: none).
// Returns {0, 0} admitted, {1, retry ms} over the rate, {2, 0} caller cap, {3, 0} operation cap.
const ADMIT = `
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local lease = tonumber(ARGV[3])
local tat = nil
if interval > 0 then
  tat = tonumber(redis.call('GET', KEYS[1])) or now
  if tat < now then tat = now end
  local excess = tat - now - interval * (burst - 1)
  if excess > 0 then return {1, math.ceil(excess)} end
end
for i = 2, 3 do
  local cap = tonumber(ARGV[3 + i])
  if cap > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
    if redis.call('ZCARD', KEYS[i]) >= cap then return {i, 0} end
  end
end
if tat ~= nil then
  local nextTat = tat + interval
  redis.call('SET', KEYS[1], string.format('%.3f', nextTat), 'PX', math.ceil(nextTat - now) + 1)
end
for i = 2, 3 do
  if tonumber(ARGV[3 + i]) > 0 then
    redis.call('ZADD', KEYS[i], now + lease, ARGV[4])
    redis.call('PEXPIRE', KEYS[i], lease * 2)
  end
end
return {0, 0}
`;

// KEYS: slot sets; ARGV: lease ms, then one member per key. Re-adds too: after a Redis restart the
// calls still in flight are counted again.
const RENEW = `
local clock = redis.call('TIME')
local expiry = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000 + tonumber(ARGV[1])
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], expiry, ARGV[i + 1])
  redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[1]) * 2)
end
return #KEYS
`;

// KEYS: rate key; ARGV: emission interval ms. Moves the caller's TAT back by one interval (a call
// admitted and then not to be counted); a TAT that falls behind now is the same as a rested caller.
const REFUND = `
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
local tat = tonumber(redis.call('GET', KEYS[1]))
if tat == nil then return 0 end
local back = tat - tonumber(ARGV[1])
if back <= now then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], string.format('%.3f', back), 'PX', math.ceil(back - now) + 1)
end
return 1
`;

// KEYS: slot sets; ARGV[1]: the lease member.
const RELEASE = `
for i = 1, #KEYS do redis.call('ZREM', KEYS[i], ARGV[1]) end
return #KEYS
`;

type ScriptCall = (numberOfKeys: number, ...keysAndArgs: string[]) => Promise<unknown>;
interface ScriptClient {
  ledgerGatewayAdmit: ScriptCall;
  ledgerGatewayRefund: ScriptCall;
  ledgerGatewayRenew: ScriptCall;
  ledgerGatewayRelease: ScriptCall;
}

const REFUSALS: Record<number, LimitName> = { 1: 'rate', 2: 'principalConcurrency', 3: 'operationConcurrency' };

/**
 * The keys of one caller and operation. They carry a hash of the caller (bounded length, no user id
 * in Redis); operation names come from the route catalogue. Redis Cluster runs a script only on keys
 * of one hash slot, chosen by the part in braces: the caller's keys share the caller's slot, or the
 * operation's when the operation has a cap for all callers (its slot set is in every admission).
 */
export function limitKeys(
  prefix: string,
  operation: string,
  caller: string,
  operationCap = false,
): { rate: string; callerSlots: string; operationSlots: string } {
  const hash = createHash('sha256').update(caller).digest('base64url').slice(0, 22);
  const callerTag = operationCap ? `{${operation}}:${hash}` : `{${operation}:${hash}}`;
  return {
    rate: `${prefix}rate:${callerTag}`,
    callerSlots: `${prefix}slots:${callerTag}`,
    operationSlots: `${prefix}slots:{${operation}}`,
  };
}

/** The part of a key in its first braces: keys with the same tag share a Cluster slot. */
const hashTag = (key: string) => /\{([^}]*)\}/.exec(key)?.[1] ?? key;

/** Keys renewed per script call. */
const RENEW_BATCH = 256;

/**
 * The held leases as [slot key, member] pairs, at most RENEW_BATCH per renewal script; in a cluster
 * one hash tag per batch, as a script runs on the keys of one slot.
 */
function renewalBatches(
  held: ReadonlyMap<string, readonly string[]>,
  clustered: boolean,
): Array<Array<[string, string]>> {
  const filling = new Map<string, Array<[string, string]>>();
  const batches: Array<Array<[string, string]>> = [];
  for (const [member, slotKeys] of held) {
    const tag = clustered ? hashTag(slotKeys[0]!) : '';
    let batch = filling.get(tag);
    if (batch === undefined) filling.set(tag, (batch = []));
    for (const key of slotKeys) batch.push([key, member]);
    if (batch.length >= RENEW_BATCH) {
      batches.push(batch);
      filling.delete(tag);
    }
  }
  return [...batches, ...filling.values()];
}
/** Most failed releases kept for a retry (each one's lease lapses within leaseMs anyway). */
const MAX_UNRELEASED = 10_000;

/**
 * The client, its scripts defined; readiness changes reported to options.onReadyChange, problems to
 * options.onProblem. `problem()`: the last problem since the connection was last ready.
 */
function connectRedis(options: RedisStoreOptions): {
  client: RedisConnection;
  scripts: ScriptClient;
  problem: () => RedisProblem | undefined;
} {
  let problem: RedisProblem | undefined;
  const report = (found: RedisProblem) => {
    problem = found;
    options.onProblem?.(found);
  };
  const client = openRedisConnection(options.connection, report);
  // Connection errors surface as failed admissions (the fail mode) and as readiness changes here;
  // refused credentials are told apart from an outage.
  client.on('error', (error: Error) => {
    if (isAuthenticationFailure(error)) report('authentication');
  });
  let wasReady = false;
  client.on('ready', () => {
    problem = undefined;
    wasReady = true;
    options.onReadyChange?.(true);
  });
  client.on('close', () => {
    if (!wasReady) return;
    wasReady = false;
    options.onReadyChange?.(false);
  });
  client.defineCommand('ledgerGatewayAdmit', { lua: ADMIT });
  client.defineCommand('ledgerGatewayRenew', { lua: RENEW });
  client.defineCommand('ledgerGatewayRelease', { lua: RELEASE });
  client.defineCommand('ledgerGatewayRefund', { lua: REFUND });
  return { client, scripts: client as unknown as ScriptClient, problem: () => problem };
}

/** The slots this replica holds in Redis: renewed until released, releases retried, and the stall probe. */
interface Leases {
  /** Lease member -> its slot keys. */
  readonly held: Map<string, readonly string[]>;
  readonly stalled: boolean;
  /** Ready and not stalled: commands may be sent. */
  readonly answering: () => boolean;
  /** A command failed: send nothing more until a PING answers. */
  readonly stall: () => void;
  readonly release: (member: string, keys: readonly string[]) => void;
  close(): Promise<void>;
}

/**
 * A Redis that holds its connection open and answers nothing (frozen, a network black hole) keeps
 * the client "ready" for minutes, and ioredis keeps a timed-out command queued until an answer comes:
 * one per call would pile up without limit. After a failed command the store counts as stalled:
 * admissions fail at once (the fail mode applies), nothing else is sent, and one PING at a time asks
 * whether Redis answers again; `onAnswering` runs when it does.
 */
function watchStalls(client: RedisConnection, commandTimeoutMs: number, onAnswering: () => void) {
  let stalled = false;
  let closed = false;
  let probeTimer: NodeJS.Timeout | undefined;
  const probeLater = () => {
    probeTimer = setTimeout(probe, commandTimeoutMs).unref();
  };
  function probe(): void {
    probeTimer = undefined;
    if (!stalled || closed) return;
    // reconnecting: ioredis's own retries bring it back (ready), then probe again
    if (!redisReady(client)) return probeLater();
    pingRedis(client).then(() => {
      stalled = false;
      onAnswering();
    }, probeLater);
  }
  return {
    get stalled() {
      return stalled;
    },
    answering: () => redisReady(client) && !stalled,
    stall: (): void => {
      if (stalled || closed) return;
      stalled = true;
      probeLater();
    },
    close(): void {
      closed = true;
      if (probeTimer !== undefined) clearTimeout(probeTimer);
      stalled = false;
    },
  };
}

function keepLeases(client: RedisConnection, scripts: ScriptClient, options: RedisStoreOptions): Leases {
  const leaseMs = String(options.leaseMs);
  const held = new Map<string, readonly string[]>();
  /** Releases that failed while Redis was away: retried until the lease lapsed anyway (bounded). */
  const unreleased = new Map<string, { keys: readonly string[]; until: number }>();
  const isReady = () => redisReady(client);
  const clustered = redisMode(options.connection) === 'cluster';

  const stalls = watchStalls(client, options.commandTimeoutMs, () => {
    for (const [member, { keys, until }] of [...unreleased]) sendRelease(member, keys, until);
    if (held.size > 0) renewSoon(); // the leases may be missing on a new master
  });
  const { stall, answering } = stalls;

  const keepUnreleased = (member: string, keys: readonly string[], until: number) => {
    if (until <= Date.now()) return; // the lease has lapsed: nothing left to release
    unreleased.set(member, { keys, until });
    // Oldest first out: each entry's lease lapses within leaseMs anyway.
    if (unreleased.size > MAX_UNRELEASED) unreleased.delete(unreleased.keys().next().value!);
  };
  const sendRelease = (member: string, keys: readonly string[], until = Date.now() + options.leaseMs) => {
    unreleased.delete(member);
    if (!answering()) {
      keepUnreleased(member, keys, until);
      return;
    }
    scripts.ledgerGatewayRelease(keys.length, ...keys, member).catch(() => {
      stall();
      keepUnreleased(member, keys, until); // the lease's own end, not a new one
    });
  };

  async function renew(): Promise<void> {
    if (!answering()) return;
    const now = Date.now();
    for (const [member, { keys, until }] of [...unreleased]) {
      if (until < now) unreleased.delete(member);
      else sendRelease(member, keys, until);
    }
    for (const batch of renewalBatches(held, clustered)) {
      // A lease released while an earlier batch was on its way must not be renewed (written again).
      const pairs = batch.filter(([, member]) => held.has(member));
      if (pairs.length === 0) continue;
      if (!answering()) throw new StoreUnavailableError('Redis stopped answering during the renewal');
      try {
        await scripts.ledgerGatewayRenew(
          pairs.length,
          ...pairs.map(([key]) => key),
          leaseMs,
          ...pairs.map(([, m]) => m),
        );
      } catch (error) {
        stall();
        throw error;
      }
    }
  }
  const renewal = setInterval(
    () => {
      renew().catch(() => {
        /* the next renewal retries; leases outlive two missed ones */
      });
    },
    Math.floor(options.leaseMs / 3),
  );
  renewal.unref();
  const renewSoon = () =>
    setImmediate(() => {
      renew().catch(() => {});
    });
  // A new master (after a failover) may lack this replica's leases: re-establish them now.
  client.on('ready', () => {
    if (held.size > 0) renewSoon();
  });

  return {
    held,
    get stalled() {
      return stalls.stalled;
    },
    answering,
    stall,
    release: (member, keys) => sendRelease(member, keys),
    async close() {
      clearInterval(renewal);
      stalls.close();
      // Best effort, bounded by commandTimeoutMs: free what is still held so other replicas need not wait for the leases.
      if (isReady() && held.size > 0) {
        await Promise.allSettled(
          [...held].map(([member, keys]) => scripts.ledgerGatewayRelease(keys.length, ...keys, member)),
        );
      }
      held.clear();
      unreleased.clear();
    },
  };
}

export function createRedisStore(options: RedisStoreOptions): RedisStore {
  const { client, scripts, problem } = connectRedis(options);
  const leases = keepLeases(client, scripts, options);
  const { held, stall, answering } = leases;
  const sendRelease = leases.release;
  const prefix = options.keyPrefix;
  const leaseMs = String(options.leaseMs);
  const instance = randomUUID();
  let sequence = 0;

  return {
    async admit({ operation, caller, limits }: AdmissionQuery): Promise<StoreVerdict> {
      if (!redisReady(client)) {
        const standing = problem();
        throw new StoreUnavailableError(standing === undefined ? `Redis is ${client.status}` : PROBLEM_TEXT[standing]);
      }
      if (leases.stalled) throw new StoreUnavailableError('Redis has not answered since a command failed (probing)');
      const perPrincipal = limits.maxInFlightPerPrincipal ?? 0;
      const perOperation = limits.maxInFlight ?? 0;
      const { rate: rateKey, callerSlots, operationSlots } = limitKeys(prefix, operation, caller, perOperation > 0);
      const member = `${instance}:${(sequence += 1)}`;
      const slotKeys = [...(perPrincipal > 0 ? [callerSlots] : []), ...(perOperation > 0 ? [operationSlots] : [])];
      let answer: unknown;
      try {
        answer = await scripts.ledgerGatewayAdmit(
          perOperation > 0 ? 3 : perPrincipal > 0 ? 2 : 1,
          rateKey,
          ...(perOperation > 0 ? [callerSlots, operationSlots] : perPrincipal > 0 ? [callerSlots] : []),
          String(limits.rate?.intervalMs ?? 0),
          String(limits.rate?.burst ?? 0),
          leaseMs,
          member,
          String(perPrincipal),
          String(perOperation),
        );
      } catch (error) {
        stall();
        // A timed-out script may still run later and take slots for a call not admitted through them:
        // its lease is removed once Redis answers again (or lapses).
        if (slotKeys.length > 0) sendRelease(member, slotKeys);
        throw new StoreUnavailableError(`Redis did not answer: ${(error as Error).message}`, { cause: error });
      }
      const [code, retryAfterMs] = answer as [number, number];
      const refusal = REFUSALS[code];
      if (refusal !== undefined) {
        return {
          admitted: false,
          limit: refusal,
          retryAfterMs: refusal === 'rate' ? retryAfterMs : CONCURRENCY_RETRY_AFTER_MS,
        };
      }
      if (slotKeys.length === 0) return { admitted: true, lease: NO_LEASE };
      held.set(member, slotKeys);
      return {
        admitted: true,
        lease: {
          release() {
            if (held.delete(member)) sendRelease(member, slotKeys);
          },
        },
      };
    },
    refund({ operation, caller, limits }: AdmissionQuery): void {
      if (limits.rate === undefined || !answering()) return;
      const { rate: rateKey } = limitKeys(prefix, operation, caller, (limits.maxInFlight ?? 0) > 0);
      scripts.ledgerGatewayRefund(1, rateKey, String(limits.rate.intervalMs)).catch(stall);
    },
    ready: answering, // 0 on ledger_gateway_protection_store_up while stalled too
    async close() {
      await leases.close();
      client.disconnect();
    },
    get heldLeases() {
      return held.size;
    },
  };
}
