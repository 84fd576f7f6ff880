// Every request body the gateway holds in memory whole (a rule-checked body read for the policy
// stage, a small body read before its call takes an upstream connection) counts against one budget of
// bytes for the process, and its caller's bytes against a share of it, as a caller's slots do (Envoy's
// overload manager bounds buffers the same way). Without it, unfinished bodies on many connections add
// up past the pod's memory limit: none of them is over any per-body limit.
import { closingConnection, Errors, GatewayError } from '../errors.js';
import { eventLoopGarbage } from './collect.js';

/** A held body this large, once its exchange lets it go, counts toward the event loop's bound (body/collect.ts). */
const LET_GO_BYTES = 1024 * 1024;

export interface BodyBudgetLimits {
  /** limits.bufferedBodyBytes: bytes of bodies held in memory, all callers together (0: no budget). */
  readonly bufferedBodyBytes: number;
  /** limits.bufferedBodyShare: the share of it one caller may hold. */
  readonly bufferedBodyShare: number;
}

/** The bytes one body holds against the budget; given back once, when its exchange ends. */
export interface BodyHold {
  /**
   * The refusal of a body that declares more than the budget or the caller's share has free now,
   * before a byte of it is read: nothing is reserved (declared lengths, once reserved, filled the
   * budget with no body), but bodies that cannot fit are not started, so partial bodies cannot crowd
   * out each other's ends.
   */
  readonly admits: (declaredBytes: number) => GatewayError | undefined;
  /** Counts `bytes` more; the refusal (the connection closing) when the budget or the share would pass. */
  readonly take: (bytes: number) => GatewayError | undefined;
  /**
   * Counts `bytes` more of what reading the body holds beside its bytes (a tokenizer's long string),
   * against the process's budget only: a caller's share bounds its bodies, and a body at the
   * participant's limit fills it alone.
   */
  readonly takeBeside: (bytes: number) => GatewayError | undefined;
  /** Gives back `bytes` taken beside once what they counted is gone (a worker's tree, judged), before the exchange ends. */
  readonly giveBackBeside: (bytes: number) => void;
  /** Gives back everything taken (idempotent; a function of its own, to be passed as a listener). */
  readonly release: () => void;
}

const RETRY_AFTER = { 'retry-after': '1' };

function exhausted(bytes: number, limits: BodyBudgetLimits): GatewayError {
  return closingConnection(
    new GatewayError(
      Errors.GATEWAY_BODY_BUFFER_EXHAUSTED,
      {
        cause: 'The gateway holds as many request bodies in memory as it may. Retry after 1 s.',
        context: { limit: 'limits.bufferedBodyBytes' },
      },
      { headers: RETRY_AFTER, reason: `body buffer full: ${bytes} more bytes over ${limits.bufferedBodyBytes}` },
    ),
  );
}

function shareExhausted(bytes: number, perCaller: number): GatewayError {
  return closingConnection(
    new GatewayError(
      Errors.GATEWAY_RESOURCE_EXHAUSTED,
      {
        cause: "This caller already holds its share of the gateway's buffered request bodies. Retry after 1 s.",
        context: { limit: 'gatewayPrincipalBodyBytes' },
      },
      { headers: RETRY_AFTER, reason: `body buffer share: ${bytes} more bytes over ${perCaller}` },
    ),
  );
}

const NO_HOLD: BodyHold = Object.freeze({
  admits: () => undefined,
  take: () => undefined,
  takeBeside: () => undefined,
  giveBackBeside: () => undefined,
  release: () => undefined,
});

/** What the holds of one budget count together: bytes held, all callers together and by caller. */
interface Held {
  bytes: number;
  readonly byCaller: Map<string, number>;
}

export class BodyBudget {
  private readonly held: Held = { bytes: 0, byCaller: new Map() };
  /** The most bytes one caller may hold (at least one body of `perCaller` bytes). */
  readonly perCaller: number;

  constructor(private readonly limits: BodyBudgetLimits) {
    const { bufferedBodyBytes, bufferedBodyShare } = limits;
    this.perCaller = Math.max(1, Math.floor(bufferedBodyBytes * Math.min(1, bufferedBodyShare)));
  }

  /** Bytes held now, all callers together. */
  get heldBytes(): number {
    return this.held.bytes;
  }

  /** Bytes `caller` holds now. */
  heldBy(caller: string): number {
    return this.held.byCaller.get(caller) ?? 0;
  }

  /** A hold for one body of `caller` (its principal, or its client address: exchange/caller.ts). */
  hold(caller: string): BodyHold {
    return this.limits.bufferedBodyBytes === 0
      ? NO_HOLD
      : new CallerHold(this.held, caller, this.limits, this.perCaller);
  }
}

/**
 * One body's hold: one object per body, whose two functions handed on as callbacks (takeBeside to a
 * tokenizer, release as a close listener) are bound once; the rest are methods.
 */
class CallerHold implements BodyHold {
  private bytes = 0;
  private besideBytes = 0;

  constructor(
    private readonly all: Held,
    private readonly caller: string,
    private readonly limits: BodyBudgetLimits,
    private readonly perCaller: number,
  ) {}

  // The budget first: a body the whole process has no room for is no caller's excess.
  admits(declaredBytes: number): GatewayError | undefined {
    if (this.all.bytes + declaredBytes > this.limits.bufferedBodyBytes) return exhausted(declaredBytes, this.limits);
    if ((this.all.byCaller.get(this.caller) ?? 0) + declaredBytes > this.perCaller)
      return shareExhausted(declaredBytes, this.perCaller);
    return undefined;
  }

  readonly takeBeside = (bytes: number): GatewayError | undefined => {
    if (this.all.bytes + bytes > this.limits.bufferedBodyBytes) return exhausted(bytes, this.limits);
    this.all.bytes += bytes;
    this.besideBytes += bytes;
    return undefined;
  };

  giveBackBeside(bytes: number): void {
    const back = Math.min(bytes, this.besideBytes);
    this.all.bytes -= back;
    this.besideBytes -= back;
  }

  take(bytes: number): GatewayError | undefined {
    const callerHeld = this.all.byCaller.get(this.caller) ?? 0;
    if (callerHeld + bytes > this.perCaller) return shareExhausted(bytes, this.perCaller);
    if (this.all.bytes + bytes > this.limits.bufferedBodyBytes) return exhausted(bytes, this.limits);
    this.all.bytes += bytes;
    this.all.byCaller.set(this.caller, callerHeld + bytes);
    this.bytes += bytes;
    return undefined;
  }

  readonly release = (): void => {
    this.all.bytes -= this.besideBytes;
    this.besideBytes = 0;
    if (this.bytes === 0) return;
    this.all.bytes -= this.bytes;
    const left = (this.all.byCaller.get(this.caller) ?? 0) - this.bytes;
    if (left <= 0) this.all.byCaller.delete(this.caller);
    else this.all.byCaller.set(this.caller, left);
    if (this.bytes >= LET_GO_BYTES) setImmediate(eventLoopGarbage().letGo, this.bytes);
    this.bytes = 0;
  };
}
