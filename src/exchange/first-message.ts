// The judge of a WebSocket stream's first message, the request Canton reads from the client's first
// frame (GetUpdatesRequest, CompletionStreamRequest, GetActiveContractsRequest: the filter whose
// parties and templates a rule reads). Set on the upgrade's request by a stage (the ledger policy),
// read by the tunnel, which holds the client's bytes until the judge has answered.
import type { IncomingMessage } from 'node:http';
import type { GatewayError } from '../errors.js';

export interface FirstMessageJudge {
  /** Most bytes held before the first message is whole; past it the stream is refused. */
  readonly maxBytes: number;
  /**
   * The held bytes, counted against the process's body budget (body/budget.ts) until the message is
   * judged: `take` answers the refusal when the budget or the caller's share would pass.
   */
  readonly hold: { take(bytes: number): GatewayError | undefined; release(): void };
  /**
   * Judges the first message's payload (null: one that cannot be read, a compressed frame): resolves
   * to let it and the rest of the stream go on, rejects with a GatewayError to refuse the stream.
   */
  judge(message: Buffer | null): void | Promise<void>;
}

const kFirstMessage = Symbol('ledger-gateway.firstMessage');
type Carrying = IncomingMessage & { [kFirstMessage]?: FirstMessageJudge };

/** From now on this upgrade's stream is held until `judge` let its first message go. */
export function judgeFirstMessage(request: IncomingMessage, judge: FirstMessageJudge): void {
  (request as Carrying)[kFirstMessage] = judge;
}

export function firstMessageJudgeOf(request: IncomingMessage): FirstMessageJudge | undefined {
  return (request as Carrying)[kFirstMessage];
}
