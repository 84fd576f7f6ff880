// The reference the targets are relative to: Fastify + @fastify/http-proxy with its defaults, no
// auth, no rules, no metrics, no logs. WebSocket upgrades go to the sandbox (wsUpstream), with the
// two options Canton's stream needs: answer the `daml.ws.auth` subprotocol (the default picks the
// first offered, `jwt.token.…`, and the upstream's answer then fails the handshake: 1011), and pass
// the Authorization header on (the default passes only cookies).
//   PORT=… UPSTREAM=http://127.0.0.1:… WS_UPSTREAM=ws://127.0.0.1:… node bench/naive-proxy.mjs
import Fastify from 'fastify';
import proxy from '@fastify/http-proxy';

const { PORT, UPSTREAM, WS_UPSTREAM } = process.env;
const app = Fastify({ logger: false });
await app.register(proxy, {
  upstream: UPSTREAM,
  ...(WS_UPSTREAM && {
    websocket: true,
    wsUpstream: WS_UPSTREAM,
    wsServerOptions: { handleProtocols: (offered) => (offered.has('daml.ws.auth') ? 'daml.ws.auth' : false) },
    wsClientOptions: {
      rewriteRequestHeaders: (headers, request) => ({
        ...headers,
        ...(request.headers.authorization && { authorization: request.headers.authorization }),
      }),
    },
  }),
});
await app.listen({ host: '127.0.0.1', port: Number(PORT) });
const stop = () => app.close().then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
