// Hostile HTTP: each case gets a clear answer or a closed connection, never reaches the
// participant, never crashes the gateway; the next request is served.
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { JS_CANTON_ERROR_KEYS } from '../helpers/canton-error-shape.js';
import { gatewayForFile } from '../helpers/file-gateway.js';

const running = gatewayForFile({ server: { headersTimeoutMs: 1_000, requestTimeoutMs: 2_000, maxHeaderBytes: 8_192 } });

interface RawAnswer {
  status: number | undefined;
  head: string;
  body: string;
  closedAfterMs: number;
}

/** Writes raw bytes (optionally in timed pieces) and reads until the gateway closes. */
function exchange(pieces: Array<string | Buffer | { waitMs: number }>, timeoutMs = 10_000): Promise<RawAnswer> {
  const { hostname, port } = new URL(running.gw.url);
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = net.connect(Number(port), hostname);
    let data = '';
    socket.on('data', (chunk) => {
      data += chunk.toString('latin1');
    });
    socket.on('error', () => {});
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`connection still open after ${timeoutMs} ms; received: ${data.slice(0, 200)}`));
    }, timeoutMs);
    socket.on('close', () => {
      clearTimeout(timer);
      const split = data.indexOf('\r\n\r\n');
      const head = split === -1 ? data : data.slice(0, split);
      const status = /^HTTP\/1\.1 (\d{3})/.exec(head)?.[1];
      resolve({
        status: status === undefined ? undefined : Number(status),
        head,
        body: split === -1 ? '' : data.slice(split + 4),
        closedAfterMs: Date.now() - started,
      });
    });
    const writePieces = async () => {
      for (const piece of pieces) {
        if (socket.destroyed) return;
        if (typeof piece === 'object' && 'waitMs' in piece) await new Promise((r) => setTimeout(r, piece.waitMs));
        else socket.write(piece);
      }
    };
    socket.on('connect', () => void writePieces());
  });
}

const auth = () => `Authorization: ${running.gw.auth().authorization}\r\n`;

async function stillServes(): Promise<void> {
  const response = await fetch(`${running.gw.url}/v2/state/ledger-end`, { headers: running.gw.auth() });
  expect(response.status).toBe(200);
}

describe('hostile HTTP', () => {
  it("huge headers: 431 in Canton's shape", async () => {
    const before = running.upstream.requests.length;
    const answer = await exchange([
      `GET /v2/state/ledger-end HTTP/1.1\r\nHost: gw\r\n${auth()}X-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    ]);
    expect(answer.status).toBe(431);
    expect(JSON.parse(answer.body)).toMatchObject({ code: 'GATEWAY_HEADERS_TOO_LARGE', grpcCodeValue: 3 });
    expect(running.upstream.requests.length).toBe(before);
    await stillServes();
    const metrics = await running.gw.registry.getSingleMetricAsString('ledger_gateway_requests_total');
    expect(metrics).toMatch(/operation="unknown",method="_OTHER",status="431",error_code="GATEWAY_HEADERS_TOO_LARGE"/);
  });

  it('a very long URL: 431', async () => {
    const answer = await exchange([`GET /v2/parties/${'p'.repeat(30_000)} HTTP/1.1\r\nHost: gw\r\n${auth()}\r\n`]);
    expect(answer.status).toBe(431);
    await stillServes();
  });

  it('duplicate, conflicting Content-Length: 400, not forwarded', async () => {
    const before = running.upstream.requests.length;
    const answer = await exchange([
      `POST /v2/commands/async/submit HTTP/1.1\r\nHost: gw\r\n${auth()}Content-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 30\r\n\r\n{}`,
    ]);
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toMatchObject({ code: 'GATEWAY_MALFORMED_REQUEST' });
    expect(running.upstream.requests.length).toBe(before);
  });

  it('Transfer-Encoding with Content-Length (request smuggling): 400, not forwarded', async () => {
    const before = running.upstream.requests.length;
    const smuggled = 'GET /v2/users HTTP/1.1\r\nHost: gw\r\n\r\n';
    const answer = await exchange([
      `POST /v2/commands/async/submit HTTP/1.1\r\nHost: gw\r\n${auth()}Content-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${smuggled}`,
    ]);
    expect(answer.status).toBe(400);
    expect(running.upstream.requests.length).toBe(before);
    expect(running.upstream.requests.some((r) => r.url === '/v2/users')).toBe(false);
  });

  it('invalid chunking: the call fails, the participant never gets a whole request, the gateway goes on', async () => {
    const before = running.upstream.requests.length;
    const answer = await exchange([
      `POST /v2/commands/async/submit HTTP/1.1\r\nHost: gw\r\n${auth()}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
    ]);
    expect(answer.status === undefined || answer.status === 400).toBe(true);
    expect(running.upstream.requests.slice(before).every((r) => r.body.toString() !== '{}')).toBe(true);
    await stillServes();
  });

  it('slow-loris headers: the connection is closed near headersTimeoutMs', async () => {
    const pieces: Array<string | { waitMs: number }> = ['GET /v2/state/ledger-end HTTP/1.1\r\n'];
    for (let i = 0; i < 20; i++) pieces.push({ waitMs: 300 }, `X-Slow-${i}: 1\r\n`);
    const answer = await exchange(pieces);
    expect(answer.closedAfterMs).toBeLessThan(4_500);
    if (answer.status !== undefined) expect(answer.status).toBe(408);
    await stillServes();
  });

  it('slow-loris body: the connection is closed near requestTimeoutMs', async () => {
    const pieces: Array<string | { waitMs: number }> = [
      `POST /v2/commands/async/submit HTTP/1.1\r\nHost: gw\r\n${auth()}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{`,
    ];
    for (let i = 0; i < 30; i++) pieces.push({ waitMs: 300 }, ' ');
    const answer = await exchange(pieces);
    expect(answer.closedAfterMs).toBeLessThan(6_000);
    await stillServes();
  });

  it('a refusal before the body was read closes the connection: a body that then fails to parse draws no second answer', async () => {
    const answer = await exchange([
      'POST /v2/commands/async/submit HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n', // no token: 401
      { waitMs: 500 },
      'zz\r\n{}\r\n0\r\n\r\n', // not a chunk size
    ]);
    expect(answer.status).toBe(401);
    expect(answer.head).toMatch(/\r\nconnection: close/i);
    expect(answer.body.match(/HTTP\/1\.1 /g)).toBeNull(); // one answer only
    await stillServes();
  });

  it('absolute-form URL: refused, never forwarded to the named host', async () => {
    const before = running.upstream.requests.length;
    const answer = await exchange([
      `GET http://evil.example/v2/state/ledger-end HTTP/1.1\r\nHost: evil.example\r\n${auth()}Connection: close\r\n\r\n`,
    ]);
    expect([400, 404]).toContain(answer.status);
    expect(JSON.parse(answer.body).code).toMatch(/^GATEWAY_(INVALID_PATH|ROUTE_NOT_EXPOSED)$/);
    expect(running.upstream.requests.length).toBe(before);
  });

  it("CONNECT: refused in Canton's shape, no tunnel", async () => {
    const before = running.upstream.requests.length;
    const answer = await exchange([
      `CONNECT 127.0.0.1:${running.upstream.port} HTTP/1.1\r\nHost: 127.0.0.1:${running.upstream.port}\r\n${auth()}\r\n`,
    ]);
    expect(answer.status).toBe(404);
    expect(answer.head).toMatch(/\r\nX-Request-Id: [0-9a-f-]{36}\r\n/i);
    expect(Object.keys(JSON.parse(answer.body) as object).sort()).toEqual(JS_CANTON_ERROR_KEYS);
    expect(JSON.parse(answer.body)).toMatchObject({ code: 'GATEWAY_ROUTE_NOT_EXPOSED' });
    expect(running.upstream.requests.length).toBe(before);
    await stillServes();
  });

  it("an Expect other than 100-continue: 417 in Canton's shape, connection closed, not forwarded", async () => {
    const before = running.upstream.requests.length;
    const answer = await exchange([
      `POST /v2/parties HTTP/1.1\r\nHost: gw\r\n${auth()}Expect: 200-ok\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`,
    ]);
    expect(answer.status).toBe(417);
    expect(answer.head).toMatch(/\r\nconnection: close\r\n/i);
    expect(Object.keys(JSON.parse(answer.body) as object).sort()).toEqual(JS_CANTON_ERROR_KEYS);
    expect(JSON.parse(answer.body)).toMatchObject({ code: 'GATEWAY_EXPECTATION_FAILED' });
    expect(running.upstream.requests.length).toBe(before);
    await stillServes();
  });

  it("unknown and unserved methods: refused in Canton's shape", async () => {
    for (const method of ['PROPFIND', 'TRACE', 'BREW']) {
      const answer = await exchange([
        `${method} /v2/version HTTP/1.1\r\nHost: gw\r\n${auth()}Connection: close\r\n\r\n`,
      ]);
      expect(answer.status, method).toBeGreaterThanOrEqual(400);
      expect(answer.status, method).toBeLessThan(500);
      if (answer.body) expect(JSON.parse(answer.body).code, method).toMatch(/^GATEWAY_/);
    }
    expect(running.upstream.requests.filter((r) => r.method !== 'GET' && r.method !== 'POST')).toHaveLength(0);
    await stillServes();
  });
});

describe('faulty framing (RFC 9112)', () => {
  it("an HTTP/1.1 request without Host: 400 in Canton's shape, connection closed, not forwarded", async () => {
    const before = running.upstream.requests.length;
    const answer = await exchange([`GET /v2/state/ledger-end HTTP/1.1\r\n${auth()}\r\n`]);
    expect(answer.status).toBe(400);
    expect(answer.head).toMatch(/\r\nconnection: close/i);
    expect(answer.head).toMatch(/\r\nx-request-id: [0-9a-f-]{36}/i);
    expect(JSON.parse(answer.body)).toMatchObject({
      code: 'GATEWAY_MALFORMED_REQUEST',
      cause: 'The request is malformed: an HTTP/1.1 request without a Host header.',
    });
    expect(running.upstream.requests.length).toBe(before);
    // HTTP/1.0 needs none.
    const old = await exchange([`GET /v2/state/ledger-end HTTP/1.0\r\n${auth()}\r\n`]);
    expect(old.status).toBe(200);
    await stillServes();
  });

  it('an HTTP/1.0 request with Transfer-Encoding: 400, connection closed, the pipelined rest never served', async () => {
    const before = running.upstream.requests.length;
    const answer = await exchange([
      `POST /v2/state/ledger-end HTTP/1.0\r\nHost: gw\r\n${auth()}Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`,
      `GET /v2/state/ledger-end HTTP/1.1\r\nHost: gw\r\n${auth()}\r\n`,
    ]);
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toMatchObject({
      code: 'GATEWAY_MALFORMED_REQUEST',
      cause: 'The request is malformed: an HTTP/1.0 request with Transfer-Encoding.',
    });
    expect(answer.body.match(/HTTP\/1\.1 /g)).toBeNull(); // one answer only
    expect(running.upstream.requests.length).toBe(before);
    await stillServes();
  });

  it('two Host lines (any case): 400, connection closed, not forwarded; one Host line is served', async () => {
    const before = running.upstream.requests.length;
    for (const second of ['Host: other.example', 'HOST: other.example', 'host: gw']) {
      const answer = await exchange([`GET /v2/state/ledger-end HTTP/1.1\r\nHost: gw\r\n${second}\r\n${auth()}\r\n`]);
      expect(answer.status, second).toBe(400);
      expect(answer.head, second).toMatch(/\r\nconnection: close/i);
      expect(JSON.parse(answer.body), second).toMatchObject({
        code: 'GATEWAY_MALFORMED_REQUEST',
        cause: 'The request is malformed: a request with more than one Host header.',
      });
    }
    // HTTP/1.0 too: the rule is about the field, not the version.
    const old = await exchange([
      `GET /v2/state/ledger-end HTTP/1.0\r\nhost: gw\r\nHost: other.example\r\n${auth()}\r\n`,
    ]);
    expect(old.status).toBe(400);
    expect(running.upstream.requests.length).toBe(before);
    const one = await exchange([`GET /v2/state/ledger-end HTTP/1.1\r\nhOsT: gw\r\n${auth()}Connection: close\r\n\r\n`]);
    expect(one.status).toBe(200);
    await stillServes();
  });

  it('a Connection header naming Authorization: 400, not forwarded (the participant would not get the verified token)', async () => {
    const before = running.upstream.requests.length;
    for (const connection of ['Authorization, close', 'close, authorization', 'close,  AUTHORIZATION ']) {
      // close: the helper reads until the connection ends
      const answer = await exchange([
        `GET /v2/state/ledger-end HTTP/1.1\r\nHost: gw\r\nConnection: ${connection}\r\n${auth()}\r\n`,
      ]);
      expect(answer.status, connection).toBe(400);
      expect(JSON.parse(answer.body), connection).toMatchObject({
        code: 'GATEWAY_MALFORMED_REQUEST',
        cause:
          'The request is malformed: the Connection header names authorization, which carries the credential the gateway verifies for the participant.',
      });
    }
    expect(running.upstream.requests.length).toBe(before);
    // Other fields named there are dropped on the way, as a proxy must (RFC 9110 §7.6.1).
    const served = await exchange([
      `GET /v2/state/ledger-end HTTP/1.1\r\nHost: gw\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\n${auth()}\r\n`,
    ]);
    expect(served.status).toBe(200);
    expect(running.upstream.requests.at(-1)!.headers['x-hop']).toBeUndefined();
    expect(running.upstream.requests.at(-1)!.headers.authorization).toMatch(/^Bearer /);
  });

  it('faulty framing on a target that does not decode (/v2/%zz) is judged as framing: connection closed, nothing pipelined served', async () => {
    const before = running.upstream.requests.length;
    for (const head of [
      `POST /v2/%zz HTTP/1.0\r\nHost: gw\r\n${auth()}Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
      `GET /v2/%zz HTTP/1.1\r\nHost: gw\r\nHost: other.example\r\n${auth()}\r\n`,
    ]) {
      const answer = await exchange([head, `GET /v2/state/ledger-end HTTP/1.1\r\nHost: gw\r\n${auth()}\r\n`]);
      expect(answer.status, head).toBe(400);
      expect(answer.head, head).toMatch(/\r\nconnection: close/i);
      expect(JSON.parse(answer.body), head).toMatchObject({ code: 'GATEWAY_MALFORMED_REQUEST' });
    }
    expect(running.upstream.requests.length).toBe(before);
    await stillServes();
  });

  it('a WebSocket upgrade with two Host lines: refused, never tunnelled', async () => {
    const answer = await exchange([
      `GET /v2/updates HTTP/1.1\r\nHost: gw\r\nHost: other.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${auth()}\r\n`,
    ]);
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toMatchObject({
      code: 'GATEWAY_MALFORMED_REQUEST',
      cause: 'The request is malformed: a request with more than one Host header.',
    });
  });

  it('a WebSocket upgrade without Host: refused the same way, never tunnelled', async () => {
    const answer = await exchange([
      `GET /v2/updates HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${auth()}\r\n`,
    ]);
    expect(answer.status).toBe(400);
    expect(answer.head.match(/\r\nconnection:/gi)).toHaveLength(1);
    expect(JSON.parse(answer.body)).toMatchObject({ code: 'GATEWAY_MALFORMED_REQUEST' });
  });
});
