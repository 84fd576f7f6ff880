// Runs a stage list over an exchange: the exchange stages for a call as one Fastify hook and for an
// upgrade before its tunnel opens, and a call's own stages in its route handler (server/calls.ts). A
// stage answers synchronously or with a promise when it has to wait (exchange.ts); most calls wait on
// nothing, so a whole list usually runs in one synchronous pass: no promise, no microtask, no
// closure, one hook instead of one per stage.
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import type { Exchange, Stage } from './exchange.js';

/** A stage of either list: an exchange Stage (which has no use for `reply`), or a call's CallStage. */
type Step<E, R> = (exchange: E, reply: R) => void | Promise<void>;

/**
 * Runs `stages` from `from` on; undefined when all of them answered synchronously, else a promise
 * that settles once the rest have run. A stage's throw (or rejection) refuses the exchange. `reply`:
 * a call's, handed to its own stages; undefined for the exchange stages of an upgrade.
 */
export function runStages<E extends Exchange, R>(
  stages: readonly Step<E, R>[],
  exchange: E,
  reply: R,
  from = 0,
): Promise<void> | undefined {
  const last = stages.length - 1;
  for (let index = from; index <= last; index++) {
    const pending = stages[index]!(exchange, reply);
    // The last stage's promise (a call's forwarding) is the list's own: no promise chained on it.
    if (pending !== undefined)
      return index === last ? pending : pending.then(() => runStages(stages, exchange, reply, index + 1));
  }
  return undefined;
}

/**
 * Before one stage of a call, the gateway may answer the call itself (a CORS preflight, which carries
 * no token, before authentication): `answer` returns true when it did, and the walk ends there.
 */
export interface CallAnswer {
  readonly before: Stage<FastifyRequest>;
  readonly answer: (request: FastifyRequest, reply: FastifyReply) => boolean;
}

/** One callback-style hook (onRequest) that runs `stages` over a call; the request is the call's exchange. */
export function stageHook(stages: readonly Stage<FastifyRequest>[], callAnswer?: CallAnswer) {
  const at = callAnswer === undefined ? -1 : stages.indexOf(callAnswer.before);
  if (callAnswer !== undefined && at < 0) throw new Error('stageHook: the answer comes before a stage not in the list');
  const head = at < 0 ? stages : stages.slice(0, at);
  const tail = at < 0 ? [] : stages.slice(at);
  /** The tail's walk: true when the call was answered before it, else undefined or the promise of the rest. */
  const walkTail = (request: FastifyRequest, reply: FastifyReply): true | Promise<void> | undefined =>
    callAnswer!.answer(request, reply) ? true : runStages(tail, request, reply);

  return function runStageHook(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    request.lifeline = reply.raw;
    let pending: Promise<unknown> | true | undefined;
    try {
      const headDone = runStages(head, request, reply);
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
export async function admitUpgrade<E extends Exchange>(stages: readonly Stage<E>[], exchange: E): Promise<void> {
  await runStages(stages, exchange, undefined);
}
