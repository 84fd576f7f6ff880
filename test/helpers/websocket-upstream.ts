// A participant-like WebSocket endpoint on 127.0.0.1 port 0: answers Canton's way (daml.ws.auth),
// echoes frames, and keeps the headers of every upgrade that reached it.
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer, type ClientOptions } from 'ws';

export interface WebSocketUpstream {
  readonly url: string;
  /** Headers of every upgrade request that reached it. */
  readonly upgrades: http.IncomingHttpHeaders[];
  /** Every message that reached it, as text, in order. */
  readonly messages: string[];
  close(): Promise<void>;
}

/**
 * A ws server on 127.0.0.1 port 0 that answers Canton's way (daml.ws.auth) and echoes frames; over
 * TLS (wss, an https base URL) when given a certificate and key.
 */
export async function startWebSocketUpstream(tls?: { cert: Buffer; key: Buffer }): Promise<WebSocketUpstream> {
  const upgrades: http.IncomingHttpHeaders[] = [];
  const messages: string[] = [];
  const answer = (_request: http.IncomingMessage, response: http.ServerResponse) =>
    response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  const server = tls === undefined ? http.createServer(answer) : https.createServer(tls, answer);
  const wss = new WebSocketServer({
    noServer: true,
    handleProtocols: (protocols) => (protocols.has('daml.ws.auth') ? 'daml.ws.auth' : false),
  });
  wss.on('connection', (socket) =>
    socket.on('message', (data) => {
      const text = Buffer.from(data as Buffer).toString();
      messages.push(text);
      socket.send(`echo:${text}`);
    }),
  );
  server.on('upgrade', (request, socket, head) => {
    upgrades.push(request.headers);
    wss.handleUpgrade(request, socket, head, (client) => wss.emit('connection', client, request));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `${tls === undefined ? 'http' : 'https'}://127.0.0.1:${(server.address() as AddressInfo).port}`,
    upgrades,
    messages,
    close: async () => {
      for (const client of wss.clients) client.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * Opens a stream through the gateway, sends one frame and resolves with the first frame back (the
 * upstream above echoes it), then closes. Rejects when the upgrade is refused or fails.
 */
export function echoOnce(url: string, protocols: string[], options: ClientOptions = {}, frame = '{}'): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, protocols, options);
    socket.once('open', () => socket.send(frame));
    socket.once('message', (data) => {
      resolve(Buffer.from(data as Buffer).toString());
      socket.close();
    });
    socket.once('error', reject);
  });
}
