// Expect: 100-continue (RFC 9110 §10.1.1): the gateway sends 100 Continue only once a call has
// passed its stages and its body is read; a call refused before that gets its final status first,
// the client never sends the body, and the connection is closed.
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';

const current = perTest();

interface Exchange {
  /** A 100 Continue came before the final answer. */
  readonly continued: boolean;
  /** The client sent the body (only ever after a 100 Continue). */
  readonly bodySent: boolean;
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
  /** The gateway closed the connection after its answer. */
  readonly closed: boolean;
}

/** A client that sends its body only once asked to (curl waits a second; this one waits for good). */
function exchange(gw: RunningGateway, head: string[], body: Buffer): Promise<Exchange> {
  const { hostname, port } = new URL(gw.url);
  return new Promise((resolve, reject) => {
    let text = '';
    let continued = false;
    let bodySent = false;
    let answer: Omit<Exchange, 'closed'> | undefined;
    const socket = net.connect(Number(port), hostname, () =>
      socket.write(`${[head[0], 'Host: gw', ...head.slice(1)].join('\r\n')}\r\n\r\n`),
    );
    const timer = setTimeout(
      () => socket.destroy(new Error(`no complete answer within 5 s: ${JSON.stringify(text)}`)),
      5_000,
    );
    const finish = (closed: boolean) => {
      clearTimeout(timer);
      resolve({ ...answer!, closed });
      socket.destroy();
    };
    socket.on('data', (data) => {
      text += data.toString('latin1');
      if (!continued && text.startsWith('HTTP/1.1 100 Continue\r\n\r\n')) {
        continued = true;
        text = text.slice(25);
        socket.write(body);
        bodySent = true;
      }
      const split = text.indexOf('\r\n\r\n');
      if (answer !== undefined || split === -1) return;
      const [statusLine, ...lines] = text.slice(0, split).split('\r\n');
      const headers = Object.fromEntries(
        lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
      );
      const content = text.slice(split + 4);
      if (content.length < Number(headers['content-length'] ?? 0)) return;
      answer = { continued, bodySent, status: Number(statusLine!.split(' ')[1]), headers, body: content };
      // A kept connection stays open: the answer is complete.
      if (headers.connection !== 'close') finish(false);
    });
    socket.on('close', () =>
      answer === undefined ? reject(new Error(`closed before an answer: ${JSON.stringify(text)}`)) : finish(true),
    );
    socket.on('error', reject);
  });
}

const authLine = (gw: RunningGateway, token?: string) =>
  `Authorization: ${token === undefined ? gw.auth().authorization : `Bearer ${token}`}`;
const upload = (path: string, body: Buffer, ...extra: string[]) => [
  `POST ${path} HTTP/1.1`,
  'Content-Type: application/octet-stream',
  `Content-Length: ${body.length}`,
  'Expect: 100-continue',
  ...extra,
];
const dar = Buffer.alloc(64 * 1024, 'x');
const byOffset = Buffer.from('{"offset": 0, "updateFormat": {}}');

describe('Expect: 100-continue', () => {
  it('a call refused before its body is read gets its final status, no 100 Continue, and its connection closed', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url, {
      limits: { bodyBytes: 32 * 1024 },
      policy: { rules: { postV2DarsValidate: [{ subjects: ['bob'] }] } },
      protection: { operations: { postV2Packages: { rate: { requests: 1, perSeconds: 60 } } } },
    }));
    const small = Buffer.alloc(1024, 'x');
    const cases: Array<[string, string[], Buffer, number, string]> = [
      ['no token', upload('/v2/dars', small), small, 401, 'NA'],
      ['no token, rule-checked route', upload('/v2/updates/update-by-offset', byOffset), byOffset, 401, 'NA'],
      ['a bad token', upload('/v2/dars', small, authLine(gw, 'not.a.jwt')), small, 401, 'NA'],
      ['a route not served', upload('/livez', small, authLine(gw)), small, 404, 'GATEWAY_ROUTE_NOT_EXPOSED'],
      ['authorization', upload('/v2/dars/validate', small, authLine(gw)), small, 403, 'NA'],
      [
        'a declared length over limits.bodyBytes',
        upload('/v2/dars', dar, authLine(gw)),
        dar,
        413,
        'GATEWAY_REQUEST_TOO_LARGE',
      ],
      [
        'the same, rule-checked route',
        upload('/v2/updates/update-by-offset', dar, authLine(gw)),
        dar,
        413,
        'GATEWAY_REQUEST_TOO_LARGE',
      ],
    ];
    for (const [name, head, body, status, code] of cases) {
      const answer = await exchange(gw, head, body);
      expect(answer, name).toMatchObject({ continued: false, bodySent: false, status, closed: true });
      expect(answer.headers.connection, name).toBe('close');
      expect((JSON.parse(answer.body) as { code: string }).code, name).toBe(code);
    }
    // Protection: the first call takes the caller's one call a minute, the second is refused before its body.
    expect(await exchange(gw, upload('/v2/packages', small, authLine(gw)), small)).toMatchObject({
      continued: true,
      status: 200,
    });
    expect(await exchange(gw, upload('/v2/packages', small, authLine(gw)), small)).toMatchObject({
      continued: false,
      bodySent: false,
      status: 429,
      closed: true,
    });
    expect(upstream.requests.map((request) => request.url)).toEqual(['/v2/packages']);
  });

  it('an accepted call gets 100 Continue when its body is read, and the body arrives whole', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url));
    const streamed = await exchange(gw, upload('/v2/dars', dar, authLine(gw)), dar);
    expect(streamed).toMatchObject({ continued: true, bodySent: true, status: 200, closed: false });
    expect(upstream.requests[0]!.body.equals(dar)).toBe(true);
    expect(upstream.requests[0]!.headers.expect).toBeUndefined();

    // A rule-checked route reads the body to judge it: 100 Continue, then the rule's answer.
    const judged = await exchange(gw, upload('/v2/updates/update-by-offset', byOffset, authLine(gw)), byOffset);
    expect(judged).toMatchObject({ continued: true, status: 400 });
    expect((JSON.parse(judged.body) as { code: string }).code).toBe('NON_POSITIVE_OFFSET');
    const good = Buffer.from(
      '{"offset": 7, "updateFormat": {"includeTransactions": {"eventFormat": {"filtersForAnyParty": {}}, "transactionShape": "TRANSACTION_SHAPE_ACS_DELTA"}}}',
    );
    expect(await exchange(gw, upload('/v2/updates/update-by-offset', good, authLine(gw)), good)).toMatchObject({
      continued: true,
      status: 200,
    });
    expect(upstream.requests.map((request) => request.body.toString())).toEqual([dar.toString(), good.toString()]);
  });

  it('a request that frames no content gets 100 Continue at once and keeps its connection', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url));
    const answer = await exchange(
      gw,
      ['POST /v2/packages HTTP/1.1', 'Content-Length: 0', 'Expect: 100-continue', authLine(gw)],
      Buffer.alloc(0),
    );
    expect(answer).toMatchObject({ continued: true, status: 200, closed: false });
    expect(answer.headers.connection).toBe('keep-alive');
    expect(upstream.requests).toHaveLength(1);
  });
});
