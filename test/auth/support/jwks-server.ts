// A real JWKS endpoint on 127.0.0.1 port 0: serves the current key set, can be taken down
// (connections reset), slowed, or made to answer an error, and counts what it served.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { JWK } from 'jose';

export interface JwksServer {
  readonly url: string;
  readonly jwksUrl: string;
  /** JWKS requests received (including failed ones). */
  readonly requests: number;
  setKeys(keys: readonly JWK[]): void;
  /** down: reset every connection; an HTTP status: answer it; delayMs: wait before answering. */
  setBehaviour(behaviour: { down?: boolean; status?: number; delayMs?: number; body?: string }): void;
  close(): Promise<void>;
}

export async function startJwksServer(keys: readonly JWK[] = []): Promise<JwksServer> {
  let current: readonly JWK[] = keys;
  let behaviour: { down?: boolean; status?: number; delayMs?: number; body?: string } = {};
  let requests = 0;
  const server = http.createServer((request, response) => {
    requests += 1;
    if (behaviour.down) {
      request.socket.destroy();
      return;
    }
    const answer = () => {
      if (response.destroyed) return;
      if (behaviour.status !== undefined && behaviour.status !== 200) {
        response.writeHead(behaviour.status, { 'content-type': 'text/plain' }).end('unavailable');
        return;
      }
      const body = behaviour.body ?? JSON.stringify({ keys: current });
      response
        .writeHead(200, { 'content-type': 'application/jwk-set+json', 'content-length': Buffer.byteLength(body) })
        .end(body);
    };
    if (behaviour.delayMs) setTimeout(answer, behaviour.delayMs);
    else answer();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    jwksUrl: `${url}/jwks`,
    get requests() {
      return requests;
    },
    setKeys(next) {
      current = next;
    },
    setBehaviour(next) {
      behaviour = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
