// The fallback fixed upstream when nginx is not installed: node:http, the same 1 KB JSON for every
// method and path (request bodies are read and dropped). Slower than nginx: direct figures drop.
//   PORT=… node bench/fixed-upstream.mjs
import { createServer } from 'node:http';
import { FIXED_ANSWER } from './requests.mjs';

const body = Buffer.from(FIXED_ANSWER);
const headers = { 'content-type': 'application/json', 'content-length': String(body.length) };
const server = createServer({ keepAliveTimeout: 120_000 }, (request, response) => {
  request.resume();
  request.once('end', () => {
    response.writeHead(200, headers);
    response.end(body);
  });
});
server.listen(Number(process.env.PORT), '127.0.0.1');
process.once('SIGTERM', () => server.close(() => process.exit(0)).closeAllConnections());
