// The participant's replicas and which one is active. A Canton participant run for high availability
// is a set of replicas over one database: the active replica serves the Ledger API, the passive ones
// shut their Ledger API server down (their port refuses connections) until one of them takes over
// (Canton docs, "Active-Passive Participant Node Configuration"). Each replica gets its own pool and
// its own probe (GET /v2/version); calls go to the active replica. A single upstream.url is a set of
// one, probed as before, whose failures are never waited out.
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import type { UpstreamConfig } from '../config/schema.js';
import { upstreamPoolOptions } from './upstream-pool.js';
import {
  createUpstreamProbe,
  type OwnCallFailure,
  type OwnAnswer,
  type OwnRequest,
  type UpstreamProbe,
} from './upstream-probe.js';

/**
 * Failures of a connection that was never opened (or cut while opening): the call was not written,
 * and the replica does not answer. Seen only from undici before a call started on a socket.
 */
export const CONNECT_FAILURES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

export interface Replica {
  /** Its place in upstream.replicas (0 for upstream.url). */
  readonly index: number;
  /** Its configured name, else its index: the metric label and the name in the log. */
  readonly label: string;
  /** Its base URL (no user information: checked at start). */
  readonly url: URL;
  /** The base URL's path without a trailing slash, prefixed to every call's target. */
  readonly basePath: string;
  readonly pool: Pool;
}

interface ReplicaState extends Replica {
  readonly probe: UpstreamProbe;
  up: boolean;
  /** performance.now() when it last began to answer. */
  upSince: number;
  /** Bumped when a call finds it down: a probe started before then is stale. */
  generation: number;
  probing: Promise<void> | undefined;
  /** Why its last probe failed (refused, timeout, status 503, ...); undefined while it answers. */
  cause: string | undefined;
}

interface ReplicaWaiter {
  readonly resolve: (replica: Replica | undefined) => void;
  readonly timer: NodeJS.Timeout;
}

export interface ReplicaLog {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
}

export class UpstreamReplicas {
  /**
   * Where a call goes now: the active replica; with none answering, the one active last (or the
   * first), where a call fails as it would without replicas. A plain field: read once per call.
   */
  target: Replica;
  /**
   * Configured as upstream.replicas: a call refused before it was written waits for the next
   * replica that answers. False for upstream.url, whose calls fail at once, as they always have.
   */
  readonly failover: boolean;
  private readonly replicas: ReplicaState[];
  private active: ReplicaState | undefined;
  private targetWasActive = false;
  private failoverCount = 0;
  private readonly probeTimeoutMs: number;
  private readonly timer: NodeJS.Timeout;
  private readonly waiters = new Set<ReplicaWaiter>();
  private readonly leaveListeners: Array<(replica: Replica) => void> = [];
  private closed = false;

  /** `upstreamUrl`: the resolved upstream.url, used when upstream.replicas is not set. */
  constructor(
    upstream: UpstreamConfig,
    upstreamUrl: string,
    private readonly log?: ReplicaLog,
  ) {
    const poolOptions = upstreamPoolOptions(upstream);
    const entries = upstream.replicas ?? [upstreamUrl];
    this.replicas = entries.map((entry, index) => {
      const { url, name } = typeof entry === 'string' ? { url: entry, name: undefined } : entry;
      const base = new URL(url);
      const basePath = base.pathname.replace(/\/+$/, '');
      return {
        index,
        label: name ?? String(index),
        url: base,
        basePath,
        pool: new Pool(base.origin, poolOptions),
        probe: createUpstreamProbe(base.origin, basePath, poolOptions),
        up: false,
        upSince: 0,
        generation: 0,
        probing: undefined,
        cause: undefined,
      };
    });
    this.failover = upstream.replicas !== undefined;
    this.target = this.replicas[0]!;
    this.probeTimeoutMs = Math.min(2_000, upstream.readinessIntervalMs);
    this.timer = setInterval(() => void this.probeNow(), upstream.readinessIntervalMs);
    this.timer.unref();
  }

  /** Every replica, in the order configured. */
  get all(): readonly Replica[] {
    return this.replicas;
  }

  /** Ready while a replica answers. */
  ready(): boolean {
    return this.active !== undefined;
  }

  /** Why no replica is active: each replica's last probe failure; undefined while one is. */
  cause(): string | undefined {
    if (this.active !== undefined) return undefined;
    const causes = this.replicas.map((replica) => replica.cause ?? 'not probed yet');
    return this.replicas.length === 1 ? causes[0] : this.replicas.map((r, i) => `${r.label}: ${causes[i]}`).join('; ');
  }

  /** Probes every replica now (a replica's probe already under way is joined); settles once all have answered. */
  probeNow(): Promise<void> {
    return Promise.all(this.replicas.map((replica) => this.probe(replica))).then(() => undefined);
  }

  /** Each replica's label and whether it answers, for the replica_up gauge. */
  states(): Array<{ label: string; up: boolean }> {
    return this.replicas.map((replica) => ({ label: replica.label, up: replica.up }));
  }

  /** How many times calls moved from a replica that had been active to another. */
  get failovers(): number {
    return this.failoverCount;
  }

  /** Called with the replica calls left, each time they move to another (its WebSocket streams are closed). */
  onLeave(listener: (replica: Replica) => void): void {
    this.leaveListeners.push(listener);
  }

  /**
   * A call to `failed` could not connect (nothing of it was written): the replica is taken as down
   * and every replica probed at once. Resolves with the replica to send the call to: the active one
   * now, or the next that answers before `deadline` (performance.now() time); undefined after it.
   */
  failedToConnect(failed: Replica, code: string, deadline: number): Promise<Replica | undefined> {
    const state = failed as ReplicaState;
    if (state.up) {
      state.up = false;
      state.generation++;
      if (this.active === state)
        this.activate(this.newestAnswering(), `a call could not connect to replica ${state.label} (${code})`);
      void this.probeNow();
    }
    if (this.active !== undefined || this.closed) return Promise.resolve(this.active);
    return new Promise((resolve) => {
      const waiter: ReplicaWaiter = {
        resolve,
        timer: setTimeout(
          () => {
            this.waiters.delete(waiter);
            resolve(undefined);
          },
          Math.max(0, deadline - performance.now()),
        ),
      };
      this.waiters.add(waiter);
    });
  }

  /**
   * A GET of the gateway's own (the identity provider listing) to where calls go now, on that replica's
   * probe connections with upstream.tls: never a connection or a slot of the clients'. Refused before it
   * was written, it moves to the next replica that answers, as a client's GET does, within its time bound.
   */
  async ownGet(request: OwnRequest): Promise<OwnAnswer> {
    const deadline = performance.now() + request.timeoutMs;
    const replica = this.target as ReplicaState;
    try {
      return await replica.probe.get(request);
    } catch (error) {
      const code = (error as OwnCallFailure).code;
      if (!this.failover || code === undefined || !CONNECT_FAILURES.has(code)) throw error;
      const next = (await this.failedToConnect(replica, code, deadline)) as ReplicaState | undefined;
      if (next === undefined) throw error;
      const timeoutMs = Math.max(1, Math.ceil(deadline - performance.now()));
      return next.probe.get({ ...request, timeoutMs });
    }
  }

  /** Stops probing; calls waiting for a replica get none; every pool is destroyed (calls in flight are aborted). */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    this.wake(undefined);
    await Promise.all(this.replicas.flatMap((replica) => [replica.pool.destroy(), replica.probe.close()]));
  }

  private probe(replica: ReplicaState): Promise<void> {
    if (replica.probing !== undefined) return replica.probing;
    const generation = replica.generation;
    replica.probing = replica.probe.probe(this.probeTimeoutMs).then((outcome) => {
      replica.probing = undefined;
      if (this.closed) return undefined;
      // A call found it down while this probe ran: the answer may predate that, so it is asked again.
      if (generation !== replica.generation) return this.probe(replica);
      replica.cause = outcome.answers ? undefined : outcome.cause;
      this.record(replica, outcome.answers);
      return undefined;
    });
    return replica.probing;
  }

  private record(replica: ReplicaState, answers: boolean): void {
    if (answers) {
      if (!replica.up) {
        replica.up = true;
        replica.upSince = performance.now();
      }
      // Several may answer for a moment while one takes over: the active one stays until it fails.
      if (this.active === undefined) this.activate(replica, `replica ${replica.label} answered the probe`);
      return;
    }
    replica.up = false;
    if (this.active === replica) {
      const cause = `replica ${replica.label} did not answer the probe (refused, timed out or 5xx)`;
      this.activate(this.newestAnswering(), cause);
    }
  }

  /** Of the replicas that answer, the one that began to answer last: after a failover, the new active one. */
  private newestAnswering(): ReplicaState | undefined {
    let newest: ReplicaState | undefined;
    for (const replica of this.replicas)
      if (replica.up && (newest === undefined || replica.upSince > newest.upSince)) newest = replica;
    return newest;
  }

  private activate(next: ReplicaState | undefined, cause: string): void {
    const previous = this.active;
    if (next === previous) return;
    this.active = next;
    if (this.failover) {
      const fields = { activeReplica: next?.label ?? null, previousReplica: previous?.label ?? null, cause };
      if (next === undefined) this.log?.warn(fields, 'no upstream replica answers');
      else this.log?.info(fields, 'active upstream replica changed');
    }
    if (next === undefined) return;
    const left = this.target;
    if (next !== left) {
      if (this.targetWasActive) this.failoverCount++;
      this.target = next;
      for (const listener of this.leaveListeners) listener(left);
    }
    this.targetWasActive = true;
    this.wake(next);
  }

  private wake(replica: Replica | undefined): void {
    for (const waiter of this.waiters) {
      clearTimeout(waiter.timer);
      waiter.resolve(replica);
    }
    this.waiters.clear();
  }
}
