// A body held in memory for one exchange: counted against the process's body budget under its caller
// (exchange/caller.ts), and given back when the exchange's lifeline closes (answered, refused, or its
// client gone). The policy stage, the audit trail and the forwarder each hold the bodies they read.
import type { BodyBudget, BodyHold } from '../body/budget.js';
import { callerOf } from './caller.js';
import type { Exchange } from './exchange.js';
import { onResponseClose } from './response-close.js';

/** `caller` when the holder knows it already (callerOf). */
export function holdBody(
  budget: BodyBudget,
  exchange: Pick<Exchange, 'principal' | 'raw' | 'lifeline'>,
  isTrustedProxy: (address: string) => boolean,
  caller = callerOf(exchange.principal, exchange.raw, isTrustedProxy),
): BodyHold {
  const hold = budget.hold(caller);
  onResponseClose(exchange.lifeline, hold.release);
  return hold;
}
