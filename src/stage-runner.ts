// Runs a list of request stages as one Fastify hook. A stage answers synchronously (undefined: go
// on; a throw: refuse) or with a promise when it has to wait (a token not yet verified, a shared
// limit store, a body to read). Most calls wait on nothing, so a whole list usually runs in one
// synchronous pass: no promise, no microtask, no closure, one hook instead of one per stage.
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';

export type Stage = (request: FastifyRequest, reply: FastifyReply) => void | Promise<void>;

/**
 * Runs `stages` from `from` on; undefined when all of them answered synchronously, else a promise
 * that settles once the rest have run. A stage's throw (or rejection) refuses the call.
 */
export function runStages(stages: readonly Stage[], request: FastifyRequest, reply: FastifyReply, from = 0): Promise<void> | undefined {
  for (let index = from; index < stages.length; index++) {
    const pending = stages[index]!(request, reply);
    if (pending !== undefined) return pending.then(() => runStages(stages, request, reply, index + 1));
  }
  return undefined;
}

/** One callback-style hook (onRequest) that runs `stages` in order. */
export function stageHook(stages: readonly Stage[]) {
  return function runStageHook(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    let pending: Promise<void> | undefined;
    try {
      pending = runStages(stages, request, reply);
    } catch (error) {
      done(error as Error);
      return;
    }
    if (pending === undefined) done();
    else pending.then(() => done(), (error: unknown) => done(error as Error));
  };
}
