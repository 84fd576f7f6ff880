// Shared by the protection tests: an upstream that holds calls until told to answer, raw HTTP
// calls that can be aborted, and bounded waiting.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { READINESS_USER_AGENT } from '../../src/proxy/upstream-probe.js';
import {
  answerJson,
  startRecordingUpstream,
  type RecordedRequest,
  type RecordingUpstream,
} from '../helpers/recording-upstream.js';

export const SUBMIT = '/v2/commands/submit-and-wait-for-transaction';

export interface HoldingUpstream extends RecordingUpstream {
  /** Calls the upstream holds, oldest first. */
  readonly held: Array<{ request: RecordedRequest; response: http.ServerResponse }>;
  /** Answers every held call with `status`. */
  answerAll(status?: number): void;
}

/** A recording upstream that answers nothing until `answerAll` (or the test switches `respond`). */
export async function startHoldingUpstream(): Promise<HoldingUpstream> {
  const held: HoldingUpstream['held'] = [];
  const upstream = await startRecordingUpstream((request, response) => {
    if (request.headers['user-agent'] === READINESS_USER_AGENT)
      void answerJson(200, { version: '3.4.12' })(request, response);
    else held.push({ request, response });
  });
  return Object.assign(upstream, {
    held,
    answerAll(status = 200) {
      for (const { response } of held.splice(0)) {
        if (response.destroyed) continue;
        const body = JSON.stringify({ transaction: {} });
        response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        response.end(body);
      }
    },
  });
}

export interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

export interface PendingCall {
  readonly answer: Promise<Answer>;
  /** Closes the connection: the client goes away. */
  abort(): void;
}

/** A POST (or GET without body) on a fresh connection, so an abort closes only this call. */
export function call(
  base: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
  method = body === undefined ? 'GET' : 'POST',
): PendingCall {
  const request = http.request(`${base}${path}`, {
    method,
    agent: false,
    headers: {
      ...headers,
      ...(body === undefined
        ? {}
        : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }),
    },
  });
  const answer = new Promise<Answer>((resolve, reject) => {
    request.once('error', reject);
    request.once('response', (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.once('end', () =>
        resolve({
          status: response.statusCode ?? 0,
          headers: response.headers,
          body: Buffer.concat(chunks).toString(),
        }),
      );
      response.once('error', reject);
    });
  });
  answer.catch(() => {}); // an aborted call's rejection is expected
  request.end(body);
  return { answer, abort: () => request.destroy() };
}

/** A submit-and-wait-for-transaction body the request rules accept. */
export const SUBMIT_BODY = JSON.stringify({
  commands: {
    commands: [{ CreateCommand: { templateId: '#iou:Iou:Iou', createArguments: { owner: 'Alice::1220' } } }],
    commandId: 'protection-test',
    actAs: ['Alice::1220'],
  },
});

export const submit = (base: string, headers: Record<string, string>) => call(base, SUBMIT, headers, SUBMIT_BODY);

export async function waitFor(condition: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** An upstream that accepts WebSocket upgrades (Canton's streams) and keeps them open. */
export async function startWebSocketUpstream(): Promise<{ url: string; open: () => number; close(): Promise<void> }> {
  const server = http.createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end('{"version":"3.4.12"}');
  });
  const sockets = new WebSocketServer({
    server,
    handleProtocols: (protocols) => (protocols.has('daml.ws.auth') ? 'daml.ws.auth' : false),
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    open: () => sockets.clients.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of sockets.clients) client.terminate();
        sockets.close();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
