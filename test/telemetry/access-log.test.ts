// The access log (log.access): a success and a refusal each carry every access field, the client
// address resolved behind a trusted proxy, never the token or the query; sampling and path
// redaction follow a reload.
import { describe, expect, it } from 'vitest';
import { request } from 'undici';
import { ACCESS_LOG_FIELDS } from '../../src/config/schema.js';
import { startGateway } from '../helpers/gateway.js';
import { logCapture } from '../helpers/log-capture.js';
import { perTest } from '../helpers/per-test.js';
import { answerJson, startRecordingUpstream } from '../helpers/recording-upstream.js';

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
