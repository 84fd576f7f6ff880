// One closed-loop HTTP client for bench/flood.mjs, in its own process: `connections` keep-alive
// connections (undici Pool), each sending its next GET when the previous answer is in, for
// `seconds`. Legitimate: one valid token on every call. Flood: a new token on every call, made of a
// template's header and claims and a random signature (distinct tokens: none is in the gateway's
// cache). With `controlled`, it reads `pause`, `resume` and `stop` lines on stdin (paused: no new
// call is sent) and runs until `stop` or `seconds`. Prints one JSON line: requests, seconds, req/s,
// statuses, errors.
//   node bench/flood-client.mjs '<json options>'
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { Pool } from 'undici';

const options = JSON.parse(process.argv[2]);
const { origin, path, connections, seconds } = options;

/** The token of the next call. */
function tokenSource() {
  if (options.token !== undefined) return () => options.token;
  const { header, claims, signatureBytes, randomKid } = options.flood;
  const encode = (value) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const fixedHead = `${encode(header)}.${encode(claims)}`;
  const headOf = () =>
    randomKid ? `${encode({ ...header, kid: randomBytes(8).toString('hex') })}.${encode(claims)}` : fixedHead;
  return () => `${headOf()}.${randomBytes(signatureBytes).toString('base64url')}`;
}

let stopped = false;
let paused = false;
let resumed = Promise.resolve();
let resume = () => {};
if (options.controlled) {
  createInterface({ input: process.stdin }).on('line', (command) => {
    if (command === 'pause' && !paused) {
      paused = true;
      resumed = new Promise((resolve) => {
        resume = resolve;
      });
    } else if (command === 'resume' && paused) {
      paused = false;
      resume();
    } else if (command === 'stop') {
      stopped = true;
      resume();
    }
  });
}

const nextToken = tokenSource();
const pool = new Pool(origin, { connections, pipelining: 1, headersTimeout: 10_000, bodyTimeout: 10_000 });
const statuses = {};
let requests = 0;
let errors = 0;
const started = performance.now();
const deadline = started + seconds * 1000;

async function loop() {
  while (!stopped && performance.now() < deadline) {
    if (paused) {
      await resumed;
      continue;
    }
    try {
      const { statusCode, body } = await pool.request({
        path,
        method: 'GET',
        headers: { authorization: `Bearer ${nextToken()}` },
      });
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
process.exit(0); // stdin stays open under control
