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
});
