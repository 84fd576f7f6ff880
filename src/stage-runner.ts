// Runs the stage list over an exchange: a call's as one Fastify hook, an upgrade's before its tunnel
// opens. A stage answers synchronously or with a promise when it has to wait (exchange.ts); most
// calls wait on nothing, so a whole list usually runs in one synchronous pass: no promise, no
// microtask, no closure, one hook instead of one per stage.
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { Exchange, Stage } from './exchange.js';

/**
 * Runs `stages` from `from` on; undefined when all of them answered synchronously, else a promise
 * that settles once the rest have run. A stage's throw (or rejection) refuses the exchange.
 */
export function runStages(stages: readonly Stage[], exchange: Exchange, from = 0): Promise<void> | undefined {
  for (let index = from; index < stages.length; index++) {
    const pending = stages[index]!(exchange);
    if (pending !== undefined) return pending.then(() => runStages(stages, exchange, index + 1));
  }
  return undefined;
}

/** One callback-style hook (onRequest) that runs `stages` over a call; the request is the call's exchange. */
export function stageHook(stages: readonly Stage[]) {
  return function runStageHook(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    request.lifeline = reply.raw;
    let pending: Promise<void> | undefined;
    try {
      pending = runStages(stages, request);
    } catch (error) {
      done(error as Error);
      return;
    }
    if (pending === undefined) done();
    else
      pending.then(
        () => done(),
        (error: unknown) => done(error as Error),
      );
  };
}

/** Runs `stages` over an upgrade: settles once all have admitted it, rejects with the first refusal. */
export async function admitUpgrade(stages: readonly Stage[], exchange: Exchange): Promise<void> {
  await runStages(stages, exchange);
}
