// Pipelined calls (RFC 9112 §9.3.2) behind an answer that closes the connection are never sent to
// the participant: a client may retry them on a new connection, and a party allocation would run twice.
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { answerJson, startRecordingUpstream } from '../helpers/recording-upstream.js';
import { createTestIssuer } from '../helpers/tokens.js';

const current = perTest();

/** Writes `requests` at once on one connection; resolves with everything read until the gateway closes it (bounded). */
function pipelined(url: string, requests: string[]): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the connection was not closed within 5 s; read so far:\n${text}`));
    }, 5_000);
    socket.on('data', (data: Buffer) => (text += data.toString('latin1')));
    socket.on('error', () => undefined); // a reset after the answer: what was read is the result
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(text);
    });
    socket.write(requests.join(''));
  });
}

const allocate = (authorization: string) =>
  `POST /v2/parties HTTP/1.1\r\nHost: gw\r\nAuthorization: ${authorization}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`;

describe('pipelined calls behind a closing answer', () => {
  it('sends none of them upstream: behind a 401 without a token, and behind a 401 after a signature check', async () => {
    const upstream = (current.upstream = await startRecordingUpstream(answerJson(200, { partyDetails: {} })));
    const gw = (current.gw = await startGateway(upstream.url));
    const valid = gw.auth().authorization!;
    // Signed by another key under the same key id: refused once the signature is checked.
    const forged = `Bearer ${await (await createTestIssuer(undefined, gw.issuer.kid)).mint()}`;

    for (const refused of ['POST /v2/parties HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\n\r\n{}', allocate(forged)]) {
      const text = await pipelined(gw.url, [refused, allocate(valid), allocate(valid), allocate(valid)]);
      expect(text.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 401']);
      expect(text).toMatch(/\r\nconnection: close\r\n/i);
      expect(upstream.requests).toHaveLength(0);
    }

    // Behind an answer that keeps the connection, each pipelined call is served in its turn.
    const served = await pipelined(gw.url, [
      allocate(valid),
      allocate(valid),
      allocate(valid).replace('Host: gw\r\n', 'Host: gw\r\nConnection: close\r\n'),
    ]);
    expect(served.match(/HTTP\/1\.1 \d{3}/g), served).toEqual(['HTTP/1.1 200', 'HTTP/1.1 200', 'HTTP/1.1 200']);
    expect(upstream.requests).toHaveLength(3);
  });

  it('sends none of them upstream when the closing answer is given at once (a token the cache knows): behind a 401, a 404, a 400', async () => {
    const upstream = (current.upstream = await startRecordingUpstream(answerJson(200, { partyDetails: {} })));
    const gw = (current.gw = await startGateway(upstream.url));
    const valid = gw.auth().authorization!;
    // Warm: the token is verified and cached, so every stage of the calls behind answers synchronously.
    expect((await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() })).status).toBe(200);
    const before = upstream.requests.length;
    const behind = [allocate(valid).replace('/v2/parties', '/v2/parties?second'), allocate(valid)];
    const closing: Array<[string, string]> = [
      ['HTTP/1.1 401', 'POST /v2/parties HTTP/1.1\r\nHost: gw\r\nContent-Length: 2\r\n\r\n{}'],
      ['HTTP/1.1 404', allocate(valid).replace('/v2/parties', '/not-served')],
      ['HTTP/1.1 400', allocate(valid).replace('/v2/parties', '/v2/../v2/parties')],
    ];
    for (const [status, first] of closing) {
      const text = await pipelined(gw.url, [first, ...behind]);
      expect(text.match(/HTTP\/1\.1 \d{3}/g), text).toEqual([status]);
    }
    expect(upstream.requests.slice(before).map((request) => request.url)).toEqual([]);
  });

  it('answers a call that says Connection: close though bytes follow it, and runs none of them', async () => {
    const upstream = (current.upstream = await startRecordingUpstream(answerJson(200, { partyDetails: {} })));
    const gw = (current.gw = await startGateway(upstream.url));
    const valid = gw.auth().authorization!;
    expect((await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() })).status).toBe(200);
    const before = upstream.requests.length;
    const last = allocate(valid).replace('Host: gw\r\n', 'Host: gw\r\nConnection: close\r\n');
    const text = await pipelined(gw.url, [last, allocate(valid).replace('/v2/parties', '/v2/parties?second')]);
    // The participant ran the first call: its answer reaches the client, and nothing after it runs.
    expect(text.match(/HTTP\/1\.1 \d{3}/g), text).toEqual(['HTTP/1.1 200']);
    expect(text).toMatch(/\r\nconnection: close\r\n/i);
    expect(upstream.requests.slice(before).map((request) => request.url)).toEqual(['/v2/parties']);
  });
});

/** A metric's value in the gateway's registry. */
async function metric(
  gw: {
    registry: { getSingleMetric(name: string): { get(): Promise<{ values: Array<{ value: number }> }> } | undefined };
  },
  name: string,
): Promise<number> {
  return (await gw.registry.getSingleMetric(name)!.get()).values[0]?.value ?? 0;
}

/** Opens a connection and writes `requests` on it at once; `text()` is what was read so far. */
function openPipelined(url: string, requests: string[]) {
  const { hostname, port } = new URL(url);
  const socket = net.connect(Number(port), hostname);
  let text = '';
  socket.on('data', (data: Buffer) => (text += data.toString('latin1')));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.write(requests.join(''));
  return { socket, closed, text: () => text };
}

describe('what waits for its turn on a connection (limits.pipelining)', () => {
  it('stops reading a connection at maxRequests, and reads on as answers free places: every call served in order', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const upstream = (current.upstream = await startRecordingUpstream(async (request, response) => {
      await held;
      await answerJson(200, { n: request.url })(request, response);
    }));
    const gw = (current.gw = await startGateway(upstream.url, {
      limits: { pipelining: { maxRequests: 4, maxBytes: 65_536, totalRequests: 10_000, totalBytes: 8_388_608 } },
    }));
    const authorization = gw.auth().authorization!;
    const get = (n: number) =>
      `GET /v2/state/ledger-end?n=${n} HTTP/1.1\r\nHost: gw\r\nAuthorization: ${authorization}\r\n\r\n`;
    const head = get(100).length;
    const calls = Array.from({ length: 400 }, (_, n) => get(n)); // several reads' worth
    const connection = openPipelined(gw.url, calls);
    await new Promise((resolve) => setTimeout(resolve, 500));
    // The first call is held upstream: behind it, maxRequests and what the read in progress held (64 KiB).
    const waiting = await metric(gw, 'ledger_gateway_pipelined_requests_waiting');
    expect(waiting).toBeGreaterThanOrEqual(4);
    expect(waiting).toBeLessThanOrEqual(4 + Math.ceil(65_536 / head) + 1);
    expect(upstream.requests).toHaveLength(1);
    release();
    const deadline = Date.now() + 15_000;
    while ((connection.text().match(/HTTP\/1\.1 200/g) ?? []).length < calls.length && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 50));
    const order = [...connection.text().matchAll(/"n":"\/v2\/state\/ledger-end\?n=(\d+)"/g)].map((m) => Number(m[1]));
    expect(order).toEqual(calls.map((_, n) => n));
    expect(await metric(gw, 'ledger_gateway_pipelined_requests_waiting')).toBe(0);
    connection.socket.destroy();
  });

  it('closes a connection whose request would pass totalRequests, and counts it; the others are served', async () => {
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    const upstream = (current.upstream = await startRecordingUpstream(async (request, response) => {
      await held;
      await answerJson(200, {})(request, response);
    }));
    const gw = (current.gw = await startGateway(upstream.url, {
      limits: { pipelining: { maxRequests: 64, maxBytes: 65_536, totalRequests: 10, totalBytes: 8_388_608 } },
    }));
    const authorization = gw.auth().authorization!;
    const get = `GET /v2/state/ledger-end HTTP/1.1\r\nHost: gw\r\nAuthorization: ${authorization}\r\n\r\n`;
    const first = openPipelined(gw.url, Array(8).fill(get)); // 7 wait
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await metric(gw, 'ledger_gateway_pipelined_requests_waiting')).toBe(7);
    const second = openPipelined(gw.url, Array(8).fill(get)); // 3 more fit, the 4th passes 10: closed
    await second.closed;
    expect(await metric(gw, 'ledger_gateway_pipelined_connections_cut_total')).toBe(1);
    expect(await metric(gw, 'ledger_gateway_pipelined_requests_waiting')).toBe(7);
    expect(second.text()).toBe(''); // unanswered: its call in flight was cut
    release();
    const deadline = Date.now() + 10_000;
    while ((first.text().match(/HTTP\/1\.1 200/g) ?? []).length < 8 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 50));
    expect(first.text().match(/HTTP\/1\.1 200/g)).toHaveLength(8);
    first.socket.destroy();
  });
});
