// Logs without the tracing SDK (this fork never starts it): one JSON line per request, with the
// caller's trace id; credentials redacted wherever they appear; a client that leaves is still
// counted, logged and no longer in flight. Without tracing, the participant receives the client's
// own traceparent, once.
import { execFileSync } from 'node:child_process';
import { createConnection } from 'node:net';
import { describe, expect, it } from 'vitest';
import { MetricNames } from '../../src/telemetry/metrics.js';
import { Registry } from 'prom-client';
import { buildGateway } from '../../src/app.js';
import {
  REDACTED,
  createLogger,
  isoTimeClock,
  millisText,
  redactSecrets,
  requestLineWriter,
  scrubSecrets,
} from '../../src/telemetry/logging.js';
import { startGateway, testConfig, type RunningGateway } from '../helpers/gateway.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';
import { logCapture } from '../helpers/log-capture.js';
import { ROOT, buildDist } from '../helpers/process.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { scriptedParticipant } from './canton-answers.js';
import { closeAfterEach } from '../helpers/per-test.js';

const TOKEN = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLXNlY3JldA';
const CLIENT_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_TRACEPARENT = `00-${CLIENT_TRACE_ID}-00f067aa0ba902b7-01`;

let upstream: RecordingUpstream | undefined;
let gw: RunningGateway | undefined;

closeAfterEach(
  () => gw,
  () => upstream,
);

const capture = logCapture;

/** A request line of a cached GET /v2/version answered 200. */
const getVersionLine = (reqId: string) => ({
  reqId,
  operation: 'getVersion',
  method: 'GET',
  status: 200,
  errorCode: 'none',
  durationMs: 1,
  traceId: null,
  spanId: null,
});

describe('the logger', () => {
  it('redacts credentials at any depth it is likely to meet them', () => {
    const out = capture();
    const logger = createLogger('info', out.stream);
    logger.info(
      {
        authorization: `Bearer ${TOKEN}`,
        headers: {
          authorization: `Bearer ${TOKEN}`,
          cookie: 'a=b',
          'sec-websocket-protocol': `jwt.token.${TOKEN}, daml.ws.auth`,
          accept: 'application/json',
        },
        req: { headers: { authorization: 'Basic dXNlcjpwYXNz', 'proxy-authorization': 'x' } },
        err: { config: { headers: { authorization: 'Bearer opaque-admin-token' } } },
        claims: { token: TOKEN, access_token: TOKEN, sub: 'alice' },
      },
      'with secrets',
    );
    const [entry] = out.entries();
    expect(out.lines.join('')).not.toContain('c2lnbmF0dXJlLXNlY3JldA');
    expect(out.lines.join('')).not.toContain('opaque-admin-token');
    expect(out.lines.join('')).not.toContain('dXNlcjpwYXNz');
    expect(entry).toMatchObject({
      authorization: REDACTED,
      headers: {
        authorization: REDACTED,
        cookie: REDACTED,
        'sec-websocket-protocol': REDACTED,
        accept: 'application/json',
      },
      claims: { token: REDACTED, access_token: REDACTED, sub: 'alice' },
    });
  });

  it('redacts without touching the logged objects, and costs nothing when there is no secret', () => {
    const line = { operation: 'getVersion', status: 200, nested: { list: [1, { a: 'b' }] } };
    expect(redactSecrets(line)).toBe(line);
    const headers = { Authorization: `Bearer ${TOKEN}`, accept: '*/*' };
    const logged = { calls: [{ headers }, { headers: { 'Sec-WebSocket-Protocol': `jwt.token.${TOKEN}` } }] };
    expect(redactSecrets(logged)).toEqual({
      calls: [
        { headers: { Authorization: REDACTED, accept: '*/*' } },
        { headers: { 'Sec-WebSocket-Protocol': REDACTED } },
      ],
    });
    expect(headers.Authorization).toBe(`Bearer ${TOKEN}`); // the caller's object is unchanged
    const out = capture();
    createLogger('info', out.stream).info(
      { req: { method: 'GET', url: '/v2/version', headers: { authorization: `Bearer ${TOKEN}` }, socket: {} } },
      'a request object',
    );
    expect(out.lines.join('')).not.toContain('c2lnbmF0dXJlLXNlY3JldA');
  });

  it('scrubs bearer tokens and JWTs out of messages and errors', () => {
    expect(scrubSecrets(`rejected Bearer ${TOKEN} from x`)).toBe(`rejected Bearer ${REDACTED} from x`);
    // The gateway's own refusal reasons stay readable; a credential after them still goes.
    expect(scrubSecrets('the bearer token is not a compact signed JWT')).toBe(
      'the bearer token is not a compact signed JWT',
    );
    expect(scrubSecrets(`Bearer tokenized-${TOKEN}`)).toBe(`Bearer ${REDACTED}`);
    expect(scrubSecrets('Authorization: Bearer token=s3cret')).toBe(`Authorization: Bearer ${REDACTED}`);
    expect(scrubSecrets(`protocol jwt.token.opaque-admin-secret,daml.ws.auth`)).toBe(
      `protocol jwt.token.${REDACTED},daml.ws.auth`,
    );
    expect(scrubSecrets(`token ${TOKEN}.`)).toBe(`token ${REDACTED}.`);
    expect(scrubSecrets('nothing to see')).toBe('nothing to see');
    const out = capture();
    const logger = createLogger('info', out.stream);
    logger.error(
      {
        err: Object.assign(new Error(`could not verify ${TOKEN}`), {
          config: { headers: { Authorization: 'Bearer opaque-admin-token' } },
        }),
      },
      `failed for Bearer ${TOKEN}`,
    );
    expect(out.lines.join('')).not.toContain('opaque-admin-token');
    expect(out.lines.join('')).not.toContain('c2lnbmF0dXJlLXNlY3JldA');
    expect(out.entries()[0]).toMatchObject({
      level: 'error',
      msg: `failed for Bearer ${REDACTED}`,
      err: { message: `could not verify ${REDACTED}` },
    });
  });

  it("writes the request line by hand exactly as pino would write it for the request's child logger", () => {
    const byHand = capture();
    const byPino = capture();
    const line = {
      reqId: 'a1b2c3d4-0000-4000-8000-000000000000',
      operation: 'submitAndWaitForTransaction',
      method: 'POST',
      status: 400,
      errorCode: 'MISSING_FIELD',
      durationMs: 1.234,
      traceId: CLIENT_TRACE_ID,
      spanId: null,
      reason: 'a "quoted" reason\nover two lines',
    };
    const writer = requestLineWriter(createLogger('info', byHand.stream));
    writer(line);
    writer.close();
    const { reqId, reason, ...fields } = line;
    // The ids a second time under the OpenTelemetry log data model's names (logging.ts RequestLine).
    createLogger('info', byPino.stream)
      .child({ reqId })
      .info({ ...fields, trace_id: line.traceId, span_id: line.spanId, reason }, 'request');
    const [hand] = byHand.entries();
    const [viaPino] = byPino.entries();
    expect(Object.keys(hand!)).toEqual(Object.keys(viaPino!));
    expect({ ...hand, time: 0 }).toEqual({ ...viaPino, time: 0 });
    expect(new Date(hand!.time as string).toISOString()).toBe(hand!.time);
    expect(byHand.lines).toHaveLength(1);
  });

  it("formats the line's time as Date does, whichever way the clock moves", () => {
    const isoTime = isoTimeClock();
    const times: number[] = [];
    const start = Date.UTC(2026, 10, 22, 23, 59, 58, 990);
    for (let ms = start; ms < start + 2_100; ms += 7) times.push(ms); // across second, minute, hour, day and month ends
    times.push(
      start + 500,
      start - 1,
      start - 1_000,
      start - 1_001,
      0,
      999,
      1_000,
      -1,
      -999,
      -1_000,
      -1_001,
      253_402_300_799_999,
      253_402_300_800_000,
      1.5,
      Date.now(),
    );
    for (let i = 0; i < 2_000; i++) times.push(Math.floor(Math.random() * 4_102_444_800_000));
    for (const ms of times) expect(isoTime(ms), String(ms)).toBe(new Date(ms).toISOString());
  });

  it('writes a duration as JavaScript does, without formatting a double', () => {
    const mismatches: string[] = [];
    const check = (ms: number) => {
      if (millisText(ms) !== String(ms)) mismatches.push(`${ms}: ${millisText(ms)}`);
    };
    for (let micros = 0; micros <= 2_000_000; micros++) check(Math.round(micros) / 1e3); // every microsecond up to 2 s
    for (let i = 0; i < 200_000; i++) {
      const seconds = Math.random() * 10 ** Math.floor(Math.random() * 13); // how request-telemetry.ts rounds, up to ~30,000 years
      check(Math.round(seconds * 1e6) / 1e3);
    }
    // Not a whole number of microseconds, too large, negative or not finite: as String() writes them.
    for (const ms of [
      0.0001,
      1.2345,
      1e-7,
      999_999_999_999.999,
      1e12,
      1e15,
      1e21,
      2 ** 53,
      -0,
      -1,
      -1.5,
      Number.NaN,
      Infinity,
      -Infinity,
      0.1 + 0.2,
    ])
      check(ms);
    expect(mismatches.slice(0, 5)).toEqual([]);
    expect(millisText(1.25)).toBe('1.25'); // the fraction table drops trailing zeros
  });

  it('writes no request line below info', () => {
    const out = capture();
    const writer = requestLineWriter(createLogger('warn', out.stream));
    writer(getVersionLine('r'));
    writer.close();
    expect(out.lines).toEqual([]);
  });

  it('logs an unexpected failure once, at error, under the correlation id its 500 answer names, without the token', async () => {
    upstream = await startRecordingUpstream(scriptedParticipant);
    const out = capture();
    const issuer = await createTestIssuer();
    const config = testConfig(upstream.url, {
      auth: { issuers: [issuer.issuerConfig], participantId: TEST_PARTICIPANT },
    });
    const gateway = await buildGateway(config, {
      upstreamUrl: upstream.url,
      registry: new Registry(),
      logger: out.logger,
    });
    // A stage that fails the way a bug would (a plain Error, not a coded GatewayError).
    gateway.api.addHook('preHandler', async (request) => {
      if (request.headers['x-test-fail'] !== undefined) throw new Error('a bug in a stage');
    });
    const urls = await gateway.listen();
    const token = await issuer.mint();
    try {
      const answer = await fetch(`${urls.api}/v2/state/ledger-end`, {
        headers: { authorization: `Bearer ${token}`, 'x-test-fail': '1' },
      });
      expect(answer.status).toBe(500);
      const body = (await answer.json()) as { code: string; correlationId: string };
      expect(body.code).toBe('GATEWAY_INTERNAL_ERROR');
      expect(body.correlationId).toBe(answer.headers.get('x-request-id'));
      await out.requestLine(body.correlationId);
      const failures = out.entries().filter((entry) => entry.msg === 'unexpected failure');
      expect(failures).toEqual([
        expect.objectContaining({
          level: 'error',
          reqId: body.correlationId,
          err: expect.objectContaining({ message: 'a bug in a stage' }),
        }),
      ]);
      expect(out.lines.join('')).not.toContain(token.split('.')[2]!);
    } finally {
      await gateway.close();
    }
  });

  it('holds request lines: one write once a batch (32 KB) is full, else within about a second, each a whole line', async () => {
    const writes: string[] = [];
    const writer = requestLineWriter(createLogger('info', { write: (chunk: string) => void writes.push(chunk) }));
    const reqIds = (chunk: string) =>
      chunk
        .split('\n')
        .filter(Boolean)
        .map((text) => (JSON.parse(text) as { reqId: string }).reqId);
    for (const reqId of ['r1', 'r2', 'r3']) writer(getVersionLine(reqId));
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes).toEqual([]); // not at the end of the turn: a few lines are not worth a write
    await expect.poll(() => writes.length, { timeout: 2_000, interval: 20 }).toBe(1);
    expect(writes[0]!.endsWith('}\n')).toBe(true);
    expect(reqIds(writes[0]!)).toEqual(['r1', 'r2', 'r3']);

    // A full batch is handed over at once, in whole lines.
    let n = 0;
    while (writes.length === 1) writer(getVersionLine(`b${n++}`));
    expect(writes[1]!.length).toBeGreaterThanOrEqual(32 * 1024);
    expect(writes[1]!.length).toBeLessThan(32 * 1024 + 300); // handed over with the line that filled it
    expect(reqIds(writes[1]!)).toEqual(Array.from({ length: n }, (_, i) => `b${i}`));
    writer.close();
  });

  it('keeps the order of lines: a line pino writes comes after the request lines held before it', () => {
    const writes: string[] = [];
    const logger = createLogger('info', { write: (chunk: string) => void writes.push(chunk) });
    const writer = requestLineWriter(logger);
    writer(getVersionLine('first'));
    logger.warn('limit store (Redis) connection lost');
    writer(getVersionLine('after'));
    writer.close();
    const order = writes
      .join('')
      .split('\n')
      .filter(Boolean)
      .map((text) => (JSON.parse(text) as { reqId?: string; msg: string }).reqId ?? 'warn');
    expect(order).toEqual(['first', 'warn', 'after']);
  });

  it("writes a line of a call that ends after close() at once, before the process's last lines", () => {
    const writes: string[] = [];
    const logger = createLogger('info', { write: (chunk: string) => void writes.push(chunk) });
    const writer = requestLineWriter(logger);
    writer.close(); // shutdown: no timer and no exit hook left
    writer({
      reqId: 'late',
      operation: 'getVersion',
      method: 'GET',
      status: 499,
      errorCode: 'CLIENT_CLOSED_REQUEST',
      durationMs: 1,
      traceId: null,
      spanId: null,
    });
    expect(writes.join('')).toContain('"reqId":"late"');
    logger.info('shutdown complete');
    const order = writes
      .join('')
      .split('\n')
      .filter(Boolean)
      .map(
        (text) =>
          (JSON.parse(text) as { reqId?: string; msg: string }).reqId ?? (JSON.parse(text) as { msg: string }).msg,
      );
    expect(order).toEqual(['late', 'shutdown complete']);
  });

  it('hands the lines still held to stdout when the process exits in the same turn', () => {
    buildDist();
    // A process that writes one request line and exits at once, before the turn ends.
    const script = [
      `import { createLogger, requestLineWriter } from ${JSON.stringify(`${ROOT}dist/telemetry/logging.js`)};`,
      `requestLineWriter(createLogger('info'))({ reqId: 'last-words', operation: 'getVersion', method: 'GET', status: 200, errorCode: 'none', durationMs: 1, traceId: null, spanId: null });`,
      'process.exit(0);',
    ].join('\n');
    const stdout = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(
      stdout
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, unknown>),
    ).toEqual([expect.objectContaining({ msg: 'request', reqId: 'last-words' })]);
  });
});

describe('the request log line without tracing', () => {
  it("holds the correlation id and the caller's trace id, and no token; the participant gets the caller's traceparent unchanged", async () => {
    upstream = await startRecordingUpstream(scriptedParticipant);
    const out = capture();
    gw = await startGateway(upstream.url, {}, { logger: createLogger('info', out.stream) });

    const refused = await fetch(`${gw.url}/v2/version`, {
      headers: { authorization: `Bearer ${TOKEN}`, traceparent: CLIENT_TRACEPARENT },
    });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('traceresponse')).toBeNull();
    expect(await refused.json()).toMatchObject({
      traceId: CLIENT_TRACE_ID,
      correlationId: refused.headers.get('x-request-id'),
    });

    const forwarded = await fetch(`${gw.url}/v2/version`, { headers: gw.auth({ traceparent: CLIENT_TRACEPARENT }) });
    expect(forwarded.status).toBe(200);
    await forwarded.arrayBuffer();
    const sent = upstream.requests[0]!.rawHeaders.filter(
      (_, i, all) => i % 2 === 1 && all[i - 1]!.toLowerCase() === 'traceparent',
    );
    expect(sent).toEqual([CLIENT_TRACEPARENT]);

    await out.requestLine(forwarded.headers.get('x-request-id'));
    const lines = out.entries().filter((entry) => entry.msg === 'request');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({
      reqId: refused.headers.get('x-request-id'),
      traceId: CLIENT_TRACE_ID,
      spanId: null,
      operation: 'getVersion',
      method: 'GET',
      status: 401,
      errorCode: 'UNAUTHENTICATED',
    });
    expect(lines[1]).toMatchObject({
      reqId: forwarded.headers.get('x-request-id'),
      traceId: CLIENT_TRACE_ID,
      status: 200,
      errorCode: 'none',
    });
    expect(out.lines.join('')).not.toContain('c2lnbmF0dXJlLXNlY3JldA');
    expect(out.lines.join('')).not.toContain(gw.auth().authorization!.split('.')[2]!);
  });

  it('logs a refused WebSocket upgrade without the token from its subprotocol', async () => {
    upstream = await startRecordingUpstream(scriptedParticipant);
    const out = capture();
    gw = await startGateway(upstream.url, {}, { logger: createLogger('info', out.stream) });
    const { port } = new URL(gw.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = createConnection({ host: '127.0.0.1', port: Number(port) }, () => {
        socket.write(
          [
            'GET /v2/updates HTTP/1.1',
            'Host: gw',
            'Connection: Upgrade',
            'Upgrade: websocket',
            'Sec-WebSocket-Version: 13',
            'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
            `Sec-WebSocket-Protocol: jwt.token.${TOKEN}, daml.ws.auth`,
            '',
            '',
          ].join('\r\n'),
        );
      });
      let text = '';
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString();
      });
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
      socket.setTimeout(3_000, () => socket.destroy());
    });
    expect(answer).toMatch(/^HTTP\/1\.1 401/);
    // Request lines are written in batches, at the latest a second after the first of them.
    await expect.poll(() => out.lines.length, { timeout: 2_000 }).toBeGreaterThan(0);
    expect(out.lines.join('')).not.toContain('c2lnbmF0dXJlLXNlY3JldA');
  });

  it("gives a request Node's parser refuses a request id (header and correlationId) and a request line, without the token", async () => {
    upstream = await startRecordingUpstream(scriptedParticipant);
    const out = logCapture();
    gw = await startGateway(upstream.url, { server: { maxHeaderBytes: 8_192 } }, { logger: out.logger });
    const { port } = new URL(gw.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = createConnection({ host: '127.0.0.1', port: Number(port) }, () => {
        socket.write(
          `GET /v2/version HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${TOKEN}\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
        );
      });
      let text = '';
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString();
      });
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
      socket.setTimeout(3_000, () => socket.destroy());
    });
    expect(answer).toMatch(/^HTTP\/1\.1 431/);
    const requestId = /\r\nx-request-id: ([0-9a-f-]{36})\r\n/i.exec(answer)?.[1];
    expect(requestId).toBeDefined();
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({
      code: 'GATEWAY_HEADERS_TOO_LARGE',
      correlationId: requestId,
    });
    expect(await out.requestLine(requestId!)).toMatchObject({
      operation: 'unknown',
      method: '_OTHER',
      status: 431,
      errorCode: 'GATEWAY_HEADERS_TOO_LARGE',
      reason: 'HPE_HEADER_OVERFLOW',
    });
    expect(out.lines.join('')).not.toContain('c2lnbmF0dXJlLXNlY3JldA');
    expect(upstream.requests).toHaveLength(0);
  });

  it("never answers a malformed request pipelined behind a call in flight as if it were that call's answer; counts and logs it as its own", async () => {
    upstream = await startRecordingUpstream((request, response) => {
      setTimeout(() => void scriptedParticipant(request, response), request.url === '/v2/state/ledger-end' ? 500 : 0);
    });
    const out = logCapture();
    gw = await startGateway(upstream.url, {}, { logger: out.logger });
    const { port } = new URL(gw.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = createConnection({ host: '127.0.0.1', port: Number(port) }, () => {
        socket.write(
          `GET /v2/state/ledger-end HTTP/1.1\r\nHost: gw\r\nAuthorization: ${gw!.auth().authorization}\r\n\r\nFOO@ / HTTP/1.1\r\nHost: gw\r\n\r\n`,
        );
      });
      let text = '';
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString();
      });
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
      socket.setTimeout(3_000, () => socket.destroy());
    });
    // No 400 that the client would take for its GET's answer: the connection ends without one.
    expect(answer).not.toMatch(/HTTP\/1\.1 400/);
    await expect
      .poll(
        () =>
          out.entries().filter((entry) => entry.msg === 'request' && entry.errorCode === 'GATEWAY_MALFORMED_REQUEST'),
        { timeout: 2_000 },
      )
      .toHaveLength(1);
    const refused = out
      .entries()
      .find((entry) => entry.msg === 'request' && entry.errorCode === 'GATEWAY_MALFORMED_REQUEST')!;
    expect(refused).toMatchObject({ operation: 'unknown', method: '_OTHER', status: 400 });
    expect(refused.reqId).toMatch(/^[0-9a-f-]{36}$/);
    const metrics = await gw.registry.getSingleMetricAsString('ledger_gateway_requests_total');
    expect(metrics).toMatch(
      /operation="unknown",method="_OTHER",status="400",error_code="GATEWAY_MALFORMED_REQUEST"\} 1/,
    );
  });

  it('counts a request whose client leaves before the answer as 499 CLIENT_CLOSED_REQUEST, logged once, no longer in flight', async () => {
    upstream = await startRecordingUpstream(() => {}); // the participant never answers
    const out = capture();
    gw = await startGateway(upstream.url, {}, { logger: createLogger('info', out.stream) });
    const abort = new AbortController();
    const pending = fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth(), signal: abort.signal }).catch(
      (error: unknown) => error,
    );
    const deadline = Date.now() + 5_000;
    while (upstream.requests.length === 0 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect(upstream.requests).toHaveLength(1);
    expect(
      (await gw.registry.getSingleMetric(MetricNames.inflight)!.get()).values.find(
        (v) => v.labels.operation === 'getV2StateLedger-end',
      )?.value,
    ).toBe(1);
    abort.abort();
    await pending;

    let requests = '';
    while (Date.now() < deadline) {
      requests = await gw.registry.getSingleMetricAsString(MetricNames.requests);
      if (requests.includes('CLIENT_CLOSED_REQUEST')) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(requests).toContain(
      'ledger_gateway_requests_total{operation="getV2StateLedger-end",method="GET",status="499",error_code="CLIENT_CLOSED_REQUEST"} 1',
    );
    expect(
      (await gw.registry.getSingleMetric(MetricNames.inflight)!.get()).values.find(
        (v) => v.labels.operation === 'getV2StateLedger-end',
      )?.value,
    ).toBe(0);
    await expect
      .poll(() => out.entries().filter((entry) => entry.msg === 'request'), { timeout: 2_000 })
      .toEqual([
        expect.objectContaining({ status: 499, errorCode: 'CLIENT_CLOSED_REQUEST', operation: 'getV2StateLedger-end' }),
      ]);
  });
});
