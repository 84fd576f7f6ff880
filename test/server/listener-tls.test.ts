// TLS on the API listener (server.tls): HTTPS and WSS with the configured certificate, client
// certificates when a client CA is set, a renewed certificate picked up without a restart, and
// files that cannot serve refused at start. Certificates: test/proxy/fixtures (a test CA).
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { gauge, startGateway, testConfig, type RunningGateway } from '../helpers/gateway.js';
import { logCapture } from '../helpers/log-capture.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { echoOnce, startWebSocketUpstream, type WebSocketUpstream } from '../helpers/websocket-upstream.js';
import { ConfigError } from '../../src/config/load.js';
import { eventually } from '../helpers/eventually.js';

const fixture = (name: string) => new URL(`../proxy/fixtures/${name}`, import.meta.url).pathname;
const CA = fixture('test-ca.pem');
const listenerTls = { certFile: fixture('test-participant.pem'), keyFile: fixture('test-only-participant-key.pem') };

let upstream: RecordingUpstream | undefined;
let wsUpstream: WebSocketUpstream | undefined;
let gw: RunningGateway | undefined;
const dirs: string[] = [];
afterEach(async () => {
  await gw?.close();
  await upstream?.close();
  await wsUpstream?.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  gw = upstream = wsUpstream = undefined;
});

interface Answer {
  status: number;
  body: string;
  peer: string | undefined;
}

/** One GET over HTTPS on a fresh connection, trusting the test CA (or anything, to read the certificate). */
function get(url: string, options: https.RequestOptions = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = https.get(
      url,
      { ca: [readFileSync(CA)], agent: false, headers: gw!.auth(), ...options },
      (response) => {
        const peer = (response.socket as TLSSocket).getPeerCertificate();
        let body = '';
        response.on('data', (chunk: Buffer) => {
          body += chunk.toString();
        });
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            body,
            peer: typeof peer.subject?.CN === 'string' ? peer.subject.CN : undefined,
          }),
        );
      },
    );
    request.on('error', reject);
    request.setTimeout(5_000, () => request.destroy(new Error('timed out')));
  });
}

describe('TLS on the API listener', () => {
  it('serves HTTPS with the configured certificate; the participant hears X-Forwarded-Proto: https', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url, { server: { tls: listenerTls } });
    expect(gw.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const answer = await get(`${gw.url}/v2/state/ledger-end`);
    expect(answer).toMatchObject({ status: 200, peer: '127.0.0.1' });
    expect(upstream.requests[0]!.headers['x-forwarded-proto']).toBe('https');
    // Plain HTTP to the HTTPS port gets no answer from the API.
    await expect(
      fetch(`${gw.url.replace('https:', 'http:')}/v2/state/ledger-end`, { headers: gw.auth() }),
    ).rejects.toThrow();
    expect(upstream.requests).toHaveLength(1);
  });

  it('tunnels WebSocket streams over TLS (wss)', async () => {
    wsUpstream = await startWebSocketUpstream();
    gw = await startGateway(wsUpstream.url, { server: { tls: listenerTls } });
    expect(
      await echoOnce(`${gw.url.replace('https:', 'wss:')}/v2/updates`, ['daml.ws.auth'], {
        headers: gw.auth(),
        ca: readFileSync(CA),
      }),
    ).toBe('echo:{}');
  });

  it('requires a client certificate signed by server.tls.clientCaFile when one is set', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url, { server: { tls: { ...listenerTls, clientCaFile: CA } } });
    await expect(get(`${gw.url}/v2/state/ledger-end`)).rejects.toThrow();
    const withCertificate = await get(`${gw.url}/v2/state/ledger-end`, {
      cert: readFileSync(fixture('test-client.pem')),
      key: readFileSync(fixture('test-only-client-key.pem')),
    });
    expect(withCertificate.status).toBe(200);
    expect(upstream.requests).toHaveLength(1);
  });

  it('picks up a renewed certificate without a restart, and keeps the last good one when the files cannot serve', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-listener-tls-'));
    dirs.push(dir);
    const certFile = join(dir, 'tls.crt');
    const keyFile = join(dir, 'tls.key');
    copyFileSync(fixture('test-participant.pem'), certFile);
    copyFileSync(fixture('test-only-participant-key.pem'), keyFile);
    upstream = await startRecordingUpstream();
    const log = logCapture();
    gw = await startGateway(
      upstream.url,
      { server: { tls: { certFile, keyFile, reloadIntervalMs: 1_000 } } },
      { logger: log.logger },
    );
    const peer = async () => (await get(`${gw!.url}/v2/state/ledger-end`, { rejectUnauthorized: false })).peer;
    expect(await peer()).toBe('127.0.0.1');
    // The renewal: another certificate and key (the one for participant.test).
    copyFileSync(fixture('test-named-participant.pem'), certFile);
    copyFileSync(fixture('test-only-named-key.pem'), keyFile);
    await expect.poll(peer, { timeout: 5_000, interval: 200 }).toBe('participant.test');
    expect(log.entries().some((entry) => entry.msg === 'server TLS certificate reloaded: new connections use it')).toBe(
      true,
    );
    // A key that does not match the certificate: warned once, the last good certificate stays.
    copyFileSync(fixture('test-participant.pem'), certFile);
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(await peer()).toBe('participant.test');
    expect(
      log
        .entries()
        .filter((entry) => entry.level === 'warn' && String(entry.msg).startsWith('server TLS files cannot be used')),
    ).toHaveLength(1);
  });

  it('bounds a client that never finishes its handshake: headersTimeoutMs, and shutdown ends within its grace', async () => {
    upstream = await startRecordingUpstream();
    gw = await startGateway(upstream.url, {
      server: { tls: listenerTls, headersTimeoutMs: 1_000 },
      shutdown: { graceMs: 1_000 },
    });
    const port = Number(new URL(gw.url).port);
    const silent = () => {
      const socket = createConnection(port, '127.0.0.1'); // plain TCP: no ClientHello ever
      socket.on('error', () => undefined);
      return {
        socket,
        closed: new Promise<number>((resolve) => {
          const started = Date.now();
          socket.once('close', () => resolve(Date.now() - started));
        }),
      };
    };
    const first = silent();
    expect(await first.closed).toBeLessThan(3_000); // cut near headersTimeoutMs (Node's default: 120 s)
    const second = silent();
    await eventually(
      async () => (await gauge(gw!, 'ledger_gateway_connections_open')) === 1,
      'the connection is accepted',
    );
    const started = Date.now();
    await gw.gateway.shutdown();
    expect(Date.now() - started).toBeLessThan(2_500); // the grace, not the handshake timeout
    await second.closed;
    gw = undefined; // already closed
  });

  it('refuses to start with files that cannot serve, naming the key', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-listener-tls-'));
    dirs.push(dir);
    const garbage = join(dir, 'garbage.pem');
    writeFileSync(garbage, 'not a certificate\n');
    const problems = (tls: object) => {
      try {
        testConfig('http://127.0.0.1:1', { server: { tls } });
        return [];
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        return error.problems;
      }
    };
    expect(problems(listenerTls)).toEqual([]);
    expect(problems({ certFile: listenerTls.certFile })).toEqual([
      "server.tls: certFile and keyFile go together (the listener's certificate and its key)",
    ]);
    expect(problems({ clientCaFile: CA })).toEqual([
      'server.tls.clientCaFile: client certificates need TLS on the listener (certFile and keyFile)',
    ]);
    expect(problems({ ...listenerTls, keyFile: join(dir, 'missing.key') })).toEqual([
      `server.tls.keyFile: cannot read ${join(dir, 'missing.key')} (ENOENT)`,
    ]);
    expect(problems({ certFile: listenerTls.certFile, keyFile: fixture('test-only-named-key.pem') })[0]).toMatch(
      /^server\.tls: the certificate, key or client CA cannot be used \(.+\)$/,
    );
    expect(problems({ certFile: garbage, keyFile: listenerTls.keyFile })[0]).toMatch(
      /^server\.tls: the certificate, key or client CA cannot be used/,
    );
  });
});
