// A call's own stages (src/server/calls.ts) on a real Fastify listener on 127.0.0.1 port 0: they run
// in order after the exchange stages, the last one answers; a stage's refusal is answered in Canton's
// shape with its code and reason on the call (what the metrics and the log line read), and no stage
// after it runs; a stage that only judges (a dry run) notes its reason and the call goes on.
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { Errors, GatewayError } from '../../src/errors.js';
import type { CallStageEntry, Generation, PinnedExchange } from '../../src/live/generations.js';
import { serveCalls } from '../../src/server/calls.js';
import { JS_CANTON_ERROR_KEYS } from '../helpers/canton-error-shape.js';

interface Seen {
  readonly ran: string[];
  errorCode: string | null;
  refusalReason: string | undefined;
}

let api: FastifyInstance | undefined;
afterEach(async () => {
  await api?.close();
  api = undefined;
});

/**
 * A listener serving calls through `callStages`, behind an exchange list that pins a generation
 * without CORS (`generationOf`'s, by default a new one for each call).
 */
async function serving(
  callStages: (seen: Seen) => CallStageEntry[],
  generationOf: () => Generation = () => ({ cors: undefined }) as Generation,
): Promise<{ url: string; seen: Seen }> {
  const seen: Seen = { ran: [], errorCode: null, refusalReason: undefined };
  api = Fastify({ logger: false });
  for (const [name, value] of Object.entries({
    kind: 'call',
    lifeline: null,
    generation: null,
    operation: null,
    principal: null,
    errorCode: null,
    refusalReason: undefined,
    traceresponse: undefined,
    replyHeaders: false,
  }))
    api.decorateRequest(name, value as never);
  api.decorate('draining', false);
  const pin = (exchange: PinnedExchange) => {
    seen.ran.push('exchange stages');
    exchange.generation = generationOf();
  };
  const authenticate = () => undefined;
  serveCalls(api, {
    stages: [pin, authenticate],
    callStages: callStages(seen),
    corsBefore: authenticate,
    log: { error: () => undefined },
  });
  api.addHook('onResponse', async (request: FastifyRequest) => {
    seen.errorCode = request.errorCode;
    seen.refusalReason = request.refusalReason;
  });
  return { url: await api.listen({ host: '127.0.0.1', port: 0 }), seen };
}

describe("a call's own stages", () => {
  it('run in order after the exchange stages, a promise only where one waits, and the last answers', async () => {
    const { url, seen } = await serving(({ ran }) => [
      () => void ran.push('watch'),
      () => new Promise<void>((resolve) => setImmediate(() => resolve(void ran.push('rules')))),
      () => void ran.push('intent'),
      (_call, reply) => {
        ran.push('answer');
        void reply.code(200).send({ answered: true });
      },
    ]);
    const answer = await fetch(`${url}/v2/state/ledger-end`);
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual({ answered: true });
    expect(seen.ran).toEqual(['exchange stages', 'watch', 'rules', 'intent', 'answer']);
    expect(seen.errorCode).toBeNull();
  });

  it("answers a stage's refusal in Canton's shape, with its code and reason on the call, and runs no stage after it", async () => {
    const { url, seen } = await serving(({ ran }) => [
      () => {
        ran.push('policy');
        throw new GatewayError(
          Errors.INVALID_ARGUMENT,
          { cause: 'The body names another party.' },
          { reason: 'ledger policy: actAs' },
        );
      },
      (_call, reply) => {
        ran.push('answer');
        void reply.send({ answered: true });
      },
    ]);
    const answer = await fetch(`${url}/v2/commands/submit-and-wait`, { method: 'POST' });
    expect(answer.status).toBe(Errors.INVALID_ARGUMENT.status);
    const body = (await answer.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(JS_CANTON_ERROR_KEYS);
    expect(body.code).toBe('INVALID_ARGUMENT');
    expect(answer.headers.get('x-request-id')).toBe(body.correlationId);
    expect(seen.ran).toEqual(['exchange stages', 'policy']);
    expect(seen).toMatchObject({ errorCode: 'INVALID_ARGUMENT', refusalReason: 'ledger policy: actAs' });
  });

  it('let a stage that only judges (a dry run) note what it would refuse, and go on', async () => {
    const { url, seen } = await serving(({ ran }) => [
      (call) => {
        ran.push('policy (dry run)');
        call.refusalReason = 'ledger policy (dry run): would refuse actAs';
      },
      (_call, reply) => {
        ran.push('answer');
        void reply.send({ answered: true });
      },
    ]);
    expect((await fetch(`${url}/v2/commands/submit-and-wait`, { method: 'POST' })).status).toBe(200);
    expect(seen.ran).toEqual(['exchange stages', 'policy (dry run)', 'answer']);
    expect(seen).toMatchObject({ errorCode: null, refusalReason: 'ledger policy (dry run): would refuse actAs' });
  });

  it("build a generation's list once: a pinned stage is picked once per generation, and one it turns off never runs", async () => {
    const generations = [
      { cors: undefined, name: 'first' },
      { cors: undefined, name: 'second' },
    ];
    let current = generations[0]!;
    const picked: string[] = [];
    const { url, seen } = await serving(
      ({ ran }) => [
        {
          pick: (generation) => {
            picked.push(`rules under ${current.name}`);
            return generation === (current as unknown) ? () => void ran.push('rules') : undefined;
          },
        },
        {
          // Off under the first configuration, on under the second.
          pick: () => {
            picked.push(`policy under ${current.name}`);
            return current === generations[0] ? undefined : () => void ran.push('policy');
          },
        },
        (_call, reply) => {
          ran.push('answer');
          void reply.send({ answered: true });
        },
      ],
      () => current as unknown as Generation,
    );
    for (let call = 0; call < 3; call++) expect((await fetch(`${url}/v2/state/ledger-end`)).status).toBe(200);
    current = generations[1]!;
    expect((await fetch(`${url}/v2/state/ledger-end`)).status).toBe(200);
    expect(picked).toEqual(['rules under first', 'policy under first', 'rules under second', 'policy under second']);
    expect(seen.ran.filter((step) => step !== 'exchange stages')).toEqual([
      ...['rules', 'answer', 'rules', 'answer', 'rules', 'answer'],
      ...['rules', 'policy', 'answer'],
    ]);
  });
});
