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

/** Two stages as one place in the list (a room's check right after another's, e.g. a quota after the limits). */
export function stagesInOrder(first: Stage, second: Stage): Stage {
  return (exchange) => {
    const pending = first(exchange);
    return pending === undefined ? second(exchange) : pending.then(() => second(exchange));
  };
}

/**
 * Before one stage of a call, the gateway may answer the call itself (a CORS preflight, which carries
 * no token, before authentication): `answer` returns true when it did, and the walk ends there.
 */
export interface CallAnswer {
  readonly before: Stage;
  readonly answer: (request: FastifyRequest, reply: FastifyReply) => boolean;
}

/** One callback-style hook (onRequest) that runs `stages` over a call; the request is the call's exchange. */
export function stageHook(stages: readonly Stage[], callAnswer?: CallAnswer) {
  const at = callAnswer === undefined ? -1 : stages.indexOf(callAnswer.before);
  if (callAnswer !== undefined && at < 0) throw new Error('stageHook: the answer comes before a stage not in the list');
  const head = at < 0 ? stages : stages.slice(0, at);
  const tail = at < 0 ? [] : stages.slice(at);
  /** The tail's walk: true when the call was answered before it, else undefined or the promise of the rest. */
  const walkTail = (request: FastifyRequest, reply: FastifyReply): true | Promise<void> | undefined =>
    callAnswer!.answer(request, reply) ? true : runStages(tail, request);

  return function runStageHook(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    request.lifeline = reply.raw;
    let pending: Promise<unknown> | true | undefined;
    try {
      const headDone = runStages(head, request);
      if (at < 0) pending = headDone;
      else if (headDone === undefined) pending = walkTail(request, reply);
      else pending = headDone.then<true | void>(() => walkTail(request, reply));
    } catch (error) {
      done(error as Error);
      return;
    }
    if (pending === true) return; // answered: Fastify is not told to go on
    if (pending === undefined) done();
    else
      pending.then(
        (answered) => {
          if (answered !== true) done();
        },
        (error: unknown) => done(error as Error),
      );
  };
}

/** Runs `stages` over an upgrade: settles once all have admitted it, rejects with the first refusal. */
export async function admitUpgrade(stages: readonly Stage[], exchange: Exchange): Promise<void> {
  await runStages(stages, exchange);
}
