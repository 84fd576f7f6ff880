// A participant-like WebSocket endpoint on 127.0.0.1 port 0 that reads the `jwt.token.` subprotocol
// the way a given Canton release does (ledger-json-api json/v2/Endpoints.scala):
//   'split'   before digital-asset/canton#613: the value split on ",", the first element that starts
//             with `jwt.token.` (no trimming: `daml.ws.auth, jwt.token.X` hides X);
//   'trimmed' since: the same with each element trimmed (Scala's String.trim: code points up to U+0020).
// Like Canton it answers every upgrade with `daml.ws.auth` and sends an UNAUTHENTICATED frame in
// answer to the first request when it found no token; otherwise it echoes the token it read.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';

export type CantonReading = 'split' | 'trimmed';

const PREFIX = 'jwt.token.';
// Scala's String.trim strips every character up to U+0020, control characters included.
// eslint-disable-next-line no-control-regex
const scalaTrim = (text: string) => text.replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, '');

/** The token a participant of that reading takes from one Sec-WebSocket-Protocol value, if any. */
export function cantonToken(value: string, reading: CantonReading): string | undefined {
  const elements = value.split(',').map((element) => (reading === 'trimmed' ? scalaTrim(element) : element));
  return elements.find((element) => element.startsWith(PREFIX))?.slice(PREFIX.length);
}

export interface CantonWebSocketUpstream {
  readonly url: string;
  /** Per upgrade: the Sec-WebSocket-Protocol lines as received, and the token read from the first. */
  readonly upgrades: Array<{ lines: string[]; token: string | undefined }>;
  close(): Promise<void>;
}

export async function startCantonWebSocketUpstream(reading: CantonReading): Promise<CantonWebSocketUpstream> {
  const upgrades: CantonWebSocketUpstream['upgrades'] = [];
  const server = http.createServer((_request, response) => response.writeHead(404).end());
  // Canton answers daml.ws.auth whatever was offered.
  const wss = new WebSocketServer({ noServer: true, handleProtocols: () => 'daml.ws.auth' });
  server.on('upgrade', (request, socket, head) => {
    const lines: string[] = [];
    for (let i = 0; i < request.rawHeaders.length; i += 2) {
      if (request.rawHeaders[i]!.toLowerCase() === 'sec-websocket-protocol') lines.push(request.rawHeaders[i + 1]!);
    }
    // A single-valued header read: the first line, as a framework's header lookup returns it.
    const token = lines[0] === undefined ? undefined : cantonToken(lines[0], reading);
    upgrades.push({ lines, token });
    wss.handleUpgrade(request, socket, head, (client) => {
      client.once('message', () => {
        if (token !== undefined) client.send(`token:${token}`);
        else
          client.send(
            JSON.stringify({
              code: 'NA',
              cause: 'A security-sensitive error has been received',
              errorCategory: -1,
              grpcCodeValue: 16,
            }),
          );
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    upgrades,
    close: async () => {
      for (const client of wss.clients) client.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
