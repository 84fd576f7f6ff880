// The red-team drivers of issue 40, by name: the soak (scripts/soak-hostile.ts) runs each in turn and
// the adversarial tests run them one at a time. Each takes its options (the gateway's `api` URL,
// `tokens` when it needs a caller's, its own knobs) and an AbortSignal, runs until the signal aborts,
// and resolves with what it sent and was answered. A new driver is one entry here.
import { auditVolume } from './audit-volume.mjs';
import { bodyBombs } from './body-bombs.mjs';
import { budgetReservations } from './budget-reservations.mjs';
import { largeSubmissions } from './large-submissions.mjs';
import { pipelinedFlood } from './pipelined-flood.mjs';

export const DRIVERS = {
  P1: { what: 'bare GETs without a token, pipelined on one connection', run: pipelinedFlood },
  P2: {
    what: 'worst-shape bodies at 1 MiB (the largest parsed on the event loop) on update-by-offset, 8 at a time',
    run: bodyBombs,
  },
  B1: {
    what: '4 token holders x 8 connections declaring 1 MiB bodies and sending none',
    run: (options, signal) => budgetReservations({ connectionsPerCaller: 8, ...options }, signal),
  },
  L1: {
    what: 'token holders each sending one submission at the participant limit (8 MiB) at once, retrying after Retry-After',
    run: largeSubmissions,
  },
  A1: { what: 'audited writes with long 0xFF strings in their identifying fields, 8 at a time', run: auditVolume },
};
