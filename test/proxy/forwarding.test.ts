// Forwarding fidelity: what the participant receives and what the client gets back, byte for byte.
import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import {
  answerJson,
  headerValues,
  startRecordingUpstream,
  type RecordingUpstream,
} from '../helpers/recording-upstream.js';
import { JS_CANTON_ERROR_KEYS } from '../helpers/canton-error-shape.js';

let upstream: RecordingUpstream | undefined;
let gw: RunningGateway | undefined;
afterEach(async () => {
  await gw?.close();
  await upstream?.close();
  gw = undefined;
  upstream = undefined;
});

/** A raw HTTP/1.1 exchange, so the test controls every byte the gateway receives. */
function rawRequest(
  url: string,
  head: string,
  chunks: Array<string | Buffer> = [],
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => {
      socket.write(head);
      for (const chunk of chunks) socket.write(chunk);
    });
    const received: Buffer[] = [];
    socket.on('data', (data) => received.push(data));
    socket.on('error', reject);
    socket.on('close', () => {
      const all = Buffer.concat(received);
      const split = all.indexOf('\r\n\r\n');
      const headLines = all.subarray(0, split).toString('latin1').split('\r\n');
      const status = Number(headLines[0]!.split(' ')[1]);
      const headers: http.IncomingHttpHeaders = {};
      for (const line of headLines.slice(1)) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ status, headers, body: all.subarray(split + 4) });
    });
  });
}

describe('forwarding', () => {
  it('sends the method, raw path, query and body bytes unchanged', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url);
    const body = '{ "offset" : 9223372036854775807,\n  "updateFormat": {"x":1.50} }';
    const response = await fetch(`${gw.url}/v2/updates/update-by-id?limit=3&party=Alice%3A%3A1220ab&x=%2F%20`, {
      method: 'POST',
      body,
      headers: gw.auth({ 'content-type': 'application/json', 'x-custom': 'kept' }),
    });
    expect(response.status).toBe(200);
    expect(upstream.requests).toHaveLength(1);
    const received = upstream.requests[0]!;
    expect(received.method).toBe('POST');
    expect(received.url).toBe('/v2/updates/update-by-id?limit=3&party=Alice%3A%3A1220ab&x=%2F%20');
    expect(received.body.toString('utf8')).toBe(body);
    expect(received.headers['content-type']).toBe('application/json');
    expect(received.headers['x-custom']).toBe('kept');
    expect(received.headers['content-length']).toBe(String(Buffer.byteLength(body)));
  });

  it('keeps percent-encoding in path parameters, encoded slashes included', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url);
    const path = '/v2/parties/Alice%3A%3A1220%2Fab%20c';
    const response = await fetch(`${gw.url}${path}`, { headers: gw.auth() });
    expect(response.status).toBe(200);
    expect(upstream.requests[0]!.url).toBe(path);
  });

  it('forwards a JSON body on a GET (Canton has GET routes with bodies)', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url);
    const body = '{"packageMetadataFilter":{"packageIds":["abc"]}}';
    const response = await rawRequest(
      gw.url,
      `GET /v2/package-vetting HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n${authLines(gw)}Connection: close\r\n\r\n`,
      [body],
    );
    expect(response.status).toBe(200);
    expect(upstream.requests[0]!.method).toBe('GET');
    expect(upstream.requests[0]!.body.toString()).toBe(body);
  });

  it('drops hop-by-hop headers, those the Connection header names, and forged X-Forwarded-*', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url);
    const response = await rawRequest(
      gw.url,
      [
        'POST /v2/commands/async/submit HTTP/1.1',
        'Host: client.example',
        'Connection: close, X-Internal-Hop',
        'X-Internal-Hop: secret',
        'Keep-Alive: timeout=5',
        'TE: trailers',
        'Proxy-Authorization: Basic Zm9vOmJhcg==',
        'X-Forwarded-For: 6.6.6.6',
        'X-Forwarded-Host: evil.example',
        'Forwarded: for=6.6.6.6;host=evil.example',
        'X-Real-IP: 6.6.6.6',
        'X-Kept: 1',
        'X-Kept: 2',
        'Content-Type: application/json',
        'Content-Length: 2',
        authLines(gw).trimEnd(),
        '',
        '{}',
      ]
        .filter((line, index, all) => line !== '' || index === all.length - 2)
        .join('\r\n'),
    );
    expect(response.status).toBe(200);
    const received = upstream.requests[0]!;
    for (const name of ['x-internal-hop', 'keep-alive', 'te', 'proxy-authorization', 'forwarded', 'x-real-ip'])
      expect(received.headers[name], name).toBeUndefined();
    expect(received.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(received.headers['x-forwarded-host']).toBe('client.example');
    expect(received.headers['x-forwarded-proto']).toBe('http');
    expect(received.headers.host).toBe(`127.0.0.1:${upstream.port}`);
    // Repeated fields arrive as the client sent them, in order.
    expect(headerValues(received, 'x-kept')).toEqual(['1', '2']);
  });

  it('forwards only a syntactically valid Host as X-Forwarded-Host (RFC 9110 §7.2)', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url);
    const forwardedHost = async (host: string) => {
      const before = upstream!.requests.length;
      const head = `GET /v2/state/ledger-end HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n${authLines(gw!)}\r\n`;
      expect((await rawRequest(gw!.url, head)).status, host).toBe(200);
      expect(upstream!.requests.length, host).toBe(before + 1);
      return upstream!.requests.at(-1)!.headers['x-forwarded-host'];
    };
    for (const host of ['gw.example', 'gw.example:8443', '10.0.0.7:80', '[2001:db8::7]', '[2001:db8::7]:8443'])
      expect(await forwardedHost(host), host).toBe(host);
    for (const host of [
      'evil.com/v2/users',
      'a@evil',
      'gw.example, evil.com',
      'evil.com?x',
      'evil.com#x',
      '[zz]',
      'gw:port',
    ])
      expect(await forwardedHost(host), host).toBeUndefined();
  });

  it("drops the participant's hop-by-hop answer headers and those its Connection header names, keeps the rest", async () => {
    for (const connection of ['keep-alive, X-Upstream-Hop', 'close, x-upstream-hop', 'keep-alive']) {
      upstream = await startRecordingUpstream((_request, response) => {
        response.writeHead(200, {
          'content-type': 'application/json',
          connection,
          'x-upstream-hop': 'secret',
          'keep-alive': 'timeout=5',
          'x-answer-kept': '1',
        });
        response.end('{}');
      });
      gw = await startGateway(upstream.url);
      const response = await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() });
      expect(response.status).toBe(200);
      expect(response.headers.get('x-answer-kept'), connection).toBe('1');
      // The gateway's own connection has its own Keep-Alive header; the participant's never passes.
      expect(response.headers.get('keep-alive'), connection).not.toBe('timeout=5');
      expect(response.headers.get('x-upstream-hop'), connection).toBe(connection === 'keep-alive' ? 'secret' : null);
      await gw.close();
      await upstream.close();
      gw = undefined;
      upstream = undefined;
    }
  });

  it('keeps X-Forwarded-For from a trusted proxy and appends the peer', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url, { server: { trustedProxies: ['127.0.0.0/8'] } });
    await fetch(`${gw.url}/v2/version`, {
      headers: gw.auth({
        'x-forwarded-for': '203.0.113.7',
        'x-forwarded-proto': 'https',
        forwarded: 'for=203.0.113.7',
        'x-real-ip': '203.0.113.7',
      }),
    });
    expect(upstream.requests[0]!.headers['x-forwarded-for']).toBe('203.0.113.7, 127.0.0.1');
    expect(upstream.requests[0]!.headers['x-forwarded-proto']).toBe('https');
    expect(upstream.requests[0]!.headers.forwarded).toBe('for=203.0.113.7'); // the trusted proxy's own
    expect(upstream.requests[0]!.headers['x-real-ip']).toBe('203.0.113.7');
  });

  it('answers Expect: 100-continue itself and sends the body on without it (undici cannot send it)', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url);
    const body = Buffer.alloc(256 * 1024, 'x');
    const { hostname, port } = new URL(gw.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(port), hostname, () =>
        socket.write(
          [
            'POST /v2/dars HTTP/1.1',
            'Host: gw',
            'Content-Type: application/octet-stream',
            `Content-Length: ${body.length}`,
            'Expect: 100-continue',
            authLines(gw!).trimEnd(),
            '',
            '',
          ].join('\r\n'),
        ),
      );
      let text = '';
      socket.on('data', (data) => {
        text += data.toString('latin1');
        if (text.startsWith('HTTP/1.1 100 Continue\r\n\r\n') && text.length === 25) socket.write(body); // only once asked
        if (/\r\n\r\n\{"ok":true\}$/.test(text)) socket.end();
      });
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1.1 100 Continue\r\n\r\nHTTP\/1.1 200 /);
    expect(upstream.requests).toHaveLength(1);
    expect(upstream.requests[0]!.headers.expect).toBeUndefined();
    expect(upstream.requests[0]!.body.equals(body)).toBe(true);
  });

  it("drops the headers a repeated Connection field of the participant's answer names", async () => {
    upstream = await startRecordingUpstream((_request, response) => {
      response.setHeader('connection', ['X-Secret', 'X-Other']);
      response.writeHead(200, { 'content-type': 'application/json', 'x-secret': 's', 'x-other': 'o', 'x-kept': 'k' });
      response.end('{}');
    });
    gw = await startGateway(upstream.url);
    const response = await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() });
    expect(response.status).toBe(200);
    expect([response.headers.get('x-secret'), response.headers.get('x-other'), response.headers.get('x-kept')]).toEqual(
      [null, null, 'k'],
    );
  });

  it("returns the participant's status, headers and body unchanged, errors included", async () => {
    const cantonError =
      '{"code":"TOPOLOGY_SERIAL_MISMATCH","cause":"The given serial Some(1) did not match the actual serial Some(5).","correlationId":null,"traceId":null,"context":{},"resources":[],"errorCategory":9,"grpcCodeValue":9,"retryInfo":null,"definiteAnswer":null}';
    upstream = await startRecordingUpstream((_request, response) => {
      response.writeHead(400, [
        ['Content-Type', 'application/json'],
        ['Set-Cookie', 'a=1'],
        ['Set-Cookie', 'b=2'],
        ['X-Participant', 'p1'],
        ['Content-Length', String(cantonError.length)],
      ]);
      response.end(cantonError);
    });
    gw = await startGateway(upstream.url);
    const response = await fetch(`${gw.url}/v2/package-vetting/list`, {
      method: 'POST',
      body: '{}',
      headers: gw.auth({ 'content-type': 'application/json' }),
    });
    expect(response.status).toBe(400);
    expect(await response.text()).toBe(cantonError);
    expect(response.headers.get('x-participant')).toBe('p1');
    expect(response.headers.getSetCookie()).toEqual(['a=1', 'b=2']);
    expect(response.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('streams a large upload upstream while the client is still sending it', async () => {
    let firstBytesSeen: () => void = () => {};
    const firstBytes = new Promise<void>((resolve) => {
      firstBytesSeen = resolve;
    });
    let receivedBytes = 0;
    const server = http.createServer((request, response) => {
      request.on('data', (chunk: Buffer) => {
        receivedBytes += chunk.length;
        firstBytesSeen();
      });
      request.on('end', () => response.end(JSON.stringify({ receivedBytes })));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const upstreamUrl = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
    try {
      gw = await startGateway(upstreamUrl);
      const chunk = Buffer.alloc(256 * 1024, 7);
      const request = http.request(`${gw.url}/v2/dars`, {
        method: 'POST',
        headers: gw.auth({ 'content-type': 'application/octet-stream', 'content-length': String(chunk.length * 8) }),
      });
      const responded = new Promise<string>((resolve, reject) => {
        request.on('response', (response) => {
          let text = '';
          response.on('data', (d) => {
            text += d;
          });
          response.on('end', () => resolve(text));
        });
        request.on('error', reject);
      });
      request.write(chunk);
      // Only half of the upload is sent; a buffering proxy would deliver nothing yet.
      await firstBytes;
      for (let i = 1; i < 8; i++) request.write(chunk);
      request.end();
      expect(JSON.parse(await responded)).toEqual({ receivedBytes: chunk.length * 8 });
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it('streams the answer to the client while the participant is still sending it', async () => {
    let finishAnswer: () => void = () => {};
    upstream = await startRecordingUpstream((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write('{"part":1');
      finishAnswer = () => response.end(',"part2":2}');
    });
    gw = await startGateway(upstream.url);
    const response = await fetch(`${gw.url}/v2/state/active-contracts`, {
      method: 'POST',
      body: '{}',
      headers: gw.auth({ 'content-type': 'application/json' }),
    });
    const reader = response.body!.getReader();
    const first = await reader.read();
    expect(Buffer.from(first.value).toString()).toBe('{"part":1');
    finishAnswer();
    let rest = '';
    for (let next = await reader.read(); !next.done; next = await reader.read())
      rest += Buffer.from(next.value).toString();
    expect(rest).toBe(',"part2":2}');
  });
});

describe('upstream failures', () => {
  it("answers 503 GATEWAY_UPSTREAM_UNAVAILABLE in Canton's shape when nothing listens upstream", async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    gw = await startGateway(`http://127.0.0.1:${port}`);
    const response = await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() });
    expect(response.status).toBe(503);
    const body = (await response.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(JS_CANTON_ERROR_KEYS);
    expect(body).toMatchObject({
      code: 'GATEWAY_UPSTREAM_UNAVAILABLE',
      errorCategory: 1,
      grpcCodeValue: 14,
      retryInfo: '1 second',
      correlationId: response.headers.get('x-request-id'),
    });
    expect(JSON.stringify(body)).not.toMatch(/ECONNREFUSED|127\.0\.0\.1/);
  });

  it('answers 504 GATEWAY_UPSTREAM_TIMEOUT when the participant accepts and never answers', async () => {
    upstream = await startRecordingUpstream(() => {
      /* never answers */
    });
    gw = await startGateway(upstream.url, { upstream: { timeoutMs: 300 } });
    const started = Date.now();
    const response = await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() });
    expect(response.status).toBe(504);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await response.json()).toMatchObject({
      code: 'GATEWAY_UPSTREAM_TIMEOUT',
      errorCategory: 3,
      grpcCodeValue: 4,
      retryInfo: '1 second',
    });
  });

  it('applies a per-operation timeout override', async () => {
    // undici's timers have about one second of resolution: keep the delays well apart.
    upstream = await startRecordingUpstream((_request, response) => {
      setTimeout(() => void answerJson(200, { late: true })(_request, response), 2500);
    });
    gw = await startGateway(upstream.url, {
      upstream: { timeoutMs: 200, operationTimeoutsMs: { 'getV2StateLedger-end': 8000 } },
    });
    expect((await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() })).status).toBe(200);
    expect((await fetch(`${gw.url}/v2/parties`, { headers: gw.auth() })).status).toBe(504);
  });

  it('never retries: a GET answered 503 and a failed POST reach the participant once', async () => {
    upstream = await startRecordingUpstream(answerJson(503, { code: 'X', cause: 'busy' }));
    gw = await startGateway(upstream.url);
    expect((await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() })).status).toBe(503);
    upstream.respond((_request, response) => {
      response.destroy();
    });
    expect(
      (
        await fetch(`${gw.url}/v2/commands/async/submit`, {
          method: 'POST',
          body: '{}',
          headers: gw.auth({ 'content-type': 'application/json' }),
        })
      ).status,
    ).toBe(503);
    expect(upstream.requests.map((r) => r.method)).toEqual(['GET', 'POST']);
  });

  it('refuses a body over limits.bodyBytes with 413, declared or chunked, before the participant sees it', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url, { limits: { bodyBytes: 1024 } });
    const declared = await fetch(`${gw.url}/v2/dars`, {
      method: 'POST',
      body: Buffer.alloc(2048),
      headers: gw.auth({ 'content-type': 'application/octet-stream' }),
    });
    expect(declared.status).toBe(413);
    expect(await declared.json()).toMatchObject({ code: 'GATEWAY_REQUEST_TOO_LARGE' });
    expect(upstream.requests).toHaveLength(0);

    const chunked = await rawRequest(
      gw.url,
      `POST /v2/dars HTTP/1.1\r\nHost: gw\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n${authLines(gw)}Connection: close\r\n\r\n`,
      ['400\r\n', Buffer.alloc(0x400, 1), '\r\n', '400\r\n', Buffer.alloc(0x400, 1), '\r\n', '0\r\n\r\n'],
    );
    expect(chunked.status).toBe(413);
    expect(JSON.parse(chunked.body.toString())).toMatchObject({ code: 'GATEWAY_REQUEST_TOO_LARGE' });
    // A chunked upload streams: the participant may have seen the start, never the whole body.
    expect(upstream.requests.every((r) => r.body.length <= 1024)).toBe(true);
  });
});

describe('routes outside /v2', () => {
  it("hides the participant's /livez, /readyz and /docs unless exposed", async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url);
    for (const path of ['/livez', '/readyz', '/docs/openapi', '/anything']) {
      const response = await fetch(`${gw.url}${path}`, { headers: gw.auth() });
      expect(response.status, path).toBe(404);
      expect(await response.json()).toMatchObject({
        code: 'GATEWAY_ROUTE_NOT_EXPOSED',
        errorCategory: 11,
        grpcCodeValue: 5,
      });
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it('forwards them when configured', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url, { routes: { exposeParticipantHealth: true, exposeParticipantDocs: true } });
    for (const path of ['/livez', '/readyz', '/docs/asyncapi']) {
      expect((await fetch(`${gw.url}${path}`, { headers: gw.auth() })).status, path).toBe(200);
    }
    expect(upstream.requests.map((r) => r.url)).toEqual(['/livez', '/readyz', '/docs/asyncapi']);
  });

  it('forwards an unknown /v2 path as operation unknown', async () => {
    upstream = await startRecordingUpstream(answerJson(404, { errors: ['GET, uri: /v2/nope'], status: 404 }));
    gw = await startGateway(upstream.url);
    const response = await fetch(`${gw.url}/v2/nope`, { headers: gw.auth() });
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ errors: ['GET, uri: /v2/nope'], status: 404 });
    const metrics = await gw.registry.getSingleMetricAsString('ledger_gateway_requests_total');
    expect(metrics).toContain('operation="unknown"');
  });

  it('refuses dot segments and backslashes, encoded or not', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url);
    for (const path of [
      '/v2/../admin',
      '/v2/%2e%2e/x',
      '/v2/packages/.',
      '/v2/%2E/version',
      '/v2\\version',
      '/v2/a%5c..',
    ]) {
      const response = await rawRequest(
        gw.url,
        `GET ${path} HTTP/1.1\r\nHost: gw\r\n${authLines(gw)}Connection: close\r\n\r\n`,
      );
      expect(response.status, path).toBe(400);
      expect(JSON.parse(response.body.toString())).toMatchObject({ code: 'GATEWAY_INVALID_PATH' });
    }
    expect(upstream.requests).toHaveLength(0);
  });
});

function authLines(gateway: RunningGateway): string {
  return Object.entries(gateway.auth())
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
}
