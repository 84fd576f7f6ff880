// A refusal answered while the client is still sending its body (the body budget full, a body past
// limits.bodyBytes) closes the connection; closed at once, the socket answered the client's next
// bytes with a reset, and a client still writing lost the answer it had not read: it saw
// "connection reset" (status 0 here) instead of the coded refusal and its Retry-After (issue 42's
// 16 submissions at the participant limit: 2 of 28 attempts). Now the rest of the body is read and
// thrown away after the answer (src/exchange/lingering-close.ts), and the connection closes once it
// has arrived.
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';

const current = perTest();
const MiB = 1024 * 1024;

/**
 * A client that sends its whole submission (head and `bytes` of body) before it reads anything, as a
 * client uploading does: the status it then reads (0: none, the connection was reset), and its code.
 */
function uploadThenRead(url: string, token: string, bytes: number): Promise<{ status: number; answer: string }> {
  const { hostname, port } = new URL(url);
  const prefix = '{"userId":"alice","x":"';
  const head =
    `POST /v2/commands/submit-and-wait HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${token}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${bytes}\r\n\r\n${prefix}`;
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    socket.pause();
    let answer = '';
    socket.on('data', (data: Buffer) => (answer += data.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0), answer }));
    socket.write(head);
    socket.write(Buffer.alloc(bytes - prefix.length, 0x20), () => socket.resume());
  });
}

describe('a refusal answered while the body still arrives', () => {
  it('reaches a client that is still writing: every attempt reads its coded answer, none a reset', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    // A 1 MiB body budget: each 8 MiB submission (one long string) is refused before its first MiB has
    // arrived, its bytes and what the tokenizer builds of the string counted together (body/shallow-fields.ts).
    const gw = (current.gw = await startGateway(upstream.url, {
      limits: { bufferedBodyBytes: MiB, bufferedBodyShare: 1 },
    }));
    const token = await gw.issuer.mint({ sub: 'alice' });
    for (let i = 0; i < 4; i++) {
      const { status, answer } = await uploadThenRead(gw.url, token, 8 * MiB);
      expect(status, answer).toBe(503);
      expect(answer).toContain('"code":"GATEWAY_BODY_BUFFER_EXHAUSTED"');
      expect(answer.toLowerCase()).toContain('retry-after: 1');
    }
    expect(upstream.requests).toHaveLength(0);
  }, 60_000);

  it('is bounded: a client that stops sending after the answer is closed on once 5 s pass without a byte (checked every 5 s)', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url, {
      limits: { bufferedBodyBytes: MiB, bufferedBodyShare: 1 },
    }));
    const token = await gw.issuer.mint({ sub: 'alice' });
    const { hostname, port } = new URL(gw.url);
    // Its side stays open after the gateway's FIN: only the gateway's bound closes the connection.
    const socket = net.connect({ port: Number(port), host: hostname, allowHalfOpen: true });
    socket.on('error', () => undefined);
    let answer = '';
    socket.on('data', (data: Buffer) => (answer += data.toString('latin1')));
    socket.write(
      `POST /v2/commands/submit-and-wait HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${token}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${8 * MiB}\r\n\r\n{"userId":"alice","x":"`,
    );
    socket.write(Buffer.alloc(2 * MiB, 0x20)); // then nothing more, the connection left open
    const pause = () => new Promise((resolve) => setTimeout(resolve, 50));
    while (!answer.includes('\r\n\r\n')) await pause();
    const answered = Date.now();
    // The gateway's side of it: this connection is its only one.
    const open = () =>
      new Promise<number>((resolve, reject) =>
        gw.gateway.api.server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
      );
    while ((await open()) > 0 && Date.now() - answered < 20_000) await pause();
    const closedAt = Date.now();
    socket.destroy();
    expect(answer).toMatch(/^HTTP\/1\.1 503 /);
    expect(closedAt - answered).toBeGreaterThanOrEqual(4_000);
    expect(closedAt - answered).toBeLessThan(11_000);
  }, 30_000);
});
