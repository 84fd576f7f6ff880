// Requests that carry an Upgrade header: only a WebSocket stream is tunnelled, and it reaches the
// participant as a well-formed HTTP/1.1 request in the caller's trace; anything else is the plain
// call it is, with its own route's stages; a refused upgrade comes back framed and whole.
import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { MetricNames } from '../../src/telemetry/metrics.js';
import { gauge, startGateway, type RunningGateway } from '../helpers/gateway.js';
import { logCapture } from '../helpers/log-capture.js';
import {
  answerJson,
  headerValues,
  startRecordingUpstream,
  type RecordingUpstream,
} from '../helpers/recording-upstream.js';

let gw: RunningGateway | undefined;
let upstream: RecordingUpstream | undefined;
let participant: http.Server | undefined;
const upgradedSockets: net.Socket[] = [];
afterEach(async () => {
  for (const socket of upgradedSockets.splice(0)) socket.destroy(); // detached from the server by the upgrade
  await gw?.close();
  await upstream?.close();
  if (participant !== undefined) {
    participant.closeAllConnections();
    await new Promise((resolve) => participant!.close(resolve));
  }
  gw = undefined;
  upstream = undefined;
  participant = undefined;
});

/** A participant whose 'upgrade' listener records the request and answers as told (raw bytes). */
async function startUpgradeParticipant(
  answer: (socket: net.Socket) => void,
): Promise<{ url: string; upgrades: http.IncomingMessage[] }> {
  const upgrades: http.IncomingMessage[] = [];
  participant = http.createServer((_request, response) => response.end('{}'));
  participant.on('upgrade', (request: http.IncomingMessage, socket: net.Socket) => {
    upgrades.push(request);
    upgradedSockets.push(socket);
    answer(socket);
  });
  await new Promise<void>((resolve) => participant!.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(participant.address() as net.AddressInfo).port}`, upgrades };
}

/** Sends raw bytes, returns everything the gateway answered until it closed (or `waitMs` passed). */
function exchange(base: string, request: string, waitMs = 3_000): Promise<string> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(request));
    let text = '';
    const timer = setTimeout(() => socket.destroy(), waitMs);
    socket.on('data', (data) => {
      text += data.toString('latin1');
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(text);
    });
    socket.on('error', reject);
  });
}

const upgradeHead = (path: string, authorization: string, extra: string[] = []) =>
  [
    `GET ${path} HTTP/1.1`,
    'Host: gw',
    'Connection: Upgrade',
    'Upgrade: websocket',
    'Sec-WebSocket-Version: 13',
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
    `Authorization: ${authorization}`,
    ...extra,
    '',
    '',
  ].join('\r\n');

const SWITCH =
  'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n';

describe('requests with an Upgrade header', () => {
  it("tunnels a stream with a Host header, one traceparent in the caller's trace, and a traceresponse", async () => {
    const { url, upgrades } = await startUpgradeParticipant((socket) => socket.end(SWITCH));
    gw = await startGateway(url);
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const answer = await exchange(
      gw.url,
      upgradeHead('/v2/updates', gw.auth().authorization!, [
        `traceparent: 00-${traceId}-00f067aa0ba902b7-01`,
        'tracestate: vendor=1',
      ]),
    );
    expect(answer).toMatch(/^HTTP\/1.1 101 /);
    expect(upgrades).toHaveLength(1);
    const sent = upgrades[0]!;
    expect(sent.headers.host).toBe(new URL(url).host); // RFC 9112 §3.2: pekko-http refuses a request without one
    const traceparents = sent.rawHeaders.filter(
      (_value, index) => index % 2 === 0 && sent.rawHeaders[index]!.toLowerCase() === 'traceparent',
    ).length;
    expect(traceparents).toBe(1);
    expect(sent.headers.traceparent).toMatch(new RegExp(`^00-${traceId}-(?!00f067aa0ba902b7)[0-9a-f]{16}-01$`));
    expect(sent.headers.tracestate).toBe('vendor=1'); // the trace is continued: its state goes with it
    expect(answer).toContain(`traceresponse: ${sent.headers.traceparent as string}`);
  });

  it('logs one request line per upgrade, tunnelled or refused, as for a plain call', async () => {
    const { url } = await startUpgradeParticipant((socket) => socket.end(SWITCH));
    const log = logCapture();
    gw = await startGateway(url, {}, { logger: log.logger });
    await exchange(gw.url, upgradeHead('/v2/updates', gw.auth().authorization!), 500);
    await exchange(gw.url, upgradeHead('/v2/updates', 'Bearer not-a-jwt'), 500);
    await expect
      .poll(() => log.entries().filter((entry) => entry.msg === 'request').length, { timeout: 5_000 })
      .toBe(2);
    const [tunnelled, refused] = log.entries().filter((entry) => entry.msg === 'request');
    expect(tunnelled).toMatchObject({ operation: 'onV2Updates', method: 'GET', status: 101, errorCode: 'none' });
    expect(tunnelled!.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(refused).toMatchObject({
      operation: 'onV2Updates',
      status: 401,
      errorCode: 'UNAUTHENTICATED',
      reason: expect.any(String),
    });
    expect(log.lines.join('\n')).not.toContain('not-a-jwt');
  });

  it('starts a trace for a stream without a usable traceparent, and drops the orphaned tracestate', async () => {
    const { url, upgrades } = await startUpgradeParticipant((socket) => socket.end(SWITCH));
    gw = await startGateway(url);
    await exchange(
      gw.url,
      upgradeHead('/v2/updates', gw.auth().authorization!, ['traceparent: 00-zz-broken-01', 'tracestate: vendor=1']),
    );
    const sent = upgrades[0]!;
    expect(sent.headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(sent.headers.tracestate).toBeUndefined();
  });

  it('serves a plain route with an Upgrade header as the plain call it is: its own authorization, never a tunnel', async () => {
    upstream = await startRecordingUpstream(answerJson(200, { users: ['all'] }));
    gw = await startGateway(upstream.url, { policy: { rules: { getV2Users: [{ subjects: ['admin'] }] } } });
    const head = (authorization: string) =>
      [
        'GET /v2/users HTTP/1.1',
        'Host: gw',
        'Connection: Upgrade',
        'Upgrade: websocket',
        `Authorization: ${authorization}`,
        'Sec-WebSocket-Version: 13',
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
        '',
        '',
      ].join('\r\n');
    const alice = await exchange(gw.url, head(gw.auth().authorization!), 1_000);
    expect(alice).toMatch(/^HTTP\/1.1 403 /);
    expect(alice).toContain('"code":"NA"');
    expect(upstream.requests).toHaveLength(0);
    const admin = await exchange(gw.url, head(`Bearer ${await gw.issuer.mint({ sub: 'admin' })}`), 1_000);
    expect(admin).toMatch(/^HTTP\/1.1 200 /);
    expect(admin).toContain('{"users":["all"]}');
    expect(upstream.requests).toHaveLength(1);
    expect(upstream.requests[0]).toMatchObject({ method: 'GET', url: '/v2/users' });
    expect(headerValues(upstream.requests[0]!, 'upgrade')).toEqual([]); // hop-by-hop: not forwarded
  });

  it('keeps a POST with an Upgrade header a POST, with its body and its request rules', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url);
    const body = '{"commands":{}}';
    const answer = await exchange(
      gw.url,
      [
        'POST /v2/commands/submit-and-wait-for-transaction HTTP/1.1',
        'Host: gw',
        'Connection: Upgrade',
        'Upgrade: websocket',
        `Authorization: ${gw.auth().authorization!}`,
        'Content-Type: application/json',
        `Content-Length: ${body.length}`,
        '',
        body,
      ].join('\r\n'),
      1_000,
    );
    expect(answer).toMatch(/^HTTP\/1.1 400 /);
    expect(answer).toContain("Invalid value for: body (Missing required field at 'commands.commands')");
    expect(upstream.requests).toHaveLength(0);
  });

  it('passes a chunked refusal of an upgrade on framed so that it parses, and ends the connection', async () => {
    const { url } = await startUpgradeParticipant((socket) =>
      socket.end(
        'HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"a":\r\n2\r\n1}\r\n0\r\n\r\n',
      ),
    );
    gw = await startGateway(url);
    const answer = await exchange(gw.url, upgradeHead('/v2/updates', gw.auth().authorization!));
    const [head, bodyText] = answer.split('\r\n\r\n') as [string, string];
    expect(head).toMatch(/^HTTP\/1.1 401 Unauthorized/);
    expect(head.toLowerCase()).not.toContain('transfer-encoding');
    expect(head).toContain('Connection: close');
    expect(JSON.parse(bodyText)).toEqual({ a: 1 });
  });

  it("counts a participant's refusal of an upgrade by its error code, and an upgrade whose client left while waiting, once each", async () => {
    const series = async () => {
      const text = await (await fetch(`${gw!.adminUrl}/metrics`)).text();
      return [...text.matchAll(/^ledger_gateway_requests_total\{(.*)\} (\d+)$/gm)].map(
        (match) => `${match[1]} ${match[2]}`,
      );
    };
    const refusal = JSON.stringify({
      code: 'NA',
      cause: 'A security-sensitive error has been received',
      grpcCodeValue: 7,
      errorCategory: -1,
    });
    const { url } = await startUpgradeParticipant((socket) =>
      socket.end(
        `HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: ${refusal.length}\r\n\r\n${refusal}`,
      ),
    );
    gw = await startGateway(url);
    expect(await exchange(gw.url, upgradeHead('/v2/updates', gw.auth().authorization!))).toMatch(/^HTTP\/1.1 403 /);
    await expect
      .poll(series, { timeout: 5_000 })
      .toEqual(['operation="onV2Updates",method="GET",status="403",error_code="PERMISSION_DENIED" 1']);
    await gw.close();

    const silent = await startUpgradeParticipant(() => undefined); // takes the upgrade, never answers it
    gw = await startGateway(silent.url);
    await exchange(gw.url, upgradeHead('/v2/updates', gw.auth().authorization!), 300); // the client gives up
    await expect
      .poll(series, { timeout: 5_000 })
      .toEqual(['operation="onV2Updates",method="GET",status="499",error_code="CLIENT_CLOSED_REQUEST" 1']);
  });

  it('counts an upgrade in flight, as a call, until it is answered or its client leaves', async () => {
    const silent = await startUpgradeParticipant(() => undefined); // takes the upgrade, never answers it
    gw = await startGateway(silent.url);
    const inFlight = () => gauge(gw!, MetricNames.inflight, { operation: 'onV2Updates' });
    const left = exchange(gw.url, upgradeHead('/v2/updates', gw.auth().authorization!), 1_000); // the client gives up after 1 s
    await expect.poll(() => silent.upgrades.length, { timeout: 2_000 }).toBe(1);
    expect(await inFlight()).toBe(1);
    await left;
    await expect.poll(inFlight, { timeout: 2_000 }).toBe(0);
  });

  it('closes a refused upgrade itself, even when the client keeps its side open: its slot comes back, shutdown does not wait', async () => {
    const { url } = await startUpgradeParticipant((socket) => socket.end(SWITCH));
    gw = await startGateway(url, {
      protection: { maxInFlight: 1 },
      policy: { rules: { onV2Updates: [{ subjects: ['admin'] }] } },
      shutdown: { graceMs: 500 },
    });
    const { hostname, port } = new URL(gw.url);
    const lingering = net.connect({ host: hostname, port: Number(port), allowHalfOpen: true }); // reads, never ends its side
    const answered = new Promise<string>((resolve) => {
      let text = '';
      lingering.on('data', (data) => {
        text += data.toString('latin1');
      });
      lingering.once('end', () => resolve(text));
    });
    lingering.write(upgradeHead('/v2/updates', gw.auth().authorization!)); // alice: denied by the rule
    try {
      expect(await answered).toMatch(/^HTTP\/1.1 403 /);
      // The process-wide slot the upgrade held is free again: the next call is served.
      await expect
        .poll(async () => (await fetch(`${gw!.url}/v2/version`, { headers: gw!.auth() })).status, { timeout: 3_000 })
        .toBe(200);
      const started = Date.now();
      await gw.gateway.shutdown();
      expect(Date.now() - started).toBeLessThan(2_000);
      gw = undefined;
    } finally {
      lingering.destroy();
    }
  });

  it('cuts off a refusal whose body stalls, without splicing a second answer after it', async () => {
    const { url } = await startUpgradeParticipant((socket) =>
      socket.write('HTTP/1.1 400 Bad Request\r\nContent-Length: 30\r\n\r\nbad'),
    );
    gw = await startGateway(url, { upstream: { timeoutMs: 1_000 } });
    const started = Date.now();
    const answer = await exchange(gw.url, upgradeHead('/v2/updates', gw.auth().authorization!), 10_000);
    expect(Date.now() - started).toBeLessThan(8_000); // bounded by timeoutMs (undici-free: Node's socket timer)
    expect(answer).toMatch(/^HTTP\/1.1 400 Bad Request\r\n/);
    expect(answer.endsWith('bad')).toBe(true);
    expect(answer.match(/HTTP\/1.1 /g)).toHaveLength(1);
  });
});
