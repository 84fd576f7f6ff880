// One call to the participant, from its wait for a connection to its end, as a state machine: one
// state field, moved only along the transitions below. Calls (forwarded-call.ts), the version fetch
// (fetch-whole.ts) and WebSocket upgrades (upgrade-call.ts) share it, and with it the two rules
// that must read the same everywhere: a call refused before a byte of it was written may move once
// to the next replica that answers; an error answer's first bytes give its error code.
import { ERROR_BODY_CAPTURE_BYTES, upstreamErrorCode } from '../exchange/upstream-error-code.js';
import { CONNECT_FAILURES, type Replica, type UpstreamReplicas } from './upstream-replicas.js';

/**
 * - queued: not on any transport: waiting for a connection slot, or for the next replica after a refusal
 * - connecting: handed to the transport, not yet on a socket: nothing of it was written
 * - writing: on a socket: bytes of it may have reached the participant (never sent to another replica)
 * - waiting: written whole, waiting for the answer's head
 * - streaming: the answer is passing on to the client
 * - done: ended, answered whole or with nobody left to answer
 * - failed: ended without a whole answer (the gateway's coded error, or an answer broken off)
 */
export type CallState = 'queued' | 'connecting' | 'writing' | 'waiting' | 'streaming' | 'done' | 'failed';

const TRANSITIONS: Readonly<Record<CallState, readonly CallState[]>> = {
  // started (a slot or the next replica) | its client left | deadline, no replica, a failed upload
  queued: ['connecting', 'done', 'failed'],
  // on a socket | refused: waits for the next replica | sent again on a fresh connection | ended
  connecting: ['writing', 'queued', 'connecting', 'done', 'failed'],
  // written whole | answered early (before the body was all sent) | the connection was lost: sent again | ended
  writing: ['waiting', 'streaming', 'connecting', 'done', 'failed'],
  waiting: ['streaming', 'connecting', 'done', 'failed'],
  streaming: ['done', 'failed'],
  done: [],
  failed: [],
};

export class IllegalTransition extends Error {
  constructor(
    readonly from: CallState,
    readonly to: CallState,
  ) {
    super(`an upstream call cannot go from ${from} to ${to}`);
  }
}

export class UpstreamCall {
  state: CallState = 'queued';
  /** Where it is sent: the active replica when it started, the next one after a failover. */
  replica: Replica;
  private failedOver = false;

  /** `deadline`: performance.now() time that bounds the call, a wait for the next replica included. */
  constructor(
    protected readonly replicas: UpstreamReplicas,
    readonly deadline: number,
  ) {
    this.replica = replicas.target;
  }

  get ended(): boolean {
    return this.state === 'done' || this.state === 'failed';
  }

  /** Refused before it was written, and waiting for the next replica (in no pool meanwhile). */
  get awaitingReplica(): boolean {
    return this.state === 'queued' && this.failedOver;
  }

  /** Moves to `next`; an illegal move throws, and leaves the state as it was. */
  to(next: CallState): void {
    if (!TRANSITIONS[this.state].includes(next)) throw new IllegalTransition(this.state, next);
    this.state = next;
  }

  /**
   * A call refused (or cut) while `connecting`, before any byte of it was written: with replicas,
   * it waits for the next replica that answers, within its deadline, and is sent there once; a
   * call that was written is never sent again (it may have reached the participant). Returns
   * undefined when it may not move (the caller fails it), else the next replica (undefined: none
   * answered in time); the call is `queued` meanwhile, and `connecting` again on the next replica.
   */
  failOver(code: string): Promise<Replica | undefined> | undefined {
    if (!this.replicas.failover || this.failedOver || this.state !== 'connecting' || !CONNECT_FAILURES.has(code))
      return undefined;
    this.failedOver = true;
    this.to('queued');
    return this.replicas.failedToConnect(this.replica, code, this.deadline);
  }

  /** Sends a call that failed over to `next` (unless it ended while it waited). */
  moveTo(next: Replica): void {
    this.replica = next;
    this.to('connecting');
  }
}

/** The first bytes of an error answer (4xx/5xx), for its error code; the answer itself passes on unchanged. */
export class ErrorBodyCapture {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  private seen = 0;

  constructor(private readonly contentType: string | undefined) {}

  /** The capture of an answer with this status and content type, or undefined when it is no error. */
  static of(status: number, contentType: unknown): ErrorBodyCapture | undefined {
    return status >= 400 ? new ErrorBodyCapture(typeof contentType === 'string' ? contentType : undefined) : undefined;
  }

  keep(chunk: Buffer): void {
    this.seen += chunk.length;
    const room = ERROR_BODY_CAPTURE_BYTES - this.kept;
    if (room <= 0) return;
    const part = chunk.length <= room ? chunk : chunk.subarray(0, room);
    this.chunks.push(part);
    this.kept += part.length;
  }

  /** The answer's error code (src/exchange/upstream-error-code.ts). */
  code(): string {
    return upstreamErrorCode(this.contentType, Buffer.concat(this.chunks, this.kept), this.seen > this.kept);
  }
}
