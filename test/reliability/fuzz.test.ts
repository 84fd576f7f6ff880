// Property-based fuzzing of the running gateway over methods, paths, headers and bodies: the
// process never crashes, every answer is well-formed HTTP, and the participant never sees a
// request that had to be refused (no valid token, a path trick, a path outside /v2).
import net from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestTargetProblem } from '../../src/exchange/request-context.js';
import { canonicalPath } from '../../src/operations.js';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';

let upstream: RecordingUpstream;
let gw: RunningGateway;
let token: string;
let sequence = 0;
/** Calls that had to be refused: none of them may ever reach the participant, even late. */
const refusedIds = new Set<string>();
beforeAll(async () => {
  upstream = await startRecordingUpstream();
  gw = await startGateway(upstream.url, { server: { headersTimeoutMs: 2_000, requestTimeoutMs: 4_000 } });
  token = gw.auth().authorization!;
});
afterAll(async () => {
  await gw.close();
  await upstream.close();
});

/** Sends raw bytes on a fresh connection; resolves with the status line's code (or undefined if the gateway closed without one). */
function send(bytes: Buffer): Promise<{ status: number | undefined; raw: string }> {
  const { hostname, port } = new URL(gw.url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname, () => socket.end(bytes));
    let data = '';
    socket.setTimeout(8_000, () => socket.destroy());
    socket.on('data', (chunk) => {
      data += chunk.toString('latin1');
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      const match = /^HTTP\/1\.1 (\d{3}) /.exec(data);
      resolve({ status: match ? Number(match[1]) : undefined, raw: data });
    });
  });
}

const segment = fc.oneof(
  fc.constantFrom(
    'v2',
    'version',
    'updates',
    'update-by-offset',
    'package-vetting',
    'update',
    'idps',
    'x',
    '..',
    '.',
    '%2e%2e',
    '%2E',
    '%2f',
    '%5c',
    '%76%32',
    '',
    'a%00b',
    '%zz',
    '~',
    ';x=1',
  ),
  fc.stringMatching(/^[A-Za-z0-9._~%:@!$&'()*+,;=-]{1,12}$/),
);
const path = fc.array(segment, { minLength: 0, maxLength: 5 }).map((segments) => `/${segments.join('/')}`);
const prefixedPath = fc.oneof(
  path,
  path.map((p) => `/v2${p}`),
);
const query = fc.option(fc.stringMatching(/^[A-Za-z0-9=&%._-]{0,20}$/), { nil: undefined });
const method = fc.constantFrom('GET', 'POST', 'PATCH', 'PUT', 'DELETE', 'HEAD', 'OPTIONS', 'TRACE', 'PROPFIND', 'BREW');
const headerName = fc
  .stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,15}$/)
  .filter((n) => !/^(content-length|transfer-encoding|host|authorization|connection|expect|upgrade)$/i.test(n));
const headerValue = fc.stringMatching(/^[\x20-\x7e]{0,40}$/);
const body = fc.oneof(
  fc.constant(''),
  fc.json(),
  fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes).toString('latin1')),
);

describe('fuzzing the running gateway', () => {
  it('never crashes, always answers well-formed HTTP, never forwards what it must refuse', async () => {
    await fc.assert(
      fc.asyncProperty(
        method,
        prefixedPath,
        query,
        fc.array(fc.tuple(headerName, headerValue), { maxLength: 4 }),
        body,
        fc.boolean(),
        async (verb, target, search, headers, payload, withToken) => {
          const url = search === undefined ? target : `${target}?${search}`;
          const bodyBytes = Buffer.from(payload, 'latin1');
          // Each call is tagged, so what the participant received is attributed exactly.
          const id = `fuzz-${++sequence}`;
          const lines = [
            `${verb} ${url} HTTP/1.1`,
            'Host: gw',
            'Connection: close',
            `X-Fuzz-Id: ${id}`,
            ...headers.map(([n, v]) => `${n}: ${v}`),
          ];
          if (withToken) lines.push(`Authorization: ${token}`);
          if (bodyBytes.length > 0) lines.push('Content-Type: application/json', `Content-Length: ${bodyBytes.length}`);
          const answer = await send(Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), bodyBytes]));

          // Every answer is well-formed HTTP with a real status (or a closed connection for bytes
          // Node's parser refuses before any answer can be framed).
          if (answer.status !== undefined) {
            expect(answer.status).toBeGreaterThanOrEqual(100);
            expect(answer.status).toBeLessThan(600);
            expect(answer.raw).toContain('\r\n\r\n');
          }
          const received = upstream.requests.filter((r) => r.headers['x-fuzz-id'] === id);
          const forwarded = received.length > 0;
          const pathOnly = url.split('?')[0]!;
          const canonical = canonicalPath(pathOnly);
          const mustRefuse =
            !withToken ||
            requestTargetProblem(url) !== undefined ||
            !(canonical === '/v2' || canonical.startsWith('/v2/'));
          if (mustRefuse && verb !== 'OPTIONS') {
            refusedIds.add(id);
            expect(forwarded, `${verb} ${url} token=${withToken}`).toBe(false);
          }
          expect(received.length).toBeLessThanOrEqual(1); // never sent twice
          if (forwarded) expect(received[0]!.url).toBe(url); // forwarded raw, never rewritten
        },
      ),
      { numRuns: 300, interruptAfterTimeLimit: 60_000 },
    );

    // Nothing that had to be refused arrived later either.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const late = upstream.requests.filter((r) => refusedIds.has(String(r.headers['x-fuzz-id'])));
    expect(late.map((r) => `${r.method} ${r.url}`)).toEqual([]);

    // Still alive and serving.
    expect((await fetch(`${gw.adminUrl}/livez`)).status).toBe(200);
    expect((await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() })).status).toBe(200);
  }, 120_000);
});
