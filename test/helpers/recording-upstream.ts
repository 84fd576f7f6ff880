// A real HTTP server on 127.0.0.1 port 0 that records every request byte for byte
// and answers as each test programs it.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { READINESS_USER_AGENT } from '../../src/proxy/upstream-probe.js';

export interface RecordedRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly rawHeaders: readonly string[];
  readonly body: Buffer;
}

/** Every value of a header as the upstream received it (repeated fields kept apart, in order). */
export function headerValues(request: RecordedRequest, name: string): string[] {
  const values: string[] = [];
  for (let i = 0; i < request.rawHeaders.length; i += 2) {
    if (request.rawHeaders[i]!.toLowerCase() === name) values.push(request.rawHeaders[i + 1]!);
  }
  return values;
}

export type UpstreamHandler = (request: RecordedRequest, response: http.ServerResponse) => void | Promise<void>;

export interface RecordingUpstream {
  readonly url: string;
  readonly port: number;
  /** Every request but the gateway's readiness probes. */
  readonly requests: RecordedRequest[];
  readonly probes: RecordedRequest[];
  readonly server: http.Server;
  /** Replace how the upstream answers. */
  respond(handler: UpstreamHandler): void;
  close(): Promise<void>;
}

export const answerJson =
  (status: number, body: unknown, headers: http.OutgoingHttpHeaders = {}): UpstreamHandler =>
  (_request, response) => {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    response.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      ...headers,
    });
    response.end(text);
  };

export async function startRecordingUpstream(
  handler: UpstreamHandler = answerJson(200, { ok: true }),
): Promise<RecordingUpstream> {
  const requests: RecordedRequest[] = [];
  const probes: RecordedRequest[] = [];
  let current = handler;
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const recorded: RecordedRequest = {
        method: request.method ?? '',
        url: request.url ?? '',
        headers: request.headers,
        rawHeaders: request.rawHeaders,
        body: Buffer.concat(chunks),
      };
      (recorded.headers['user-agent'] === READINESS_USER_AGENT ? probes : requests).push(recorded);
      void Promise.resolve(current(recorded, response)).catch(() => response.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    probes,
    server,
    respond(next) {
      current = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
