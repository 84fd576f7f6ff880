// A narrow hook on a call's parsed JSON body: a stage that must read fields of it (the audit
// trail's identifying fields of a write) sets an observer on the exchange, and the stage that
// parses the body (the request rules) hands it the object once, right after parsing and before
// judging it, so that a write its rules refuse is still recorded with what it tried. The observer
// reads what it needs at once and keeps no reference to the body.
export type ParsedBodyObserver = (body: Record<string, unknown>) => void;

const kObserver = Symbol('ledger-gateway.parsedBodyObserver');

type Observed = { [kObserver]?: ParsedBodyObserver };

export function observeParsedBody(exchange: object, observer: ParsedBodyObserver): void {
  (exchange as Observed)[kObserver] = observer;
}

/** Hands the parsed body to the exchange's observer, if a stage set one. */
export function parsedBody(exchange: object, body: Record<string, unknown>): void {
  (exchange as Observed)[kObserver]?.(body);
}
