// The access log (log.access): a success and a refusal each carry every access field, the client
// address resolved behind a trusted proxy, never the token or the query; sampling and path
// redaction follow a reload. A WebSocket stream has one line, written when it ends, with the bytes
// its tunnel carried.
import { describe, expect, it } from 'vitest';
import { request } from 'undici';
import WebSocket from 'ws';
import { ACCESS_LOG_FIELDS } from '../../src/config/schema.js';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { logCapture, type LogCapture } from '../helpers/log-capture.js';
import { perTest } from '../helpers/per-test.js';
import { answerJson, startRecordingUpstream } from '../helpers/recording-upstream.js';
import { startWebSocketUpstream } from '../helpers/websocket-upstream.js';

const current = perTest();

async function accessLogged(access: Record<string, unknown>) {
  const upstream = await startRecordingUpstream(answerJson(200, { partyDetails: [] }));
  current.upstream = upstream;
  const log = logCapture();
  const gw = await startGateway(
    upstream.url,
    { server: { trustedProxies: ['127.0.0.1'] }, log: { level: 'info', access: { enabled: true, ...access } } },
    { logger: log.logger },
  );
  current.gw = gw;
  const send = async (method: 'GET' | 'POST', path: string, headers: Record<string, string>) => {
    const answer = await request(`${gw.url}${path}`, {
      method,
      headers: { 'x-forwarded-for': '198.51.100.9, 203.0.113.7', 'user-agent': 'audit-test/1', ...headers },
      ...(method === 'POST' && { body: '{}' }),
    });
    await answer.body.text();
    return answer.headers['x-request-id'] as string;
  };
  const lineOf = (reqId: string) => log.requestLine(reqId);
  return { gw, log, send, lineOf };
}

describe('the access log', () => {
  it('writes every field on a success and on a refusal, behind a trusted proxy, without the token or the query', async () => {
    const { gw, log, send, lineOf } = await accessLogged({ redactPathParameters: ['party'] });
    const token = gw.auth().authorization!.slice('Bearer '.length);
    const ok = await lineOf(await send('GET', '/v2/parties/Alice%3A%3A1220?filter=secret-query', gw.auth()));
    const refused = await lineOf(await send('POST', '/v2/commands/submit-and-wait?x=secret-query', {}));
    for (const line of [ok, refused]) {
      for (const field of [
        ...ACCESS_LOG_FIELDS,
        'reqId',
        'operation',
        'method',
        'status',
        'errorCode',
        'durationMs',
        'traceId',
      ])
        expect(line, field).toHaveProperty(field);
      expect(line).toMatchObject({ clientAddress: '203.0.113.7', userAgent: 'audit-test/1' });
      expect(Date.parse(line.startTime as string)).toBeGreaterThan(Date.now() - 60_000);
    }
    expect(ok).toMatchObject({
      status: 200,
      operation: 'getV2PartiesParty',
      path: '/v2/parties/[Redacted]',
      issuer: gw.issuer.issuerConfig.issuer,
      subject: 'alice',
      upstreamReplica: '0',
      responseBytes: JSON.stringify({ partyDetails: [] }).length,
      requestBytes: null,
    });
    expect(ok.upstreamMs).toEqual(expect.any(Number));
    expect(refused).toMatchObject({
      status: 401,
      errorCode: 'UNAUTHENTICATED',
      path: '/v2/commands/submit-and-wait',
      issuer: null,
      subject: null,
      requestBytes: 2,
      upstreamMs: null,
    });
    expect((refused.responseBytes as number) > 0).toBe(true);
    const text = log.lines.join('\n');
    expect(text).not.toContain(token);
    expect(text).not.toContain('secret-query');
    expect(text).not.toContain('Alice');
  });

  it('samples successes, keeps every refusal, and follows a reload of sampling and redaction', async () => {
    const { gw, log, send, lineOf } = await accessLogged({ successSampleRatio: 0, redactPathParameters: ['party'] });
    const sampledOut = await send('GET', '/v2/parties/Bob', gw.auth());
    const refusal = await send('GET', '/v2/parties/Bob', {});
    expect(await lineOf(refusal)).toMatchObject({ status: 401, path: '/v2/parties/[Redacted]' });
    expect(log.entries().find((entry) => entry.reqId === sampledOut)).toBeUndefined();

    await gw.gateway.reload(() => ({
      ...gw.config,
      log: { ...gw.config.log, access: { ...gw.config.log.access, successSampleRatio: 1, redactPathParameters: [] } },
    }));
    expect(await lineOf(await send('GET', '/v2/parties/Bob', gw.auth()))).toMatchObject({
      status: 200,
      path: '/v2/parties/Bob',
    });
  });

  it('is the plain request line when off', async () => {
    const { gw, send, lineOf } = await accessLogged({ enabled: false });
    const line = await lineOf(await send('GET', '/v2/parties/Bob', gw.auth()));
    expect(line).not.toHaveProperty('clientAddress');
    expect(line).not.toHaveProperty('path');
  });
});

/** A gateway with the access log on in front of a WebSocket participant that echoes each frame (`echo:` first). */
async function streamsLogged(access: Record<string, unknown> = {}, overrides: Record<string, unknown> = {}) {
  const participant = await startWebSocketUpstream();
  current.upstream = participant;
  const log = logCapture();
  current.gw = await startGateway(
    participant.url,
    { log: { level: 'info', access: { enabled: true, ...access } }, ...overrides },
    { logger: log.logger },
  );
  return { gw: current.gw, log };
}

/** Opens a stream to /v2/updates through the gateway, Canton's way; rejects with the status of a refusal. */
function openStream(gw: RunningGateway, headers: Record<string, string>): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${gw.url.replace('http', 'ws')}/v2/updates`, ['daml.ws.auth'], { headers });
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_request, response) => reject(new Error(`status ${response.statusCode}`)));
    ws.once('error', reject);
  });
}

/** The request lines of this status written so far (a line the gateway logs hands over those it held). */
function linesOf(gw: RunningGateway, log: LogCapture, status = 101) {
  gw.gateway.log.info('request lines held so far handed over');
  return log.entries().filter((entry) => entry.msg === 'request' && entry.status === status);
}

describe('the access log of a WebSocket stream', () => {
  it('writes nothing while the stream is open and one line when it ends: its whole duration, the bytes each way', async () => {
    const { gw, log } = await streamsLogged();
    const ws = await openStream(gw, gw.auth());
    const opened = performance.now();
    const frame = 'x'.repeat(1_000);
    const echoed = new Promise<string>((resolve) =>
      ws.once('message', (data) => resolve(Buffer.from(data as Buffer).toString())),
    );
    ws.send(frame);
    expect(await echoed).toBe(`echo:${frame}`);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(linesOf(gw, log)).toEqual([]);
    // A refused upgrade's line is written at once, while the stream is open.
    await expect(openStream(gw, {})).rejects.toThrow('status 401');
    expect(linesOf(gw, log, 401)).toHaveLength(1);
    expect(linesOf(gw, log)).toEqual([]);

    const openFor = performance.now() - opened;
    ws.terminate(); // the client drops its connection
    await expect.poll(() => linesOf(gw, log), { timeout: 3_000 }).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const [line] = linesOf(gw, log);
    expect(line).toMatchObject({
      operation: 'onV2Updates',
      errorCode: 'none',
      path: '/v2/updates',
      subject: 'alice',
      endedBy: 'client',
      upstreamReplica: '0',
      upstreamMs: null,
    });
    expect(line!.durationMs as number).toBeGreaterThanOrEqual(openFor);
    // The frames only (a masked client frame: 8 bytes of header; the participant's: 4), never the upgrade's heads.
    expect(line!.requestBytes).toBe(frame.length + 8);
    expect(line!.responseBytes).toBe(`echo:${frame}`.length + 4);
    expect(log.entries().filter((entry) => entry.msg === 'stream ended')).toHaveLength(1);
  });

  it('samples a stream as a success, and writes the line of a stream cut at shutdown', async () => {
    const { gw, log } = await streamsLogged({ successSampleRatio: 0 }, { shutdown: { graceMs: 200 } });
    (await openStream(gw, gw.auth())).terminate();
    await expect.poll(() => log.entries().some((entry) => entry.msg === 'stream ended'), { timeout: 3_000 }).toBe(true);
    expect(linesOf(gw, log)).toEqual([]);

    await gw.gateway.reload(() => ({
      ...gw.config,
      log: { ...gw.config.log, access: { ...gw.config.log.access, successSampleRatio: 1 } },
    }));
    const ws = await openStream(gw, gw.auth());
    const closed = new Promise((resolve) => ws.once('close', resolve));
    await gw.gateway.shutdown();
    await closed;
    await expect.poll(() => linesOf(gw, log), { timeout: 3_000 }).toHaveLength(1);
    expect(linesOf(gw, log)[0]).toMatchObject({ requestBytes: 0, responseBytes: 0, endedBy: 'shutdown' });
  });
});
