// A narrow hook on a call's answer as the forwarder passes it on: a stage that must read what the
// participant answered (the audit trail's updateId and offset) sets an observer on the exchange,
// and the forwarder hands it the head and each chunk it writes to the client. The observer sees the
// bytes; it never delays or alters them.
import type { IncomingHttpHeaders } from 'node:http';

export interface AnswerObserver {
  /** The call went on a socket to the participant: from here it may have received it (never called for a call refused before). */
  sent?(): void;
  head(status: number, headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>): void;
  data(chunk: Buffer): void;
  /** The answer is complete (not called when it broke off). */
  end(): void;
}

const kObserver = Symbol('ledger-gateway.answerObserver');

type Observed = { [kObserver]?: AnswerObserver };

export function observeAnswer(exchange: object, observer: AnswerObserver): void {
  (exchange as Observed)[kObserver] = observer;
}

/** The call's observer, if a stage set one. */
export function answerObserverOf(exchange: object): AnswerObserver | undefined {
  return (exchange as Observed)[kObserver];
}
