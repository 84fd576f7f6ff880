// The protection stage in a real gateway (in-memory store) in front of a real upstream on port 0:
// rate limits per principal, concurrency caps, and slots that always come back.
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startRecordingUpstream, answerJson } from '../helpers/recording-upstream.js';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';
import {
  call,
  startHoldingUpstream,
  startWebSocketUpstream,
  submit,
  waitFor,
  SUBMIT,
  type Answer,
  type HoldingUpstream,
  type PendingCall,
} from './support.js';
import { JS_CANTON_ERROR_KEYS } from '../helpers/canton-error-shape.js';

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function gatewayFor(
  upstream: { url: string; close(): Promise<void> },
  overrides: Record<string, unknown>,
): Promise<RunningGateway> {
  closers.push(() => upstream.close());
  const gateway = await startGateway(upstream.url, overrides);
  closers.push(() => gateway.close());
  return gateway;
}

function expectResourceExhausted(answer: Answer, limit: string, operation: string): void {
  expect(answer.status).toBe(429);
  expect(answer.headers['retry-after']).toMatch(/^[1-9]\d*$/);
  expect(answer.headers['content-type']).toContain('application/json');
  const body = JSON.parse(answer.body) as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(JS_CANTON_ERROR_KEYS);
  expect(body).toMatchObject({
    code: 'GATEWAY_RESOURCE_EXHAUSTED',
    errorCategory: 2,
    grpcCodeValue: 8,
    // The same wait as Retry-After, as Scala prints a Duration ("1 second", "30 seconds").
    retryInfo: answer.headers['retry-after'] === '1' ? '1 second' : `${answer.headers['retry-after']} seconds`,
    definiteAnswer: false,
    correlationId: answer.headers['x-request-id'],
    context: { operation, limit },
    resources: [],
  });
  expect(body.cause).toEqual(expect.any(String));
}

async function metric(gateway: RunningGateway, name: string, labels: Record<string, string>): Promise<number> {
  const json = await gateway.registry.getMetricsAsJSON();
  const found = json.find((m) => m.name === name);
  const value = (found?.values as Array<{ value: number; labels: Record<string, string | number> }> | undefined)?.find(
    (v) => Object.entries(labels).every(([k, l]) => String(v.labels[k]) === l),
  );
  return value?.value ?? 0;
}

interface Burst {
  readonly calls: PendingCall[];
  /** Answers that came back while the others were held. */
  readonly refused: Answer[];
  /** Calls the upstream holds. */
  readonly held: number;
}

const live = (upstream: HoldingUpstream) => upstream.held.filter((h) => !h.response.destroyed).length;

/** Fires `count` concurrent submits and waits until each is either held upstream or answered. */
async function burst(
  gateway: RunningGateway,
  upstream: HoldingUpstream,
  headers: Record<string, string>,
  count: number,
): Promise<Burst> {
  const before = live(upstream);
  const calls = Array.from({ length: count }, () => submit(gateway.url, headers));
  const refused: Answer[] = [];
  for (const pending of calls)
    void pending.answer.then(
      (answer) => refused.push(answer),
      () => {},
    );
  await waitFor(() => live(upstream) - before + refused.length === count, `${count} calls held or answered`);
  return { calls, refused, held: live(upstream) - before };
}

/**
 * A burst once `held` slots are free. Slots of aborted calls come back when the gateway sees their
 * sockets close, a moment after the client closed them: retried (bounded) until then.
 */
async function burstWhenFree(
  gateway: RunningGateway,
  upstream: HoldingUpstream,
  headers: Record<string, string>,
  count: number,
  held: number,
): Promise<Burst> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const attempt = await burst(gateway, upstream, headers, count);
    if (attempt.held === held || Date.now() > deadline) return attempt;
    for (const pending of attempt.calls) pending.abort();
    await waitFor(() => live(upstream) === 0, 'aborted calls closed upstream');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('rate limits', () => {
  it('a principal over its rate gets 429 with Retry-After and a JsCantonError; another principal is unaffected', async () => {
    const upstream = await startRecordingUpstream(answerJson(200, { partyDetails: [] }));
    const gateway = await gatewayFor(upstream, {
      protection: { operations: { getV2Parties: { rate: { requests: 2, perSeconds: 60 } } } },
    });
    const alice = gateway.auth();
    const bob = { authorization: `Bearer ${await gateway.issuer.mint({ sub: 'bob' })}` };

    expect((await call(gateway.url, '/v2/parties', alice).answer).status).toBe(200);
    expect((await call(gateway.url, '/v2/parties', alice).answer).status).toBe(200);
    const refused = await call(gateway.url, '/v2/parties', alice).answer;
    expectResourceExhausted(refused, 'rate', 'getV2Parties');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(29);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(30);

    expect((await call(gateway.url, '/v2/parties', bob).answer).status).toBe(200);
    // Other operations keep their own budget.
    expect((await call(gateway.url, '/v2/packages', alice).answer).status).toBe(200);

    expect(upstream.requests.map((r) => r.url)).toEqual(['/v2/parties', '/v2/parties', '/v2/parties', '/v2/packages']);
    expect(
      await metric(gateway, 'ledger_gateway_requests_total', {
        operation: 'getV2Parties',
        status: '429',
        error_code: 'GATEWAY_RESOURCE_EXHAUSTED',
      }),
    ).toBe(1);
    expect(
      await metric(gateway, 'ledger_gateway_protection_refusals_total', { operation: 'getV2Parties', limit: 'rate' }),
    ).toBe(1);
  });

  it('a call without a principal (a public operation) is counted by client address', async () => {
    const upstream = await startRecordingUpstream(answerJson(200, { version: '3.4.12' }));
    const issuer = await createTestIssuer();
    const gateway = await gatewayFor(upstream, {
      server: { trustedProxies: ['127.0.0.1'] },
      auth: { issuers: [issuer.issuerConfig], participantId: TEST_PARTICIPANT, publicOperations: ['getVersion'] },
      protection: { operations: { getVersion: { rate: { requests: 1, perSeconds: 60 } } } },
    });
    const first = { 'x-forwarded-for': '203.0.113.1' };
    const firstAnswer = await call(gateway.url, '/v2/version', first).answer;
    expect(firstAnswer.status, firstAnswer.body).toBe(200);
    expectResourceExhausted(await call(gateway.url, '/v2/version', first).answer, 'rate', 'getVersion');
    expect((await call(gateway.url, '/v2/version', { 'x-forwarded-for': '203.0.113.2' }).answer).status).toBe(200);
  });
});

describe('concurrency caps', () => {
  const capped = (cap: number, extra: Record<string, unknown> = {}) => ({
    ...extra,
    protection: { operations: { submitAndWaitForTransaction: { maxInFlightPerPrincipal: cap } } },
  });

  it('N+1 concurrent slow submits from one user: exactly one 429; the slots come back after completion', async () => {
    const upstream = await startHoldingUpstream();
    const gateway = await gatewayFor(upstream, capped(3));
    const alice = gateway.auth();

    const first = await burst(gateway, upstream, alice, 4);
    expect(first.held).toBe(3);
    expect(first.refused).toHaveLength(1);
    expectResourceExhausted(first.refused[0]!, 'principalConcurrency', 'submitAndWaitForTransaction');
    expect(first.refused[0]!.headers['retry-after']).toBe('1');

    // Another user is not affected by alice's full cap.
    const bob = { authorization: `Bearer ${await gateway.issuer.mint({ sub: 'bob' })}` };
    const bobs = submit(gateway.url, bob);
    await waitFor(() => upstream.held.length === 4, 'bob held upstream');

    upstream.answerAll(200);
    const answers = await Promise.all([...first.calls, bobs].map((c) => c.answer));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(4);

    // The slots are back once the answers are: the same burst again gives the same outcome.
    const second = await burst(gateway, upstream, alice, 4);
    expect(second.held).toBe(3);
    expect(second.refused.map((a) => a.status)).toEqual([429]);
    upstream.answerAll(200);
    await Promise.all(second.calls.map((c) => c.answer));
    expect(upstream.requests).toHaveLength(7);
    expect(
      await metric(gateway, 'ledger_gateway_protection_refusals_total', {
        operation: 'submitAndWaitForTransaction',
        limit: 'principalConcurrency',
      }),
    ).toBe(2);
  });

  it('slots come back after client aborts, with no leak under a burst of aborts', async () => {
    const upstream = await startHoldingUpstream();
    const gateway = await gatewayFor(upstream, capped(2));
    const alice = gateway.auth();

    for (let round = 0; round < 10; round++) {
      const attempt = await burstWhenFree(gateway, upstream, alice, 6, 2);
      expect(attempt.held).toBe(2);
      expect(attempt.refused.map((a) => a.status)).toEqual([429, 429, 429, 429]);
      for (const pending of attempt.calls) pending.abort();
      await waitFor(() => live(upstream) === 0, 'aborted calls closed upstream');
    }

    // Every abort gave its slot back: two calls are admitted, and the cap still holds.
    const last = await burstWhenFree(gateway, upstream, alice, 3, 2);
    expect(last.held).toBe(2);
    expect(last.refused.map((a) => a.status)).toEqual([429]);
    upstream.answerAll(200);
    expect((await Promise.all(last.calls.map((c) => c.answer))).filter((a) => a.status === 200)).toHaveLength(2);
  });

  it('slots come back after an upstream error and after an upstream timeout', async () => {
    const upstream = await startRecordingUpstream((_request, response) => {
      response.socket?.destroy();
    });
    const gateway = await gatewayFor(upstream, capped(1, { upstream: { timeoutMs: 300 } }));
    const alice = gateway.auth();

    for (let i = 0; i < 3; i++) {
      const failed = await submit(gateway.url, alice).answer;
      expect(failed.status).toBeGreaterThanOrEqual(502);
      expect(JSON.parse(failed.body).code).toMatch(/^GATEWAY_UPSTREAM_/);
    }
    upstream.respond(() => {
      /* never answers */
    });
    for (let i = 0; i < 3; i++) {
      const timedOut = await submit(gateway.url, alice).answer;
      expect(timedOut.status).toBe(504);
      expect(JSON.parse(timedOut.body).code).toBe('GATEWAY_UPSTREAM_TIMEOUT');
    }
    upstream.respond(answerJson(200, { transaction: {} }));
    expect((await submit(gateway.url, alice).answer).status).toBe(200);
    expect(
      await metric(gateway, 'ledger_gateway_protection_refusals_total', {
        operation: 'submitAndWaitForTransaction',
        limit: 'principalConcurrency',
      }),
    ).toBe(0);
  });

  it('a slot comes back when a later stage refuses the call (request rules, body limit)', async () => {
    const upstream = await startRecordingUpstream(answerJson(200, { transaction: {} }));
    const gateway = await gatewayFor(upstream, capped(1, { limits: { bodyBytes: 1024 } }));
    const alice = gateway.auth();
    for (let i = 0; i < 3; i++) {
      const missingField = await call(gateway.url, SUBMIT, alice, '{"commands":{}}').answer;
      expect(missingField.status).toBe(400);
      expect(missingField.body).toBe("Invalid value for: body (Missing required field at 'commands.commands')"); // the decoder's refusal
      const tooLarge = await call(
        gateway.url,
        SUBMIT,
        alice,
        JSON.stringify({ commands: { padding: 'x'.repeat(2048) } }),
      ).answer;
      expect(tooLarge.status).toBe(413);
    }
    expect((await submit(gateway.url, alice).answer).status).toBe(200);
    expect(upstream.requests).toHaveLength(1);
  });

  it('the process-wide cap refuses any call over it', async () => {
    const upstream = await startHoldingUpstream();
    const gateway = await gatewayFor(upstream, { protection: { maxInFlight: 2 } });
    const alice = gateway.auth();
    // Two callers, each within its share of the two slots (the default principalShare: one each).
    const bob = { authorization: `Bearer ${await gateway.issuer.mint({ sub: 'bob' })}` };
    const carol = { authorization: `Bearer ${await gateway.issuer.mint({ sub: 'carol' })}` };
    const held = [submit(gateway.url, alice), submit(gateway.url, bob)];
    await waitFor(() => upstream.held.length === 2, 'two calls held');
    expectResourceExhausted(await call(gateway.url, '/v2/parties', carol).answer, 'gatewayConcurrency', 'getV2Parties');
    upstream.answerAll(200);
    await Promise.all(held.map((c) => c.answer));
    upstream.respond(answerJson(200, {}));
    expect((await call(gateway.url, '/v2/parties', alice).answer).status).toBe(200);
  });
});

describe('WebSocket streams', () => {
  function openStream(
    url: string,
    token: string,
  ): Promise<{ socket: WebSocket } | { status: number; headers: Record<string, unknown>; body: string }> {
    const socket = new WebSocket(`${url.replace('http', 'ws')}/v2/updates`, ['daml.ws.auth'], {
      headers: { authorization: `Bearer ${token}` },
    });
    return new Promise((resolve, reject) => {
      socket.once('open', () => resolve({ socket }));
      socket.once('unexpected-response', (_request, response) => {
        let body = '';
        response.on('data', (chunk: Buffer) => {
          body += chunk.toString();
        });
        response.once('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, body }));
      });
      socket.once('error', reject);
    });
  }

  it("one user's streams take at most its share of the process-wide slots: others still get theirs", async () => {
    const upstream = await startWebSocketUpstream();
    // The default principalShare (a quarter) of 8 slots: 2 per caller.
    const gateway = await gatewayFor(upstream, { protection: { maxInFlight: 8 } });
    const alice = await gateway.issuer.mint();
    const outcomes = [];
    for (let i = 0; i < 8; i++) outcomes.push(await openStream(gateway.url, alice));
    const opened = outcomes.filter((outcome): outcome is { socket: WebSocket } => 'socket' in outcome);
    expect(opened).toHaveLength(2);
    for (const refused of outcomes.slice(2)) {
      expect(refused).toMatchObject({ status: 429, headers: { 'retry-after': '1' } });
      expect(JSON.parse((refused as { body: string }).body)).toMatchObject({
        code: 'GATEWAY_RESOURCE_EXHAUSTED',
        context: { operation: 'onV2Updates', limit: 'gatewayPrincipalConcurrency' },
      });
    }
    const refusals = { operation: 'onV2Updates', limit: 'gatewayPrincipalConcurrency' };
    expect(await metric(gateway, 'ledger_gateway_protection_refusals_total', refusals)).toBe(6);

    const bob = await openStream(gateway.url, await gateway.issuer.mint({ sub: 'bob' }));
    expect('socket' in bob).toBe(true);
    const carol = { authorization: `Bearer ${await gateway.issuer.mint({ sub: 'carol' })}` };
    expect((await call(gateway.url, '/v2/version', carol).answer).status).toBe(200);
    expect(upstream.open()).toBe(3);
    for (const stream of [...opened, bob as { socket: WebSocket }]) stream.socket.close();
  });

  it('a stream holds its slot for its whole life and gives it back when it closes', async () => {
    const upstream = await startWebSocketUpstream();
    const gateway = await gatewayFor(upstream, {
      protection: { operations: { onV2Updates: { maxInFlightPerPrincipal: 1 } } },
    });
    const token = await gateway.issuer.mint();

    const first = await openStream(gateway.url, token);
    expect('socket' in first).toBe(true);
    const refused = await openStream(gateway.url, token);
    expect(refused).toMatchObject({ status: 429, headers: { 'retry-after': '1' } });
    expect(JSON.parse((refused as { body: string }).body)).toMatchObject({
      code: 'GATEWAY_RESOURCE_EXHAUSTED',
      context: { operation: 'onV2Updates', limit: 'principalConcurrency' },
    });
    expect(upstream.open()).toBe(1);

    // Another user has a slot of their own.
    const other = await openStream(gateway.url, await gateway.issuer.mint({ sub: 'bob' }));
    expect('socket' in other).toBe(true);
    (other as { socket: WebSocket }).socket.close();

    (first as { socket: WebSocket }).socket.close();
    const deadline = Date.now() + 5_000;
    let again = await openStream(gateway.url, token);
    while (!('socket' in again) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      again = await openStream(gateway.url, token);
    }
    expect('socket' in again).toBe(true);
    (again as { socket: WebSocket }).socket.close();
  });
});
