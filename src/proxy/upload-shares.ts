// A streamed upload holds an upstream connection for as long as its client takes to send it: each
// caller's streamed uploads may hold at most a share of the pool (upstream.uploadShare), so that one
// caller's slow uploads cannot take every connection from the others.
import { Errors, GatewayError } from '../errors.js';

/** The most streamed uploads one caller may have under way, for a pool of `connections`. */
export function uploadsPerCaller(connections: number, share: number): number {
  return Math.max(1, Math.floor(connections * share));
}

export class UploadShares {
  private readonly held = new Map<string, number>();

  constructor(readonly perCaller: number) {}

  /** Counts one more streamed upload against `caller`, unless it has its share under way already. */
  tryHold(caller: string): boolean {
    const count = this.held.get(caller) ?? 0;
    if (count >= this.perCaller) return false;
    this.held.set(caller, count + 1);
    return true;
  }

  release(caller: string): void {
    const count = this.held.get(caller) ?? 0;
    if (count <= 1) this.held.delete(caller);
    else this.held.set(caller, count - 1);
  }

  /** Streamed uploads under way for `caller`. */
  of(caller: string): number {
    return this.held.get(caller) ?? 0;
  }
}

export function uploadShareExhausted(operation: string, perCaller: number): GatewayError {
  return new GatewayError(
    Errors.GATEWAY_UPLOAD_SHARE_EXHAUSTED,
    {
      cause:
        `This caller already has ${perCaller} uploads streaming to the participant, ` +
        "its share of the gateway's upstream connections. Retry after 1 s.",
      context: { operation, limit: 'upstream.uploadShare' },
    },
    { headers: { 'retry-after': '1' }, reason: `upload share: ${perCaller} streamed uploads under way` },
  );
}
