// Runs a list of request stages as one Fastify hook. A stage answers synchronously (undefined: go
// on; a throw: refuse) or with a promise when it has to wait (a token not yet verified, a shared
// limit store, a body to read). Most calls wait on nothing, so a whole list usually runs in one
// synchronous pass: no promise, no microtask, one hook instead of one per stage.
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';

export type Stage = (request: FastifyRequest, reply: FastifyReply) => void | Promise<void>;

/** One callback-style hook (onRequest or preHandler) that runs `stages` in order. */
export function stageHook(stages: readonly Stage[]) {
  const count = stages.length;
  return function runStages(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    let index = 0;
    const fail = (error: unknown) => done(error as Error);
    const next = (): void => {
      try {
        while (index < count) {
          const pending = stages[index++]!(request, reply);
          if (pending !== undefined) {
            pending.then(next, fail);
            return;
          }
        }
      } catch (error) {
        fail(error);
        return;
      }
      done();
    };
    next();
  };
}
