// Request bodies and the upstream pool: a body that fits upstream.bufferBodyBytes is read whole before
// its call takes an upstream connection; a larger one streams, on its caller's share of the pool; a
// body that does not keep its pace is cut with a 408 and frees whatever it held.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { gauge, startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { uploadsPerCaller } from '../../src/proxy/upload-shares.js';
import { eventually } from '../helpers/eventually.js';

const current = perTest();

interface Received {
  readonly url: string;
  readonly headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** 'end' (whole), 'aborted' (the gateway cut it), or undefined while it is still arriving. */
  outcome: 'end' | 'aborted' | undefined;
}

/**
 * A participant on 127.0.0.1 port 0 that records every request from its head on (a trickling upload
 * is seen while it arrives) and answers each once its body has ended. `holdBodyMs` keeps each
 * request's body unread that long first (a participant that reads slowly).
 */
async function startParticipant(holdBodyMs = 0) {
  const received: Received[] = [];
  const server = http.createServer((request, response) => {
    const entry: Received = {
      url: request.url ?? '',
      headers: request.headers,
      body: Buffer.alloc(0),
      outcome: undefined,
    };
    if (request.headers['user-agent'] !== 'ledger-gateway-readiness') received.push(entry);
    const chunks: Buffer[] = [];
    request.pause();
    setTimeout(() => request.resume(), holdBodyMs);
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      entry.body = Buffer.concat(chunks);
      entry.outcome = 'end';
      const answer = JSON.stringify({ bytes: entry.body.length });
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length });
      response.end(answer);
    });
    request.on('close', () => {
      entry.body = Buffer.concat(chunks);
      entry.outcome ??= 'aborted';
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const participant = {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    received,
    uploads: () => received.filter((entry) => entry.url.startsWith('/v2/dars')),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  current.upstream = participant;
  return participant;
}

interface Answer {
  status: number;
  head: string;
  body: string;
}

/**
 * An upload on a raw connection, so the test decides when each byte leaves: `declared` sends a
 * Content-Length, otherwise the body is chunked. `answer` settles with the gateway's answer once the
 * connection closes (or after `send` has ended the body and the answer is complete).
 */
function openUpload(gatewayUrl: string, token: string, declared?: number) {
  const { port } = new URL(gatewayUrl);
  const socket = net.connect(Number(port), '127.0.0.1');
  socket.on('error', () => undefined); // writes after the gateway closed the connection: expected
  const framing = declared === undefined ? 'Transfer-Encoding: chunked' : `Content-Length: ${declared}`;
  socket.write(
    `POST /v2/dars HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: application/octet-stream\r\n${framing}\r\n\r\n`,
  );
  let text = '';
  socket.on('data', (data: Buffer) => {
    text += data.toString('latin1');
  });
  let closedAt = 0;
  const closed = new Promise<void>((resolve) =>
    socket.once('close', () => {
      closedAt = Date.now();
      resolve();
    }),
  );
  const parse = (): Answer | undefined => {
    const split = text.indexOf('\r\n\r\n');
    if (split === -1) return undefined;
    const head = text.slice(0, split);
    const length = /\r\ncontent-length: *(\d+)/i.exec(head)?.[1];
    const body = text.slice(split + 4);
    if (length !== undefined && body.length < Number(length)) return undefined;
    return { status: Number(head.slice(9, 12)), head, body };
  };
  // Bounded: an answer that does not come within 10 s reads as none.
  const answer = (async (): Promise<Answer | undefined> => {
    const deadline = Date.now() + 10_000;
    while (parse() === undefined && !socket.destroyed && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 10));
    return parse();
  })();
  return {
    socket,
    answer,
    closed,
    closedAt: () => closedAt,
    send(bytes: Buffer, end = false): void {
      if (socket.destroyed) return;
      if (declared !== undefined) socket.write(bytes);
      else
        socket.write(
          Buffer.concat([
            Buffer.from(`${bytes.length.toString(16)}\r\n`),
            bytes,
            Buffer.from(`\r\n${end ? '0\r\n\r\n' : ''}`),
          ]),
        );
    },
  };
}

type Upload = ReturnType<typeof openUpload>;

/** Sends one byte every `everyMs` on each upload until stop() (a 1-byte-per-interval trickle). */
function trickle(uploads: Upload[], everyMs: number) {
  const timer = setInterval(() => {
    for (const upload of uploads) upload.send(Buffer.from('x'));
  }, everyMs);
  return { stop: () => clearInterval(timer) };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('uploads and the upstream pool', () => {
  it("one caller's slow large uploads hold at most its share of the pool; the rest: 429", async () => {
    const participant = await startParticipant();
    // 8 connections, the default share (a quarter): 2 streamed uploads per caller.
    const gw = (current.gw = await startGateway(participant.url, { upstream: { connections: 8, timeoutMs: 3_000 } }));
    expect(uploadsPerCaller(8, gw.config.upstream.uploadShare)).toBe(2);
    const alice = await gw.issuer.mint({ sub: 'alice' });
    const bob = await gw.issuer.mint({ sub: 'bob' });
    // Over the 64 KiB buffer: streamed.
    const uploads = Array.from({ length: 8 }, () => openUpload(gw.url, alice, 1024 * 1024));
    const dripping = trickle(uploads, 200);
    try {
      await sleep(1_000); // every upload under way
      // Another caller, and alice's own calls that are not uploads, are served at once.
      for (const token of [bob, alice]) {
        const started = Date.now();
        const served = await fetch(`${gw.url}/v2/parties`, {
          headers: { authorization: `Bearer ${token}` },
          signal: AbortSignal.timeout(5_000),
        });
        expect(served.status).toBe(200);
        expect(Date.now() - started).toBeLessThan(1_000);
      }
      expect(participant.uploads()).toHaveLength(2);
      const refused = (await Promise.all(uploads.map((upload) => Promise.race([upload.answer, sleep(0)])))).filter(
        (answer) => answer !== undefined,
      );
      expect(refused).toHaveLength(6);
      for (const answer of refused as Answer[]) {
        expect(answer.status).toBe(429);
        expect(answer.head).toMatch(/\r\nretry-after: 1\r\n/i);
        expect(answer.head).toMatch(/\r\nconnection: close\r\n/i); // its body was never read
        expect(JSON.parse(answer.body)).toMatchObject({
          code: 'GATEWAY_UPLOAD_SHARE_EXHAUSTED',
          errorCategory: 2,
          grpcCodeValue: 8,
          retryInfo: '1 second',
        });
      }
      expect(await gauge(gw, 'ledger_gateway_upstream_calls_in_flight')).toBe(2);
      // Another caller's upload has a share of its own.
      const bobs = openUpload(gw.url, bob, 128 * 1024);
      bobs.send(randomBytes(128 * 1024));
      expect((await bobs.answer)?.status).toBe(200);
      expect(participant.uploads()).toHaveLength(3);
    } finally {
      dripping.stop();
      for (const upload of uploads) upload.socket.destroy();
    }
  });

  it('slow small uploads are read whole before they take an upstream connection; others are served', async () => {
    const participant = await startParticipant();
    const gw = (current.gw = await startGateway(participant.url, { upstream: { connections: 8, timeoutMs: 3_000 } }));
    const alice = await gw.issuer.mint({ sub: 'alice' });
    const bob = await gw.issuer.mint({ sub: 'bob' });
    const uploads = [
      ...Array.from({ length: 8 }, () => openUpload(gw.url, alice, 1024)),
      ...Array.from({ length: 8 }, () => openUpload(gw.url, alice)), // chunked
    ];
    const dripping = trickle(uploads, 200);
    try {
      await sleep(1_000);
      const started = Date.now();
      const served = await fetch(`${gw.url}/v2/parties`, {
        headers: { authorization: `Bearer ${bob}` },
        signal: AbortSignal.timeout(5_000),
      });
      expect(served.status).toBe(200);
      expect(Date.now() - started).toBeLessThan(1_000);
      expect(participant.uploads()).toHaveLength(0);
      expect(await gauge(gw, 'ledger_gateway_upstream_calls_in_flight')).toBe(0);
    } finally {
      dripping.stop();
      for (const upload of uploads) upload.socket.destroy();
    }
  });

  it('holds buffered bodies against limits.bufferedBodyBytes until their exchange ends: over the share 429, over the budget 503; a streamed one holds nothing', async () => {
    const participant = await startParticipant();
    const gw = (current.gw = await startGateway(participant.url, {
      limits: { bufferedBodyBytes: 3000, bufferedBodyShare: 0.5 },
    }));
    const [alice, bob, carol] = await Promise.all(['alice', 'bob', 'carol'].map((sub) => gw.issuer.mint({ sub })));
    const held = [openUpload(gw.url, alice!, 1500), openUpload(gw.url, bob!)];
    held[1]!.send(Buffer.alloc(1000, 0x61)); // chunked: counted as it arrives
    const buffered = () => gauge(gw, 'ledger_gateway_body_buffer_bytes');
    await expect.poll(buffered).toBe(2500);
    const overShare = openUpload(gw.url, alice!, 10);
    expect((await overShare.answer)?.status).toBe(429);
    const overBudget = openUpload(gw.url, carol!, 600);
    const refused = await overBudget.answer;
    expect(refused?.status).toBe(503);
    expect(refused?.head).toMatch(/\r\nretry-after: 1\r\n/i);
    expect(refused?.body).toContain('GATEWAY_BODY_BUFFER_EXHAUSTED');
    // A body over upstream.bufferBodyBytes streams on its caller's upload share, not on this budget;
    // a chunked one gives back what it held once it outgrows the buffer.
    const streamed = openUpload(gw.url, carol!, 100_000);
    streamed.send(Buffer.alloc(100_000, 0x62));
    expect((await streamed.answer)?.status).toBe(200);
    const outgrown = openUpload(gw.url, carol!);
    outgrown.send(Buffer.alloc(400, 0x63));
    await expect.poll(buffered).toBe(2900);
    outgrown.send(Buffer.alloc(70_000, 0x63));
    await expect.poll(buffered).toBe(2500);
    outgrown.send(Buffer.alloc(10, 0x63), true);
    expect((await outgrown.answer)?.status).toBe(200);
    held[0]!.send(Buffer.alloc(1500, 0x61));
    expect((await held[0]!.answer)?.status).toBe(200);
    held[1]!.send(Buffer.alloc(10, 0x61), true);
    expect((await held[1]!.answer)?.status).toBe(200);
    await expect.poll(buffered).toBe(0);
    expect(participant.uploads().map((entry) => entry.body.length)).toEqual([100_000, 70_410, 1500, 1010]);
  });

  it('delivers a buffered body byte for byte, declared or chunked, once it is whole', async () => {
    const participant = await startParticipant();
    const gw = (current.gw = await startGateway(participant.url));
    const token = await gw.issuer.mint();
    const body = randomBytes(60 * 1024);
    for (const declared of [body.length, undefined]) {
      const upload = openUpload(gw.url, token, declared);
      upload.send(body.subarray(0, 30_000));
      await sleep(300);
      // Nothing sent upstream yet.
      expect(participant.uploads().filter((entry) => entry.outcome === undefined)).toHaveLength(0);
      upload.send(body.subarray(30_000), true);
      const answer = await upload.answer;
      expect(answer?.status).toBe(200);
      expect(JSON.parse(answer!.body)).toEqual({ bytes: body.length });
    }
    expect(participant.uploads()).toHaveLength(2);
    for (const received of participant.uploads()) {
      expect(received.body.equals(body)).toBe(true);
      expect(received.headers['content-length']).toBe(String(body.length));
    }
  });

  it('streams a large upload whole, declared or chunked (the chunked one once it outgrows the buffer)', async () => {
    const participant = await startParticipant();
    const gw = (current.gw = await startGateway(participant.url));
    const token = await gw.issuer.mint();
    const body = randomBytes(5 * 1024 * 1024);
    for (const declared of [body.length, undefined]) {
      const upload = openUpload(gw.url, token, declared);
      upload.send(body.subarray(0, 100 * 1024)); // past the 64 KiB buffer
      await expect
        .poll(() => participant.uploads().filter((entry) => entry.outcome === undefined).length, { timeout: 3_000 })
        .toBe(1);
      for (let at = 100 * 1024; at < body.length; at += 512 * 1024)
        upload.send(body.subarray(at, at + 512 * 1024), at + 512 * 1024 >= body.length);
      const answer = await upload.answer;
      expect(answer?.status).toBe(200);
      expect(JSON.parse(answer!.body)).toEqual({ bytes: body.length });
    }
    for (const received of participant.uploads()) expect(received.body.equals(body)).toBe(true);
  });

  it('cuts a trickling upload with 408, buffered or streamed, freeing its upstream connection and share', async () => {
    const participant = await startParticipant();
    // A 500 ms window at the default 1024 bytes per second: a window needs 512 bytes.
    const gw = (current.gw = await startGateway(participant.url, {
      upstream: { connections: 4, bodyIdleTimeoutMs: 500 },
    }));
    const token = await gw.issuer.mint();
    const buffered = openUpload(gw.url, token, 1024);
    const streamed = openUpload(gw.url, token, 1024 * 1024);
    const started = Date.now();
    const dripping = trickle([buffered, streamed], 50); // 20 bytes per second
    try {
      for (const upload of [buffered, streamed]) {
        const answer = await upload.answer;
        expect(answer?.status).toBe(408);
        expect(JSON.parse(answer!.body)).toMatchObject({
          code: 'GATEWAY_CLIENT_TIMEOUT',
          cause: expect.stringContaining('slower than 1024 bytes per second'),
        });
        expect(answer!.head).toMatch(/\r\nconnection: close\r\n/i);
        await upload.closed;
      }
      expect(Math.max(buffered.closedAt(), streamed.closedAt()) - started).toBeLessThan(2_000);
    } finally {
      dripping.stop();
      for (const upload of [buffered, streamed]) upload.socket.destroy();
    }
    // The streamed one reached the participant and was cut there; the buffered one never did.
    expect(participant.uploads()).toHaveLength(1);
    await expect.poll(() => participant.uploads()[0]!.outcome, { timeout: 2_000 }).toBe('aborted');
    await expect.poll(() => gauge(gw, 'ledger_gateway_upstream_calls_in_flight'), { timeout: 2_000 }).toBe(0);
    const metrics = await gw.registry.getSingleMetricAsString('ledger_gateway_requests_total');
    expect(metrics).toMatch(
      /operation="postV2Dars",method="POST",status="408",error_code="GATEWAY_CLIENT_TIMEOUT"\} 2/,
    );
    // Its share is free again: the caller's next large uploads stream.
    for (let i = 0; i < uploadsPerCaller(4, gw.config.upstream.uploadShare); i++) {
      const next = openUpload(gw.url, token, 100 * 1024);
      next.send(randomBytes(100 * 1024));
      expect((await next.answer)?.status).toBe(200);
    }
  });

  it('cuts an upload that stops sending (no minimum pace) after a window without a byte', async () => {
    const participant = await startParticipant();
    const gw = (current.gw = await startGateway(participant.url, {
      upstream: { bodyIdleTimeoutMs: 400, bodyMinBytesPerSecond: 0 },
    }));
    const token = await gw.issuer.mint();
    const slow = openUpload(gw.url, token, 1024);
    const dripping = trickle([slow], 100); // slow, but a byte in every window: kept
    await sleep(1_000);
    dripping.stop();
    expect(await Promise.race([slow.answer, sleep(0)])).toBeUndefined();
    const stoppedAt = Date.now();
    const answer = await slow.answer;
    slow.socket.destroy();
    expect(answer?.status).toBe(408);
    expect(JSON.parse(answer!.body)).toMatchObject({
      code: 'GATEWAY_CLIENT_TIMEOUT',
      cause: 'No byte of the request body arrived for 400 ms (upstream.bodyIdleTimeoutMs).',
    });
    expect(Date.now() - stoppedAt).toBeLessThan(1_200); // within two windows of the last byte
  });

  it('does not count against an upload the time the participant holds its body back', async () => {
    const participant = await startParticipant(1_500); // reads nothing for 1.5 s
    const gw = (current.gw = await startGateway(participant.url, {
      upstream: { bodyIdleTimeoutMs: 300 },
      limits: { bodyBytes: 64 * 1024 * 1024 },
    }));
    const token = await gw.issuer.mint();
    const body = randomBytes(48 * 1024 * 1024); // more than the sockets between client and participant hold
    const upload = openUpload(gw.url, token, body.length);
    upload.send(body);
    const answer = await upload.answer;
    expect(answer?.status).toBe(200);
    expect(participant.uploads()[0]!.body.equals(body)).toBe(true);
  });

  it('answers 413 to a streamed chunked body that outgrows the limit while it waits for a connection', async () => {
    const participant = await startParticipant();
    const gw = (current.gw = await startGateway(participant.url, {
      upstream: { connections: 1, bufferBodyBytes: 1024 },
      limits: { bodyBytes: 32 * 1024 },
    }));
    const token = await gw.issuer.mint();
    // The only connection is busy with an upload the test finishes last.
    const holding = openUpload(gw.url, token, 4096);
    holding.send(randomBytes(2048));
    await expect.poll(() => participant.uploads().length, { timeout: 3_000 }).toBe(1);
    const chunked = openUpload(gw.url, await gw.issuer.mint({ sub: 'bob' }));
    chunked.send(randomBytes(2048)); // past the buffer: streamed, and waits for the connection
    await expect.poll(() => gauge(gw, 'ledger_gateway_upstream_calls_queued'), { timeout: 2_000 }).toBe(1);
    chunked.send(randomBytes(64 * 1024)); // past the limit while it waits
    const answer = await chunked.answer;
    expect(answer?.status).toBe(413);
    expect(JSON.parse(answer!.body)).toMatchObject({ code: 'GATEWAY_REQUEST_TOO_LARGE' });
    expect(await gauge(gw, 'ledger_gateway_upstream_calls_queued')).toBe(0);
    holding.send(randomBytes(2048));
    expect((await holding.answer)?.status).toBe(200);
    expect(participant.uploads()).toHaveLength(1); // the chunked one never
  });

  it('counts a client that leaves while its body is read whole as gone (499), sending nothing upstream', async () => {
    const participant = await startParticipant();
    const gw = (current.gw = await startGateway(participant.url));
    const leaving = openUpload(gw.url, await gw.issuer.mint(), 4096);
    leaving.send(randomBytes(1000));
    await eventually(async () => (await gauge(gw, 'ledger_gateway_body_buffer_bytes')) > 0, 'its body is being read');
    leaving.socket.destroy();
    await expect
      .poll(async () => gw.registry.getSingleMetricAsString('ledger_gateway_requests_total'), { timeout: 2_000 })
      .toMatch(/operation="postV2Dars",method="POST",status="499",error_code="CLIENT_CLOSED_REQUEST"\} 1/);
    expect(participant.uploads()).toHaveLength(0);
    expect(await gauge(gw, 'ledger_gateway_upstream_calls_in_flight')).toBe(0);
  });
});
