// Requests with neither Content-Length nor Transfer-Encoding have no body (RFC 9112 §6.3). The API
// listener has Node hand them over already ended (optimizeEmptyRequests, for speed); these cases
// show nothing changes for the client or the participant: forwarded without a body, refused by the
// rules as an empty body is, answered on a keep-alive connection that goes on serving, and a
// client that leaves still cancels the participant's call.
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { gatewayForFile } from '../helpers/file-gateway.js';
import { answerJson } from '../helpers/recording-upstream.js';

const running = gatewayForFile();

interface RawAnswer {
  status: number;
  headers: string;
  body: string;
}

/**
 * Sends raw requests one after another on ONE keep-alive connection (each written once the answer
 * before it is complete) and returns every answer. Answers carry a Content-Length.
 */
function onOneConnection(requests: string[], timeoutMs = 10_000): Promise<RawAnswer[]> {
  const { hostname, port } = new URL(running.gw.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    const answers: RawAnswer[] = [];
    let data = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(
        new Error(
          `${answers.length} of ${requests.length} answers after ${timeoutMs} ms; pending: ${data.toString('latin1').slice(0, 200)}`,
        ),
      );
    }, timeoutMs);
    socket.on('error', reject);
    socket.on('connect', () => socket.write(requests[0]!));
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      for (;;) {
        const split = data.indexOf('\r\n\r\n');
        if (split === -1) return;
        const headers = data.subarray(0, split).toString('latin1');
        const length = Number(/\r\ncontent-length: *(\d+)/i.exec(headers)?.[1] ?? 'NaN');
        if (Number.isNaN(length)) return reject(new Error(`an answer without Content-Length: ${headers}`));
        if (data.length < split + 4 + length) return;
        answers.push({
          status: Number(headers.slice(9, 12)),
          headers,
          body: data.subarray(split + 4, split + 4 + length).toString('utf8'),
        });
        data = data.subarray(split + 4 + length);
        if (answers.length === requests.length) {
          clearTimeout(timer);
          socket.destroy();
          resolve(answers);
          return;
        }
        socket.write(requests[answers.length]!);
      }
    });
  });
}

const auth = () => `Authorization: ${running.gw.auth().authorization}\r\n`;

describe('requests without a body', () => {
  it('forwards bodiless GETs and POSTs without a body, one after another on one connection', async () => {
    const before = running.upstream.requests.length;
    const answers = await onOneConnection([
      `GET /v2/state/ledger-end HTTP/1.1\r\nHost: gw\r\n${auth()}\r\n`,
      `POST /v2/parties HTTP/1.1\r\nHost: gw\r\n${auth()}\r\n`,
      `GET /v2/state/ledger-end HTTP/1.1\r\nHost: gw\r\n${auth()}\r\n`,
    ]);
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200]);
    expect(answers.map((answer) => JSON.parse(answer.body))).toEqual([{ ok: true }, { ok: true }, { ok: true }]);
    const seen = running.upstream.requests.slice(before);
    expect(seen.map((request) => `${request.method} ${request.url}`)).toEqual([
      'GET /v2/state/ledger-end',
      'POST /v2/parties',
      'GET /v2/state/ledger-end',
    ]);
    for (const request of seen) {
      expect(request.body.length).toBe(0);
      expect(request.headers['transfer-encoding']).toBeUndefined();
    }
  });

  it('refuses a rule-checked POST without a body exactly as one with Content-Length: 0, and serves the next call', async () => {
    const before = running.upstream.requests.length;
    const path = '/v2/commands/submit-and-wait-for-transaction';
    const [bodiless, next] = await onOneConnection([
      `POST ${path} HTTP/1.1\r\nHost: gw\r\n${auth()}Content-Type: application/json\r\n\r\n`,
      `GET /v2/state/ledger-end HTTP/1.1\r\nHost: gw\r\n${auth()}\r\n`,
    ]);
    const [empty] = await onOneConnection([
      `POST ${path} HTTP/1.1\r\nHost: gw\r\n${auth()}Content-Type: application/json\r\nContent-Length: 0\r\n\r\n`,
    ]);
    expect(bodiless!.status).toBe(400);
    expect(bodiless!.status).toBe(empty!.status);
    // The participant's decoder refuses an empty body: its text/plain answer, the same both ways.
    expect(bodiless!.body).toBe(
      'Invalid value for: body (Malformed JSON: the body is empty; this route needs a JSON object)',
    );
    expect(bodiless!.body).toBe(empty!.body);
    expect(next!.status).toBe(200);
    expect(running.upstream.requests.slice(before).map((request) => request.url)).toEqual(['/v2/state/ledger-end']);
  });

  it('still forwards a GET that declares a body, and a chunked one', async () => {
    const before = running.upstream.requests.length;
    const body = '{"filter":{}}';
    const answers = await onOneConnection([
      `GET /v2/package-vetting HTTP/1.1\r\nHost: gw\r\n${auth()}Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      `GET /v2/package-vetting HTTP/1.1\r\nHost: gw\r\n${auth()}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
    ]);
    expect(answers.map((answer) => answer.status)).toEqual([200, 200]);
    expect(running.upstream.requests.slice(before).map((request) => request.body.toString())).toEqual([body, body]);
  });

  it("cancels the participant's call when the client of a bodiless GET leaves", async () => {
    let cancelled!: () => void;
    const upstreamSawClose = new Promise<void>((resolve) => {
      cancelled = resolve;
    });
    running.upstream.respond((_request, response) => {
      response.on('close', () => cancelled()); // never answered: only the gateway can end it
    });
    try {
      const before = running.upstream.requests.length;
      const { hostname, port } = new URL(running.gw.url);
      const socket = net.connect(Number(port), hostname);
      socket.on('error', () => {});
      socket.write(`GET /v2/state/ledger-end HTTP/1.1\r\nHost: gw\r\n${auth()}\r\n`);
      await expect.poll(() => running.upstream.requests.length, { timeout: 5_000 }).toBe(before + 1);
      socket.destroy();
      await expect(
        Promise.race([
          upstreamSawClose.then(() => 'closed'),
          new Promise((resolve) => setTimeout(resolve, 5_000, 'still open')),
        ]),
      ).resolves.toBe('closed');
    } finally {
      running.upstream.respond(answerJson(200, { ok: true }));
    }
  });
});
