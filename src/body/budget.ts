// Every request body the gateway holds in memory whole (a rule-checked body read for the policy
// stage, a small body read before its call takes an upstream connection) counts against one budget of
// bytes for the process, and its caller's bytes against a share of it, as a caller's slots do (Envoy's
// overload manager bounds buffers the same way). Without it, unfinished bodies on many connections add
// up past the pod's memory limit: none of them is over any per-body limit.
import { closingConnection, Errors, GatewayError } from '../errors.js';

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
  release: () => undefined,
});

export class BodyBudget {
  private used = 0;
  private readonly byCaller = new Map<string, number>();
  /** The most bytes one caller may hold (at least one body of `perCaller` bytes). */
  readonly perCaller: number;

  constructor(private readonly limits: BodyBudgetLimits) {
    const { bufferedBodyBytes, bufferedBodyShare } = limits;
    this.perCaller = Math.max(1, Math.floor(bufferedBodyBytes * Math.min(1, bufferedBodyShare)));
  }

  /** Bytes held now, all callers together. */
  get heldBytes(): number {
    return this.used;
  }

  /** Bytes `caller` holds now. */
  heldBy(caller: string): number {
    return this.byCaller.get(caller) ?? 0;
  }

  /** A hold for one body of `caller` (its principal, or its client address: exchange/caller.ts). */
  hold(caller: string): BodyHold {
    if (this.limits.bufferedBodyBytes === 0) return NO_HOLD;
    let held = 0;
    let heldBeside = 0;
    return {
      // The budget first: a body the whole process has no room for is no caller's excess.
      admits: (declaredBytes) => {
        if (this.used + declaredBytes > this.limits.bufferedBodyBytes) return exhausted(declaredBytes, this.limits);
        if ((this.byCaller.get(caller) ?? 0) + declaredBytes > this.perCaller)
          return shareExhausted(declaredBytes, this.perCaller);
        return undefined;
      },
      takeBeside: (bytes) => {
        if (this.used + bytes > this.limits.bufferedBodyBytes) return exhausted(bytes, this.limits);
        this.used += bytes;
        heldBeside += bytes;
        return undefined;
      },
      take: (bytes) => {
        const callerHeld = this.byCaller.get(caller) ?? 0;
        if (callerHeld + bytes > this.perCaller) return shareExhausted(bytes, this.perCaller);
        if (this.used + bytes > this.limits.bufferedBodyBytes) return exhausted(bytes, this.limits);
        this.used += bytes;
        this.byCaller.set(caller, callerHeld + bytes);
        held += bytes;
        return undefined;
      },
      release: () => {
        this.used -= heldBeside;
        heldBeside = 0;
        if (held === 0) return;
        this.used -= held;
        const left = (this.byCaller.get(caller) ?? 0) - held;
        if (left <= 0) this.byCaller.delete(caller);
        else this.byCaller.set(caller, left);
        held = 0;
      },
    };
  }
}
