// Upstream faults: every case ends within its bound with a coded error (or, for an answer already
// under way, a cleanly aborted one), and the next request is served normally.
import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { gauge, startGateway, type RunningGateway } from '../helpers/gateway.js';
import { createTestIssuer, TEST_ISSUER, TEST_PARTICIPANT } from '../helpers/tokens.js';
import { startJwksServer, type JwksServer } from '../auth/support/jwks-server.js';
import { READINESS_USER_AGENT } from '../../src/proxy/upstream-probe.js';
import {
  answerJson,
  startRecordingUpstream,
  type RecordingUpstream,
  type UpstreamHandler,
} from '../helpers/recording-upstream.js';
import { eventually } from '../helpers/eventually.js';

let upstream: RecordingUpstream | undefined;
let gw: RunningGateway | undefined;
let jwks: JwksServer | undefined;
const servers: net.Server[] = [];
afterEach(async () => {
  await gw?.close();
  await upstream?.close();
  await jwks?.close();
  jwks = undefined;
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
  gw = undefined;
  upstream = undefined;
});

async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** A TCP server that answers each connection with `behaviour` (raw bytes, stalls, resets). */
async function rawUpstream(behaviour: (socket: net.Socket) => void): Promise<string> {
  const server = net.createServer((socket) => {
    socket.on('error', () => {});
    socket.once('data', () => behaviour(socket));
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}

async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = Date.now();
  const value = await work();
  return { value, ms: Date.now() - started };
}

/** Reads a whole answer, reporting whether its body was cut. */
async function readAll(response: Response): Promise<{ text: string; aborted: boolean }> {
  try {
    return { text: await response.text(), aborted: false };
  } catch {
    return { text: '', aborted: true };
  }
}

describe('upstream faults', () => {
  it('down at start: 503 and /readyz 503, then serves once the participant comes up', async () => {
    const port = await freePort();
    gw = await startGateway(`http://127.0.0.1:${port}`, { upstream: { readinessIntervalMs: 200 } });
    const refused = await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() });
    expect(refused.status).toBe(503);
    expect(await refused.json()).toMatchObject({ code: 'GATEWAY_UPSTREAM_UNAVAILABLE' });
    expect((await fetch(`${gw.adminUrl}/readyz`)).status).toBe(503);

    const server = http.createServer(
      (request, response) => void answerJson(200, { offset: 3 })(request as never, response),
    );
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    await expect.poll(async () => (await fetch(`${gw!.adminUrl}/readyz`)).status, { timeout: 5_000 }).toBe(200);
    const served = await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() });
    expect(served.status).toBe(200);
    expect(await served.json()).toEqual({ offset: 3 });
  });

  it('goes down mid-traffic and comes back: 503 while down, served after', async () => {
    upstream = await startRecordingUpstream(answerJson(200, { offset: 1 }));
    const port = upstream.port;
    gw = await startGateway(upstream.url);
    expect((await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() })).status).toBe(200);
    await upstream.close();
    upstream = undefined;
    const down = await timed(() => fetch(`${gw!.url}/v2/state/ledger-end`, { headers: gw!.auth() }));
    expect(down.value.status).toBe(503);
    expect(down.ms).toBeLessThan(6_000);
    const server = http.createServer(
      (request, response) => void answerJson(200, { offset: 2 })(request as never, response),
    );
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    const back = await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() });
    expect(back.status).toBe(200);
    expect(await back.json()).toEqual({ offset: 2 });
  });

  it('answers headers then stalls the body: the client gets the headers, then a cut answer within the bound', async () => {
    const url = await rawUpstream((socket) =>
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"partial":'),
    );
    gw = await startGateway(url, { upstream: { timeoutMs: 500 } });
    const { value, ms } = await timed(async () => {
      const response = await fetch(`${gw!.url}/v2/state/ledger-end`, { headers: gw!.auth() });
      return { status: response.status, ...(await readAll(response)) };
    });
    expect(value.status).toBe(200);
    expect(value.aborted).toBe(true);
    expect(ms).toBeLessThan(5_000);
  });

  it('resets the connection mid-answer: the client sees a cut answer, never a wrong whole one', async () => {
    const url = await rawUpstream((socket) => {
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"partial":');
      setTimeout(() => socket.resetAndDestroy(), 50);
    });
    gw = await startGateway(url);
    const response = await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() });
    expect((await readAll(response)).aborted).toBe(true);
  });

  it('resets the connection before answering: 503', async () => {
    const url = await rawUpstream((socket) => socket.resetAndDestroy());
    gw = await startGateway(url);
    const response = await fetch(`${gw.url}/v2/commands/async/submit`, {
      method: 'POST',
      body: '{}',
      headers: gw.auth({ 'content-type': 'application/json' }),
    });
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({ code: 'GATEWAY_UPSTREAM_UNAVAILABLE', grpcCodeValue: 14 });
  });

  it('answers garbage that is not HTTP: 503, no internals in the body', async () => {
    const url = await rawUpstream((socket) => socket.end('SSH-2.0-OpenSSH_9.2\r\n\u0000\u0001garbage\r\n\r\n'));
    gw = await startGateway(url);
    const response = await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() });
    expect(response.status).toBe(503);
    const text = await response.text();
    expect(text).not.toMatch(/HPE_|SSH|garbage|stack/i);
    expect(JSON.parse(text)).toMatchObject({ code: 'GATEWAY_UPSTREAM_UNAVAILABLE' });
  });

  it('closes keep-alive connections between requests: every request is still served', async () => {
    // The participant advertises keep-alive, then drops each connection a moment after answering,
    // racing the gateway's reuse of it.
    const server = http.createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end('{"ok":true}', () => setTimeout(() => request.socket.destroy(), Math.random() * 12));
      });
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    gw = await startGateway(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}`);
    const answers: Array<{ get: boolean; status: number; code?: string }> = [];
    for (let i = 0; i < 60; i++) {
      const get = i % 2 === 0;
      const response = await fetch(`${gw.url}/v2/${get ? 'state/ledger-end' : 'commands/async/submit'}`, {
        method: get ? 'GET' : 'POST',
        headers: gw.auth(get ? {} : { 'content-type': 'application/json' }),
        body: get ? undefined : '{}',
      });
      const body = (await response.json()) as { code?: string };
      answers.push({ get, status: response.status, code: body.code });
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 12));
    }
    // A bodiless GET lost on a closed connection is sent again: always served. A POST is never
    // resent (it may have reached the participant): at worst a coded, retryable 503.
    expect(answers.filter((a) => a.get).map((a) => a.status)).toEqual(answers.filter((a) => a.get).map(() => 200));
    for (const answer of answers.filter((a) => !a.get && a.status !== 200)) {
      expect(answer).toMatchObject({ status: 503, code: 'GATEWAY_UPSTREAM_UNAVAILABLE' });
    }
    expect(answers.filter((a) => a.status === 200).length).toBeGreaterThan(40);
  });

  it('delivers a completed answer whole, however large', async () => {
    const big = JSON.stringify({
      events: Array.from({ length: 20_000 }, (_, i) => ({
        offset: i,
        contractId: `00${i.toString(16).padStart(64, 'a')}`,
      })),
    });
    upstream = await startRecordingUpstream(answerJson(200, big));
    gw = await startGateway(upstream.url);
    const response = await fetch(`${gw.url}/v2/state/active-contracts`, {
      method: 'POST',
      body: '{}',
      headers: gw.auth({ 'content-type': 'application/json' }),
    });
    expect(await response.text()).toBe(big);
  });

  it('holds the participant back while the client reads slowly: the answer is not piled up in the gateway', async () => {
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const total = 1024 * chunk.length; // 64 MiB
    let sent = 0;
    upstream = await startRecordingUpstream(async (request, response) => {
      if (request.url !== '/v2/state/ledger-end') return answerJson(200, { version: '3.4.12' })(request, response); // the readiness probe
      response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(total) });
      while (sent < total) {
        sent += chunk.length;
        if (!response.write(chunk)) await new Promise((resolve) => response.once('drain', resolve));
      }
      response.end();
    });
    gw = await startGateway(upstream.url);
    const { port } = new URL(gw.url);
    const { sentWhilePaused, received } = await new Promise<{ sentWhilePaused: number; received: number }>(
      (resolve, reject) => {
        const request = http.get(
          { host: '127.0.0.1', port, path: '/v2/state/ledger-end', headers: gw!.auth(), agent: false },
          (response) => {
            response.pause(); // a client that does not read for a while
            setTimeout(() => {
              const sentWhilePaused = sent;
              let bytes = 0;
              response.on('data', (data: Buffer) => {
                bytes += data.length;
              });
              response.on('end', () => resolve({ sentWhilePaused, received: bytes }));
              response.resume();
            }, 500);
          },
        );
        request.on('error', reject);
      },
    );
    // Only the sockets' buffers lie in between; a gateway that read on regardless would have taken it all.
    expect(sentWhilePaused).toBeLessThan(total / 2);
    expect(received).toBe(total);
  });
});

/**
 * An upstream that keeps `path` busy: its answer trickles out one '.' every 100 ms, `chunks` in
 * all (never silent long enough for a timeout between chunks); anything else gets a small JSON.
 */
function trickling(path: string, chunks: number): UpstreamHandler {
  return async (request, response) => {
    if (request.url !== path || request.headers['user-agent'] === READINESS_USER_AGENT)
      return answerJson(200, { parties: [] })(request, response);
    response.writeHead(200, { 'content-type': 'text/plain' });
    for (let i = 0; i < chunks; i++) {
      response.write('.');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    response.end();
  };
}

describe('bounds on the client side of a call', () => {
  /** A raw keep-alive client: everything it reads, and when its connection closes. */
  function rawClient(port: number) {
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    socket.on('data', (data: Buffer) => {
      text += data.toString('latin1');
    });
    socket.on('error', () => undefined); // writes after the gateway closed: expected
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    return { socket, closed, text: () => text };
  }

  it("passes on the participant's early refusal of an upload and closes the connection: the rest of the body is never read as a next request", async () => {
    // The participant refuses as soon as it has the head (as pekko-http does for a request it will not
    // read), before the client has sent its body.
    const server = http.createServer((request, response) => {
      if (request.url === '/v2/version') return void response.end('{}');
      response.writeHead(413, { 'content-type': 'application/json' });
      response.end('{"code":"TOO_BIG"}');
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    gw = await startGateway(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, {
      server: { requestTimeoutMs: 1_500 },
    });
    const client = rawClient(Number(new URL(gw.url).port));
    const auth = Object.entries(gw.auth())
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('');
    const length = 300 * 1024;
    client.socket.write(
      `POST /v2/dars HTTP/1.1\r\nHost: gw\r\n${auth}Content-Type: application/octet-stream\r\nContent-Length: ${length}\r\n\r\n`,
    );
    client.socket.write(Buffer.alloc(64 * 1024, 'a'));
    await expect.poll(() => client.text(), { timeout: 5_000 }).toContain('TOO_BIG');
    // The client finishes its body and sends its next request on the same connection.
    client.socket.write(Buffer.alloc(length - 64 * 1024, 'a'));
    client.socket.write(`GET /v2/version HTTP/1.1\r\nHost: gw\r\n${auth}\r\n`);
    await Promise.race([client.closed, new Promise((resolve) => setTimeout(resolve, 4_000))]);
    client.socket.destroy();
    const answers = client.text().match(/^HTTP\/1\.1 \d{3}/gm);
    // One answer, saying the connection closes; not a second one (a 408 for a request that never
    // ends, once server.requestTimeoutMs has passed, as the client's next request waits).
    expect(answers).toEqual(['HTTP/1.1 413']);
    expect(client.text()).toMatch(/\r\nconnection: close\r\n/i);
  });

  it("ends an answer whose client stopped reading once the call's timeout passes, freeing the participant's connection", async () => {
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const total = 1024 * chunk.length; // 64 MiB: far more than the sockets' buffers hold
    upstream = await startRecordingUpstream(async (request, response) => {
      if (request.url !== '/v2/state/ledger-end') return answerJson(200, { version: '3.4.12' })(request, response);
      response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(total) });
      response.on('error', () => undefined);
      for (let sent = 0; sent < total && !response.destroyed; sent += chunk.length) {
        if (!response.write(chunk))
          // Whichever comes first; both listeners go, or each wait would leave a 'close' one behind.
          await new Promise<void>((resolve) => {
            const done = () => {
              response.off('drain', done).off('close', done);
              resolve();
            };
            response.once('drain', done).once('close', done);
          });
      }
      response.end();
    });
    // The stalled call's timeout is 500 ms; the next call's is longer, so that it waits in the queue
    // for the connection the cut frees (with 500 ms it could reach its own deadline first: a 503).
    gw = await startGateway(upstream.url, {
      upstream: { connections: 1, timeoutMs: 5_000, operationTimeoutsMs: { 'getV2StateLedger-end': 500 } },
    });
    const client = rawClient(Number(new URL(gw.url).port));
    client.socket.pause(); // never reads
    client.socket.write(
      `GET /v2/state/ledger-end HTTP/1.1\r\nHost: gw\r\n${Object.entries(gw.auth())
        .map(([n, v]) => `${n}: ${v}\r\n`)
        .join('')}\r\n`,
    );
    await expect.poll(() => upstream!.requests.length, { timeout: 5_000 }).toBe(1);
    // The one upstream connection is free again: the next call is served.
    const started = Date.now();
    const next = await fetch(`${gw.url}/v2/parties`, { headers: gw.auth(), signal: AbortSignal.timeout(5_000) });
    expect(next.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(2_500); // freed by the cut after 500 ms, not by the stalled call's 5 s
    await next.arrayBuffer();
    client.socket.destroy();
    const metrics = await gw.registry.getSingleMetricAsString('ledger_gateway_requests_total');
    expect(metrics).toMatch(
      /operation="getV2StateLedger-end",method="GET",status="200",error_code="CLIENT_STALLED"\} 1/,
    );
  });

  it("a version fetch the participant never answers: 504 in Canton's shape; one queued behind a busy connection: 503 within its timeout", async () => {
    const busy = trickling('/v2/state/ledger-end', 30); // holds the only connection for 3 s
    upstream = await startRecordingUpstream((request, response) => {
      if (request.url === '/v2/version' && request.headers['user-agent'] !== READINESS_USER_AGENT) return; // never answers
      return busy(request, response);
    });
    gw = await startGateway(upstream.url, { upstream: { connections: 1, timeoutMs: 1_000 } });
    const silent = await fetch(`${gw.url}/v2/version`, { headers: gw.auth(), signal: AbortSignal.timeout(5_000) });
    expect(silent.status).toBe(504);
    expect(await silent.json()).toMatchObject({ code: 'GATEWAY_UPSTREAM_TIMEOUT', grpcCodeValue: 4 });

    const holding = fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() }).then((response) => response.text());
    await expect
      .poll(() => upstream!.requests.filter((request) => request.url === '/v2/state/ledger-end').length, {
        timeout: 5_000,
      })
      .toBe(1);
    const started = Date.now();
    const queued = await fetch(`${gw.url}/v2/version`, { headers: gw.auth(), signal: AbortSignal.timeout(5_000) });
    expect(queued.status).toBe(503);
    expect(await queued.json()).toMatchObject({ code: 'GATEWAY_UPSTREAM_UNAVAILABLE' });
    expect(Date.now() - started).toBeLessThan(2_500); // its own timeout (1 s), not the 3 s the connection stays busy
    expect(await holding).toBe('.'.repeat(30));
    expect(upstream.requests.filter((request) => request.url === '/v2/version')).toHaveLength(1); // the queued fetch was never sent
  });

  it('a queued call past its deadline is answered 503 and never sent, even when a connection frees before the sweep runs', async () => {
    let releaseHeld: () => void = () => undefined;
    upstream = await startRecordingUpstream(async (request, response) => {
      if (request.url === '/v2/state/ledger-end')
        await new Promise<void>((resolve) => {
          releaseHeld = resolve;
        });
      void answerJson(200, { ok: true })(request, response);
    });
    // The held call has time; the queued one 500 ms.
    gw = await startGateway(upstream.url, {
      upstream: { connections: 1, timeoutMs: 5_000, operationTimeoutsMs: { getV2Parties: 500 } },
    });
    for (let round = 1; round <= 5; round++) {
      const held = fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() });
      await expect.poll(() => upstream!.requests.length, { timeout: 5_000 }).toBe(round);
      const queued = fetch(`${gw.url}/v2/parties`, { headers: gw.auth() });
      await new Promise((resolve) => setTimeout(resolve, 520)); // its deadline has just passed; the 100 ms sweep may not have run
      releaseHeld();
      expect((await queued).status).toBe(503);
      expect((await held).status).toBe(200);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(upstream.requests.filter((request) => request.url === '/v2/parties')).toHaveLength(0);
  });

  it('a queued call whose client leaves is dropped: never sent once a connection frees', async () => {
    upstream = await startRecordingUpstream(trickling('/v2/state/ledger-end', 10));
    gw = await startGateway(upstream.url, { upstream: { connections: 1, timeoutMs: 5_000 } });
    const holding = fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() }).then((response) => response.text());
    await expect.poll(() => upstream!.requests.length, { timeout: 5_000 }).toBe(1);
    const leaving = new AbortController();
    const left = fetch(`${gw.url}/v2/parties`, { headers: gw.auth(), signal: leaving.signal }).catch(
      (error: Error) => error.name,
    );
    await eventually(
      async () => (await gauge(gw!, 'ledger_gateway_upstream_calls_queued')) === 1,
      'the call is queued',
    );
    leaving.abort();
    expect(await left).toBe('AbortError');
    expect(await holding).toBe('.'.repeat(10));
    const next = await fetch(`${gw.url}/v2/parties`, { headers: gw.auth() });
    expect(next.status).toBe(200);
    expect(upstream.requests.map((request) => request.url)).toEqual(['/v2/state/ledger-end', '/v2/parties']);
    const metrics = await gw.registry.getSingleMetricAsString('ledger_gateway_requests_total');
    expect(metrics).toMatch(
      /operation="getV2Parties",method="GET",status="499",error_code="CLIENT_CLOSED_REQUEST"\} 1/,
    );
  });

  it("bounds the wait for a free upstream connection by the call's timeout: 503, and the call is never sent later", async () => {
    upstream = await startRecordingUpstream(trickling('/v2/state/ledger-end', 20)); // busy for 2 s
    gw = await startGateway(upstream.url, { upstream: { connections: 1, timeoutMs: 500 } });
    let firstDone = false;
    const first = fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() }).then(async (response) => {
      const text = await response.text();
      firstDone = true;
      return { status: response.status, text };
    });
    await expect.poll(() => upstream!.requests.length, { timeout: 5_000 }).toBe(1);
    const waiting = fetch(`${gw.url}/v2/parties`, { headers: gw.auth(), signal: AbortSignal.timeout(5_000) });
    // While it waits, the pool gauges say so.
    await expect.poll(() => gauge(gw!, 'ledger_gateway_upstream_calls_queued'), { timeout: 400, interval: 20 }).toBe(1);
    expect(await gauge(gw, 'ledger_gateway_upstream_calls_in_flight')).toBe(1);
    const queued = await waiting;
    expect(firstDone).toBe(false); // answered while the only connection was still busy
    expect(await gauge(gw, 'ledger_gateway_upstream_calls_queued')).toBe(0);
    expect(queued.status).toBe(503);
    expect(await queued.json()).toMatchObject({ code: 'GATEWAY_UPSTREAM_UNAVAILABLE', retryInfo: '1 second' });
    expect(await first).toEqual({ status: 200, text: '.'.repeat(20) });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(upstream.requests.map((request) => request.url)).toEqual(['/v2/state/ledger-end']);
    expect(await gauge(gw, 'ledger_gateway_upstream_calls_in_flight')).toBe(0);
  });

  it('a call whose client left during an asynchronous stage (a key set refetch) is neither sent nor queued', async () => {
    // The gateway knows key 1; a token signed with key 2 makes it refetch the key set, which
    // answers after 600 ms. The client leaves at 200 ms, while every upstream connection is busy.
    const first = await createTestIssuer(TEST_ISSUER, 'key-1');
    const second = await createTestIssuer(TEST_ISSUER, 'key-2');
    jwks = await startJwksServer(first.issuerConfig.jwks.keys);
    upstream = await startRecordingUpstream(trickling('/v2/state/ledger-end', 20)); // busy for 2 s
    gw = await startGateway(upstream.url, {
      upstream: { connections: 1, timeoutMs: 5_000 },
      auth: {
        issuers: [{ issuer: TEST_ISSUER, jwksUrl: jwks.jwksUrl }],
        participantId: TEST_PARTICIPANT,
        keySets: { unknownKeyCooldownMs: 100 },
      },
    });
    await expect
      .poll(async () => (await fetch(`${gw!.adminUrl}/readyz`)).status, { timeout: 5_000, interval: 50 })
      .toBe(200);
    const holding = fetch(`${gw.url}/v2/state/ledger-end`, {
      headers: { authorization: `Bearer ${await first.mint()}` },
    }).then((response) => response.text());
    await expect.poll(() => upstream!.requests.length, { timeout: 5_000 }).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 150)); // past the refetch cooldown since the start's fetch
    jwks.setKeys([...first.issuerConfig.jwks.keys, ...second.issuerConfig.jwks.keys]);
    jwks.setBehaviour({ delayMs: 600 });
    const fetchesBefore = jwks.requests;
    const leaving = new AbortController();
    const left = fetch(`${gw.url}/v2/parties`, {
      headers: { authorization: `Bearer ${await second.mint()}` },
      signal: leaving.signal,
    }).catch((error: Error) => error.name);
    await expect.poll(() => jwks!.requests, { timeout: 1_000, interval: 10 }).toBe(fetchesBefore + 1); // the refetch is under way
    await new Promise((resolve) => setTimeout(resolve, 100));
    leaving.abort();
    expect(await left).toBe('AbortError');
    // The refetch answers (600 ms), the token verifies, the call reaches the forwarder with its client gone.
    await new Promise((resolve) => setTimeout(resolve, 800));
    expect(await gauge(gw, 'ledger_gateway_upstream_calls_queued')).toBe(0);
    expect(await gauge(gw, 'ledger_gateway_upstream_calls_in_flight')).toBe(1); // the holding call only
    expect(await holding).toBe('.'.repeat(20));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(upstream.requests.map((request) => request.url)).toEqual(['/v2/state/ledger-end']);
    expect(await gauge(gw, 'ledger_gateway_upstream_calls_in_flight')).toBe(0);
    const metrics = await gw.registry.getSingleMetricAsString('ledger_gateway_requests_total');
    expect(metrics).toMatch(
      /operation="getV2Parties",method="GET",status="499",error_code="CLIENT_CLOSED_REQUEST"\} 1/,
    );
  });
});
