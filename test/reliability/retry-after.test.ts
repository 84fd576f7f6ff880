// A 503 GATEWAY_UPSTREAM_UNAVAILABLE says when to retry in Retry-After as in its body's retryInfo
// (1 second), for a plain call and for a WebSocket upgrade; a 504 has no Retry-After (RFC 9110 §10.2.3).
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { Errors, GatewayError } from '../../src/errors.js';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { closeAfterEach } from '../helpers/per-test.js';

let gw: RunningGateway | undefined;
closeAfterEach(() => gw);

/** A URL on 127.0.0.1 where nothing listens (connection refused). */
async function refusingUrl(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}

describe('Retry-After on 503', () => {
  it("comes with GATEWAY_UPSTREAM_UNAVAILABLE on a call, as many seconds as the body's retryInfo", async () => {
    gw = await startGateway(await refusingUrl(), { versionCache: { ttlSeconds: 0 } });
    const answer = await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() });
    expect(answer.status).toBe(503);
    expect(await answer.json()).toMatchObject({ code: 'GATEWAY_UPSTREAM_UNAVAILABLE', retryInfo: '1 second' });
    expect(answer.headers.get('retry-after')).toBe('1');
  });

  it('comes with GATEWAY_UPSTREAM_UNAVAILABLE on a refused WebSocket upgrade', async () => {
    gw = await startGateway(await refusingUrl());
    const { port } = new URL(gw.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(Number(port), '127.0.0.1', () =>
        socket.write(
          [
            'GET /v2/updates HTTP/1.1',
            'Host: gw',
            'Connection: Upgrade',
            'Upgrade: websocket',
            'Sec-WebSocket-Version: 13',
            'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
            `Authorization: ${gw!.auth().authorization!}`,
            '',
            '',
          ].join('\r\n'),
        ),
      );
      let text = '';
      socket.on('data', (data) => {
        text += data.toString('latin1');
      });
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
      setTimeout(() => socket.destroy(), 5_000);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 503 /);
    expect(answer).toContain('GATEWAY_UPSTREAM_UNAVAILABLE');
    expect(answer).toMatch(/\r\nretry-after: 1\r\n/i);
  });

  it('follows a retryInfo the raiser sets, keeps a Retry-After it sets, and is not added to other statuses', () => {
    expect(new GatewayError(Errors.GATEWAY_UPSTREAM_UNAVAILABLE, { retryInfo: '5 seconds' }).headers).toEqual({
      'retry-after': '5',
    });
    expect(
      new GatewayError(Errors.GATEWAY_PROTECTION_UNAVAILABLE, {}, { headers: { 'retry-after': '2' } }).headers,
    ).toEqual({ 'retry-after': '2' });
    expect(new GatewayError(Errors.GATEWAY_UPSTREAM_TIMEOUT).headers).toEqual({});
    expect(new GatewayError(Errors.GATEWAY_RESOURCE_EXHAUSTED).headers).toEqual({});
  });
});
