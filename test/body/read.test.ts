import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { BodyBudget } from '../../src/body/budget.js';
import { readRequestBody, type BodyReadLimits } from '../../src/body/read.js';
import { GatewayError } from '../../src/errors.js';

describe('readRequestBody', () => {
  let server: http.Server | undefined;
  afterEach(async () => {
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = undefined;
  });

  async function serve(
    maxBytes: number,
    timeoutMs: number,
    budget = new BodyBudget({ bufferedBodyBytes: 0, bufferedBodyShare: 1 }),
  ) {
    const limits: BodyReadLimits = { maxBytes, maxBytesKey: 'test.maxBytes', timeoutMs, timeoutKey: 'test.timeoutMs' };
    const outcomes: Array<Buffer | GatewayError> = [];
    server = http.createServer((request, response) => {
      const hold = budget.hold(String(request.headers['x-caller']));
      response.once('close', hold.release);
      readRequestBody(request, limits, hold).then(
        (body) => {
          outcomes.push(body);
          response.end('ok');
        },
        (error: GatewayError) => {
          outcomes.push(error);
          response.writeHead(error.definition.status, error.headers).end('refused');
        },
      );
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, outcomes };
  }

  it('reads a declared and a chunked body whole', async () => {
    const { url, outcomes } = await serve(100, 5_000);
    await fetch(url, { method: 'POST', body: '{"a":1}' });
    await fetch(url, { method: 'POST', body: new Blob(['{"b":', '2}']).stream(), duplex: 'half' });
    expect(outcomes.map(String)).toEqual(['{"a":1}', '{"b":2}']);
  });

  it('reads a large declared body byte for byte, however it is cut, into memory of its own', async () => {
    const { url, outcomes } = await serve(4 * 1024 * 1024, 10_000);
    const sent = Buffer.alloc(3 * 1024 * 1024 + 7);
    for (let i = 0; i + 4 <= sent.length; i += 1000) sent.writeUInt32BE(i, i);
    const pieces = [
      sent.subarray(0, 1),
      sent.subarray(1, 700_000),
      sent.subarray(700_000, 2_500_001),
      sent.subarray(2_500_001),
    ];
    const status = await new Promise<number>((resolve, reject) => {
      const request = http.request(url, { method: 'POST', headers: { 'content-length': sent.length } }, (response) => {
        response.resume();
        resolve(response.statusCode!);
      });
      request.on('error', reject);
      for (const piece of pieces) request.write(piece);
      request.end();
    });
    expect(status).toBe(200);
    const body = outcomes[0] as Buffer;
    expect(body.equals(sent)).toBe(true);
    // Its own memory, whole: a worker can be lent it without a copy (policy/large-body-pool.ts).
    expect([body.byteOffset, body.buffer.byteLength]).toEqual([0, sent.length]);
  });

  it('refuses a declared length over the limit at once, and a chunked body once it passes the limit, closing the connection', async () => {
    const { url, outcomes } = await serve(10, 5_000);
    const declared = await fetch(url, { method: 'POST', body: 'x'.repeat(11) });
    expect(declared.status).toBe(413);
    expect(declared.headers.get('connection')).toBe('close');
    const chunked = await fetch(url, {
      method: 'POST',
      body: new Blob(['x'.repeat(8), 'x'.repeat(8)]).stream(),
      duplex: 'half',
    });
    expect(chunked.status).toBe(413);
    expect(outcomes).toHaveLength(2);
    for (const outcome of outcomes) {
      expect(outcome).toBeInstanceOf(GatewayError);
      expect((outcome as GatewayError).definition.code).toBe('GATEWAY_REQUEST_TOO_LARGE');
      expect((outcome as GatewayError).details.cause).toBe('The request body is larger than 10 bytes (test.maxBytes).');
    }
  });

  it('bounds the time a body may take', async () => {
    const { url, outcomes } = await serve(100, 200);
    const { port, hostname } = new URL(url);
    const started = Date.now();
    const answer = await new Promise<string>((resolve, reject) => {
      const request = http.request(
        { host: hostname, port, method: 'POST', headers: { 'content-length': '50' } },
        (response) => {
          resolve(String(response.statusCode));
          response.resume();
        },
      );
      request.on('error', reject);
      request.write('{"a":'); // and never the rest
    });
    expect(answer).toBe('400');
    expect(Date.now() - started).toBeLessThan(3_000);
    expect((outcomes[0] as GatewayError).details.cause).toBe(
      'The request body was not received within 200 ms (test.timeoutMs).',
    );
  });

  it('holds the bytes of bodies as they arrive, never what the head declares, until their answer is sent: over a share 429, over the budget 503', async () => {
    const budget = new BodyBudget({ bufferedBodyBytes: 100, bufferedBodyShare: 0.5 });
    const { url, outcomes } = await serve(100, 5_000, budget);
    const { port, hostname } = new URL(url);
    // Unfinished bodies: `sent` of `length` bytes (undefined: chunked, no length declared).
    const unfinished = (caller: string, length: number | undefined, sent: number) => {
      const request = http.request({
        host: hostname,
        port,
        method: 'POST',
        headers: { ...(length === undefined ? {} : { 'content-length': String(length) }), 'x-caller': caller },
      });
      request.on('error', () => undefined);
      if (sent > 0) request.write('x'.repeat(sent));
      else request.flushHeaders();
      return request;
    };
    // Declared whole, none of it sent: nothing held (a declared length once filled the budget with no body).
    const declaredOnly = ['d', 'e', 'f'].map((caller) => unfinished(caller, 30, 0));
    // One caller's 50 bytes (its whole share, chunked: more to come) and another's 40.
    const a = unfinished('a', undefined, 50);
    const b = unfinished('b', 41, 40);
    await expect.poll(() => budget.heldBytes).toBe(90);
    const post = (caller: string, body: string | ReadableStream) =>
      fetch(url, { method: 'POST', body, headers: { 'x-caller': caller }, duplex: 'half' });
    const overShare = await post('a', 'y');
    expect(overShare.status).toBe(429);
    expect(overShare.headers.get('retry-after')).toBe('1');
    const overBudget = await post('c', 'y'.repeat(20));
    expect(overBudget.status).toBe(503);
    expect(overBudget.headers.get('connection')).toBe('close');
    const chunked = await post('c', new Blob(['y'.repeat(8), 'y'.repeat(8)]).stream());
    expect(chunked.status).toBe(503);
    expect((await post('c', 'y'.repeat(10))).status).toBe(200);
    expect(outcomes.filter((o) => o instanceof GatewayError).map((o) => o.definition.code)).toEqual([
      'GATEWAY_RESOURCE_EXHAUSTED',
      'GATEWAY_BODY_BUFFER_EXHAUSTED',
      'GATEWAY_BODY_BUFFER_EXHAUSTED',
    ]);
    for (const request of declaredOnly) request.destroy();
    expect(budget.heldBytes).toBe(90);
    a.destroy();
    b.destroy();
    await expect.poll(() => budget.heldBytes).toBe(0);
  });

  it('refuses at once, before reading it, a body that declares more than the budget or the share has free now; nothing is reserved', async () => {
    const budget = new BodyBudget({ bufferedBodyBytes: 100, bufferedBodyShare: 0.5 });
    const { url, outcomes } = await serve(100, 5_000, budget);
    const { port, hostname } = new URL(url);
    /** Declares `length` bytes, sends `sent` of them and waits for the answer (none by 1 s: undefined). */
    const answerTo = (caller: string, length: number, sent: number) =>
      new Promise<number | undefined>((resolve) => {
        const request = http.request(
          { host: hostname, port, method: 'POST', headers: { 'content-length': String(length), 'x-caller': caller } },
          (response) => resolve(response.statusCode),
        );
        request.on('error', () => resolve(undefined));
        request.write('x'.repeat(sent));
        setTimeout(() => {
          resolve(undefined);
          request.destroy();
        }, 1_000);
      });
    // 60 bytes held by two callers; 40 free.
    const held = [
      http.request({ host: hostname, port, method: 'POST', headers: { 'content-length': '31', 'x-caller': 'a' } }),
      http.request({ host: hostname, port, method: 'POST', headers: { 'content-length': '31', 'x-caller': 'b' } }),
    ];
    for (const request of held) {
      request.on('error', () => undefined);
      request.write('x'.repeat(30));
    }
    await expect.poll(() => budget.heldBytes).toBe(60);
    // 5 of a declared 41 would fit, but the whole cannot: refused now, before the rest arrives.
    expect(await answerTo('c', 41, 5)).toBe(503);
    // Past the caller's own share (50): a holds 30, declares 21 more.
    expect(await answerTo('a', 21, 5)).toBe(429);
    // Within what is free: read on (no answer while its body is unfinished), nothing reserved for it.
    expect(await answerTo('c', 40, 5)).toBeUndefined();
    expect(outcomes.filter((o) => o instanceof GatewayError).map((o) => o.definition.code)).toEqual([
      'GATEWAY_BODY_BUFFER_EXHAUSTED',
      'GATEWAY_RESOURCE_EXHAUSTED',
    ]);
    for (const request of held) request.destroy();
    await expect.poll(() => budget.heldBytes).toBe(0);
  });

  it("counts what reading holds beside the bytes (takeBeside) against the process's budget only, given back on release", () => {
    const budget = new BodyBudget({ bufferedBodyBytes: 100, bufferedBodyShare: 0.25 });
    const hold = budget.hold('a');
    expect(hold.take(20)).toBeUndefined();
    expect(hold.takeBeside(60)).toBeUndefined(); // past the caller's share of 25, but not the budget
    expect([budget.heldBytes, budget.heldBy('a')]).toEqual([80, 20]);
    expect(budget.hold('b').takeBeside(30)?.definition.code).toBe('GATEWAY_BODY_BUFFER_EXHAUSTED');
    hold.release();
    expect([budget.heldBytes, budget.heldBy('a')]).toEqual([0, 0]);
  });

  it('gives back what was taken beside before the exchange ends (giveBackBeside), never more than was taken', () => {
    const budget = new BodyBudget({ bufferedBodyBytes: 100, bufferedBodyShare: 0.25 });
    const hold = budget.hold('a');
    expect(hold.take(20)).toBeUndefined();
    expect(hold.takeBeside(40)).toBeUndefined(); // a worker's tree, while it judges the body
    hold.giveBackBeside(40); // judged: the bytes stay held until the exchange ends
    expect(budget.heldBytes).toBe(20);
    hold.giveBackBeside(40);
    expect(budget.heldBytes).toBe(20);
    hold.release();
    expect(budget.heldBytes).toBe(0);
  });
});
