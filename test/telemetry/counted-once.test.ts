// Every call is counted exactly once, also those refused before any stage runs and those whose
// client fails them mid-request.
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';

const current = perTest();

/** The request counter's series as `labels => count`, read from the gateway's /metrics text. */
async function requestSeries(gateway: RunningGateway): Promise<Map<string, number>> {
  const text = await (await fetch(`${gateway.adminUrl}/metrics`)).text();
  const series = new Map<string, number>();
  for (const match of text.matchAll(/^ledger_gateway_requests_total\{(.*)\} (\d+)$/gm))
    series.set(match[1]!, Number(match[2]));
  return series;
}

function sendRaw(base: string, bytes: string, endAfterMs: number): Promise<string> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => {
      socket.write(bytes);
      setTimeout(() => socket.end(), endAfterMs);
    });
    let text = '';
    socket.on('data', (data) => {
      text += data.toString('latin1');
    });
    socket.on('close', () => resolve(text));
    socket.on('error', reject);
  });
}

describe('counted once', () => {
  it("answers a request target that does not decode in Canton's shape, and counts it", async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url));
    const response = await fetch(`${gw.url}/v2/%zz`, { headers: gw.auth() });
    expect(response.status).toBe(400);
    const body = (await response.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ code: 'GATEWAY_INVALID_PATH', errorCategory: 8, grpcCodeValue: 3 });
    expect(body.correlationId).toBe(response.headers.get('x-request-id'));
    expect(upstream.requests).toHaveLength(0);
    expect([...(await requestSeries(gw))]).toEqual([
      ['operation="unknown",method="GET",status="400",error_code="GATEWAY_INVALID_PATH"', 1],
    ]);
  });

  it('counts an answer the participant broke off as such, with its status, not as the client leaving', async () => {
    const upstream = (current.upstream = await startRecordingUpstream((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': 1000 });
      response.write('{"offset":');
      setTimeout(() => response.destroy(), 100);
    }));
    const gw = (current.gw = await startGateway(upstream.url));
    await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() })
      .then((r) => r.text())
      .catch(() => 'cut');
    await expect
      .poll(async () => [...(await requestSeries(gw))], { timeout: 5_000 })
      .toEqual([['operation="getV2StateLedger-end",method="GET",status="200",error_code="UPSTREAM_ANSWER_BROKEN"', 1]]);
  });

  it('counts a call whose client leaves mid-body once, as the client leaving', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url));
    const head = [
      'POST /v2/commands/async/submit HTTP/1.1',
      'Host: gw',
      `Authorization: ${gw.auth().authorization!}`,
      'Content-Type: application/json',
      'Content-Length: 100',
      '',
      '{"commands":',
    ].join('\r\n');
    await sendRaw(gw.url, head, 200);
    await expect
      .poll(async () => [...(await requestSeries(gw)).values()].reduce((a, b) => a + b, 0), { timeout: 5_000 })
      .toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 300)); // a second count would have landed by now
    const series = [...(await requestSeries(gw))];
    expect(series).toEqual([
      ['operation="postV2CommandsAsyncSubmit",method="POST",status="499",error_code="CLIENT_CLOSED_REQUEST"', 1],
    ]);
  });
});
