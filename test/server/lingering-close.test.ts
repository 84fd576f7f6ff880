// A refusal answered while the client is still sending its body (the body budget full, a body past
// limits.bodyBytes) closes the connection; closed at once, the socket answered the client's next
// bytes with a reset, and a client still writing lost the answer it had not read: it saw
// "connection reset" (status 0 here) instead of the coded refusal and its Retry-After (issue 42's
// 16 submissions at the participant limit: 2 of 28 attempts). Now the rest of the body is read and
// thrown away after the answer (src/exchange/lingering-close.ts), and the connection closes once it
// has arrived.
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { MAX_LINGERING } from '../../src/exchange/lingering-close.js';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
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
    // A 1 MiB body budget: each 8 MiB submission (one long string) is refused before its first MiB has
    // arrived, its bytes and what the tokenizer builds of the string counted together (body/shallow-fields.ts).
    const { gw, upstream } = await refusingGateway();
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
    const { gw } = await refusingGateway();
    const token = await gw.issuer.mint({ sub: 'alice' });
    const socket = stalledUpload(gw.url, token);
    while (!socket.answer().includes('\r\n\r\n')) await pause();
    const answered = Date.now();
    while ((await openConnections(gw)) > 0 && Date.now() - answered < 20_000) await pause();
    const closedAt = Date.now();
    socket.destroy();
    expect(socket.answer()).toMatch(/^HTTP\/1\.1 503 /);
    expect(closedAt - answered).toBeGreaterThanOrEqual(4_000);
    expect(closedAt - answered).toBeLessThan(11_000);
  }, 30_000);

  it(`lingers on at most ${MAX_LINGERING} connections at once: refusals past them close at once (what a lingering connection reads is garbage until collected)`, async () => {
    const { gw } = await refusingGateway();
    const token = await gw.issuer.mint({ sub: 'alice' });
    const sockets = Array.from({ length: MAX_LINGERING + 4 }, () => stalledUpload(gw.url, token));
    try {
      while (!sockets.every((socket) => socket.answer().includes('\r\n\r\n'))) await pause();
      for (const socket of sockets) expect(socket.answer()).toMatch(/^HTTP\/1\.1 503 /);
      // The ones past the cap are closed within moments; the lingering ones wait for their 5 s bound.
      const answered = Date.now();
      while ((await openConnections(gw)) > MAX_LINGERING && Date.now() - answered < 3_000) await pause();
      expect(await openConnections(gw)).toBe(MAX_LINGERING);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  }, 30_000);
});

const pause = () => new Promise((resolve) => setTimeout(resolve, 50));

/** A gateway with a 1 MiB body budget, which refuses every 8 MiB submission part way. */
async function refusingGateway() {
  const upstream = (current.upstream = await startRecordingUpstream());
  const gw = (current.gw = await startGateway(upstream.url, {
    limits: { bufferedBodyBytes: MiB, bufferedBodyShare: 1 },
  }));
  return { gw, upstream };
}

/** The gateway's open connections. */
function openConnections(gw: RunningGateway): Promise<number> {
  return new Promise<number>((resolve, reject) =>
    gw.gateway.api.server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
  );
}

/**
 * A client that declares an 8 MiB submission, sends 2 MiB of it and then nothing, its side left open
 * after the gateway's FIN: only the gateway closes the connection.
 */
function stalledUpload(url: string, token: string): { answer(): string; destroy(): void } {
  const { hostname, port } = new URL(url);
  const socket = net.connect({ port: Number(port), host: hostname, allowHalfOpen: true });
  socket.on('error', () => undefined);
  let answer = '';
  socket.on('data', (data: Buffer) => (answer += data.toString('latin1')));
  socket.write(
    `POST /v2/commands/submit-and-wait HTTP/1.1\r\nHost: ${hostname}\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${8 * MiB}\r\n\r\n{"userId":"alice","x":"`,
  );
  socket.write(Buffer.alloc(2 * MiB, 0x20));
  return { answer: () => answer, destroy: () => socket.destroy() };
}
