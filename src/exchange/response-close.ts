// What an exchange's stages do when its lifeline closes (a call's response: sent, or its client
// gone; an upgrade's socket): the telemetry stage counts a client that left, protection releases its
// slot, the forwarder cancels the upstream call. One 'close' listener per lifeline runs them in the
// order they were added: three once() listeners would each cost a wrapper and an array of listeners.
import type { Lifeline } from './exchange.js';

const kCloseListeners = Symbol('ledger-gateway.closeListeners');

type WithCloseListeners = Lifeline & { [kCloseListeners]?: (() => void)[] };

function runCloseListeners(this: WithCloseListeners): void {
  const listeners = this[kCloseListeners];
  if (listeners === undefined) return;
  this[kCloseListeners] = undefined;
  for (const listener of listeners) listener();
}

/** Runs `listener` once the response (or socket) closes; at once when it already has (Node marks it destroyed then). */
export function onResponseClose(response: Lifeline, listener: () => void): void {
  const target = response as WithCloseListeners;
  if (target.destroyed) {
    listener();
    return;
  }
  const listeners = target[kCloseListeners];
  if (listeners === undefined) {
    target[kCloseListeners] = [listener];
    target.on('close', runCloseListeners); // a response closes once: no once() wrapper to make and remove
  } else {
    listeners.push(listener);
  }
}
