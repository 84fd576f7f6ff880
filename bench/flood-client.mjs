// One closed-loop HTTP client for bench/flood.mjs, in its own process: `connections` keep-alive
// connections (undici Pool), each sending its next GET when the previous answer is in, for
// `seconds`. Legitimate: one valid token on every call. Flood: a new token on every call, made of a
// template's header and claims and a random signature (distinct tokens: none is in the gateway's
// cache). Prints one JSON line: requests, seconds, statuses, errors.
//   node bench/flood-client.mjs '<json options>'
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';

const options = JSON.parse(process.argv[2]);
const { origin, path, connections, seconds } = options;

/** The token of the next call. */
function tokenSource() {
  if (options.token !== undefined) return () => options.token;
  const { header, claims, signatureBytes, randomKid } = options.flood;
  const encode = (value) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const fixedHead = `${encode(header)}.${encode(claims)}`;
  return () => {
    const head = randomKid ? `${encode({ ...header, kid: randomBytes(8).toString('hex') })}.${encode(claims)}` : fixedHead;
    return `${head}.${randomBytes(signatureBytes).toString('base64url')}`;
  };
}

const nextToken = tokenSource();
const pool = new Pool(origin, { connections, pipelining: 1, headersTimeout: 10_000, bodyTimeout: 10_000 });
const statuses = {};
let requests = 0;
let errors = 0;
const started = performance.now();
const deadline = started + seconds * 1000;

async function loop() {
  while (performance.now() < deadline) {
    try {
      const { statusCode, body } = await pool.request({ path, method: 'GET', headers: { authorization: `Bearer ${nextToken()}` } });
      await body.dump();
      statuses[statusCode] = (statuses[statusCode] ?? 0) + 1;
      requests += 1;
    } catch {
      errors += 1;
    }
  }
}

await Promise.all(Array.from({ length: connections }, loop));
const elapsed = (performance.now() - started) / 1000;
await pool.close();
process.stdout.write(`${JSON.stringify({ requests, seconds: elapsed, rps: requests / elapsed, statuses, errors })}\n`);
