// The floors: the least a Node proxy can cost on this machine, to read the gateway's figures
// against. No auth, no rules, no metrics, no logs, no header rewriting: a GET forwarded on a
// keep-alive undici Pool and the answer written back as it arrives.
//   FLOOR=node     node:http server + undici (no framework at all)
//   FLOOR=fastify  the same inside a Fastify 5 route (the reply hijacked, as the gateway does)
//   PORT=… UPSTREAM=http://127.0.0.1:… FLOOR=node|fastify node bench/floor-proxy.mjs
import http from 'node:http';
import Fastify from 'fastify';
import { Pool } from 'undici';

const { PORT, UPSTREAM, FLOOR = 'node' } = process.env;
const pool = new Pool(UPSTREAM, { connections: 128, pipelining: 1 });
// A bodiless request handed over already ended (Node 24.12+), as the gateway's listener does.
const serverOptions = { optimizeEmptyRequests: true };

const CLIENT_LEFT = new Error('the client left');

// Dispatched with a handler (no Readable, no pipe): the cheapest way undici forwards, and the way
// the gateway does (src/proxy/forward.ts).
function forward(request, response) {
  // A client that leaves cancels the upstream call, as the gateway's does. Without this, a call
  // whose answer met a closed socket stayed paused for a 'drain' that never came and kept its
  // pooled connection: each wrk run's end left some behind, and after about ten 2 s runs all 128
  // were taken and the floor answered nothing more.
  let controller;
  response.once('close', () => {
    if (!response.writableFinished) controller?.abort(CLIENT_LEFT);
  });
  pool.dispatch(
    { path: request.url, method: request.method, headers: request.headers },
    {
      onRequestStart(current) {
        controller = current;
        if (response.destroyed) current.abort(CLIENT_LEFT);
      },
      onResponseStart(_controller, statusCode, headers) {
        if (statusCode >= 200) response.writeHead(statusCode, headers);
      },
      onResponseData(current, chunk) {
        if (!response.write(chunk)) {
          current.pause();
          response.once('drain', () => current.resume());
        }
      },
      onResponseEnd() {
        response.end();
      },
      onResponseError() {
        if (response.destroyed) return; // the client left: nobody to answer
        if (response.headersSent) response.destroy();
        else response.writeHead(502).end();
      },
    },
  );
}

let close;
if (FLOOR === 'fastify') {
  const app = Fastify({ logger: false, http: serverOptions });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null));
  app.route({
    method: ['GET', 'HEAD', 'POST'],
    url: '/*',
    handler: (request, reply) => {
      reply.hijack();
      forward(request.raw, reply.raw);
    },
  });
  await app.listen({ host: '127.0.0.1', port: Number(PORT) });
  close = () => app.close();
} else {
  const server = http.createServer(serverOptions, forward);
  await new Promise((resolve) => server.listen(Number(PORT), '127.0.0.1', resolve));
  close = () => new Promise((resolve) => server.close(resolve));
}
const stop = () =>
  close()
    .then(() => pool.close())
    .then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
