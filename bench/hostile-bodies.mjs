#!/usr/bin/env node
// npm run bench:bodies: what the worst bodies of a rule-checked route cost the gateway. The gateway
// runs as its own process (dist/main.js) under the heap flag the manifests ship, in the bench's
// production configuration; each shape of bench/hostile-body-shapes.mjs, filled to the largest size
// the route allows, is sent a few times while a second caller asks GET /v2/state/ledger-end every few
// milliseconds. Printed per shape: the answer, the gateway's CPU time per body (the least sensitive to
// a busy machine), the gateway's longest event-loop delay (perf_hooks monitorEventLoopDelay, read from
// its /metrics: no other call is served meanwhile), the other caller's worst wait, the slowest and
// median time to answer one body, and the gateway's peak resident memory. Then the body of issue 24 itself (10 MiB of floats), which is
// now refused before it is read. With --governed, the caller is one a ledger policy names instead, and
// the shapes are sent in submissions (submit-and-wait, whose body the policy reads itself) at 1 MiB and
// at limits.bodyBytes, while another caller, no policy's, asks its GET.
//   npm run bench:bodies -- [--size <bytes>] [--repeat <n>] [--root <built checkout>] [--governed [--shape <name>]]
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { gatewaySettings, startGateway } from './gateway.mjs';
import {
  hostileBodies,
  hostileSubmissions,
  SUBMIT_AND_WAIT_PATH,
  UPDATE_BY_OFFSET_PATH,
} from './hostile-body-shapes.mjs';
import { cpuSeconds } from './proc-stats.mjs';
import { freePort, portAccepts, startProcess, stopAll, stopChildrenOnExit, waitUntil } from './processes.mjs';
import { startIdentityProvider, USER_ID } from './tokens.mjs';

const HERE = new URL('..', import.meta.url).pathname.replace(/\/$/, '');
const log = (message = '') => process.stdout.write(`${message}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const MiB = 1024 * 1024;

/** The Node options the Kubernetes manifests give the gateway's container. */
function shippedNodeOptions(root) {
  const manifest = readFileSync(join(root, 'deploy/kubernetes/base/deployment.yaml'), 'utf8');
  const match = /name: NODE_OPTIONS\s+value: (.+)/.exec(manifest);
  if (match === null) throw new Error('deploy/kubernetes/base/deployment.yaml sets no NODE_OPTIONS');
  return match[1].trim().replace(/^["']|["']$/g, '');
}

/** The process's resident memory now, and its peak so far (VmRSS, VmHWM), in bytes. */
function memory(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
  return { rss: kib('VmRSS'), peak: kib('VmHWM') };
}

/** Calls GET /v2/state/ledger-end back to back (a pause of `gapMs` between calls) until stopped; keeps each wait. */
function startProbe(baseUrl, headers, gapMs = 5) {
  const waits = [];
  let running = true;
  const done = (async () => {
    while (running) {
      const started = performance.now();
      try {
        const response = await fetch(`${baseUrl}/v2/state/ledger-end`, {
          headers,
          signal: AbortSignal.timeout(30_000),
        });
        await response.arrayBuffer();
      } catch {
        waits.push(Infinity); // no answer: the gateway is gone
        break;
      }
      waits.push(performance.now() - started);
      await sleep(gapMs);
    }
  })();
  return {
    waits,
    stop: async () => {
      running = false;
      await done;
    },
  };
}

/** Samples the process's resident memory every few milliseconds until stopped; keeps the highest. */
function startMemoryWatch(pid) {
  let highest = 0;
  const timer = setInterval(() => {
    try {
      highest = Math.max(highest, memory(pid).rss);
    } catch {
      /* exited */
    }
  }, 5);
  return {
    stop: () => {
      clearInterval(timer);
      return highest;
    },
  };
}

const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * p))];
};
const ms = (value) => (Number.isFinite(value) ? `${value.toFixed(0)} ms` : 'none');
const mib = (bytes) => `${(bytes / MiB).toFixed(0)} MiB`;

/**
 * POSTs `body` with node:http. With `earlyAnswerMs`, the head goes first and the body only if no
 * answer came within that time: a refusal given on the declared length alone is read before the
 * gateway closes the connection (a body still arriving then would reset it, and lose the answer).
 */
function send(baseUrl, headers, body, earlyAnswerMs = 0, path = UPDATE_BY_OFFSET_PATH) {
  const started = performance.now();
  return new Promise((resolve) => {
    const request = http.request(
      `${baseUrl}${path}`,
      {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        timeout: 60_000,
      },
      (response) => {
        const chunks = [];
        response.on('data', (chunk) => chunks.push(chunk));
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          const code =
            response.statusCode < 300
              ? ''
              : response.headers['content-type']?.startsWith('application/json')
                ? JSON.parse(text).code
                : 'text/plain';
          resolve({ answer: `${response.statusCode} ${code}`.trim(), ms: performance.now() - started });
          request.destroy();
        });
      },
    );
    request.on('error', (error) => {
      if (request.res === null || request.res === undefined)
        resolve({ answer: `no answer (${error.code ?? error.message})`, ms: performance.now() - started });
    });
    request.on('timeout', () => request.destroy(new Error('timeout')));
    if (earlyAnswerMs === 0) {
      request.end(body);
      return;
    }
    request.flushHeaders();
    setTimeout(() => {
      if (!request.res) request.end(body);
    }, earlyAnswerMs);
  });
}

/** Sends `body` `repeat` times, one after another, with the probe running; what it cost. */
/** The gateway's longest event-loop delay since the previous scrape, in ms (prom-client's monitorEventLoopDelay gauge, which each scrape resets). */
async function eventLoopDelayMs(metricsUrl) {
  try {
    const text = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(30_000) })).text();
    return Number(/^nodejs_eventloop_lag_max_seconds(?:\{[^}]*\})? (\S+)/m.exec(text)?.[1] ?? NaN) * 1000;
  } catch {
    return NaN; // the gateway is gone
  }
}

async function measure(gateway, headers, body, repeat, earlyAnswerMs = 0, { path, probeHeaders = headers } = {}) {
  await eventLoopDelayMs(gateway.metricsUrl);
  const watch = startMemoryWatch(gateway.pid);
  const probe = startProbe(gateway.baseUrl, probeHeaders);
  await sleep(50);
  const sends = [];
  const cpus = [];
  for (let i = 0; i < repeat; i++) {
    const before = cpuSeconds(gateway.pid);
    sends.push(await send(gateway.baseUrl, headers, body, earlyAnswerMs, path));
    cpus.push((cpuSeconds(gateway.pid) - before) * 1000);
  }
  await sleep(50);
  await probe.stop();
  return {
    sends,
    cpus,
    waits: probe.waits,
    peakRss: watch.stop(),
    loopDelay: await eventLoopDelayMs(gateway.metricsUrl),
  };
}

/** One row per shape: what sending it `repeat` times cost. */
async function shapeRow(gateway, headers, label, body, repeat, options) {
  const { sends, cpus, waits, peakRss, loopDelay } = await measure(gateway, headers, body, repeat, 0, options);
  const answers = [...new Set(sends.map((s) => s.answer))].join(', ');
  const times = sends.map((s) => s.ms);
  log(
    `| ${label} | ${answers} | ${ms(percentile(cpus, 0.5))} | ${ms(loopDelay)} | ${ms(Math.max(...waits))} | ${ms(Math.max(...times))} / ${ms(percentile(times, 0.5))} | ${mib(peakRss)} |`,
  );
}

const TABLE_HEAD = [
  "| shape | answer | gateway CPU per body (median) | gateway event-loop delay (max) | other caller's worst wait | time to answer (worst / median) | peak resident |",
  '|---|---|---|---|---|---|---|',
];

/** The request rules' route: each shape at `size`, then the body of issue 24. */
async function ruleCheckedRun(gateway, headers, size, repeat) {
  log(`Each shape ${size} bytes, sent ${repeat} times, one after another:`);
  log('');
  for (const line of TABLE_HEAD) log(line);
  for (const { name, body } of hostileBodies(size)) await shapeRow(gateway, headers, name, body, repeat);
  const floats = hostileBodies(10 * MiB)[0].body;
  const issue = await measure(gateway, headers, floats, 1, 2_000);
  log(
    `| issue 24: 10 MiB of floats | ${issue.sends[0].answer} | ${ms(issue.cpus[0])} | ${ms(issue.loopDelay)} | ${ms(Math.max(...issue.waits))} | ${ms(issue.sends[0].ms)} | ${mib(issue.peakRss)} |`,
  );
}

/** A ledger policy naming the bench's caller: it may create, nothing else (its submissions' documents are built). */
const GOVERNING_POLICY = {
  name: 'bench-caller',
  principals: { subjects: [USER_ID] },
  rules: [{ name: 'creates', commandKinds: ['CreateCommand'] }],
};

/** A governed caller's submissions: each shape at 1 MiB and at the participant's limit; another caller's GET meanwhile. */
async function governedRun(gateway, headers, probeHeaders, bodyLimit, repeat, only) {
  log(
    `A caller ledgerPolicy names (policy ${GOVERNING_POLICY.name}); each shape in a submission to ${SUBMIT_AND_WAIT_PATH},`,
  );
  log(
    `at 1 MiB and at limits.bodyBytes (${bodyLimit}), sent ${repeat} times, one after another; the other caller is no policy's:`,
  );
  log('');
  for (const line of TABLE_HEAD) log(line);
  for (const size of [MiB, bodyLimit]) {
    for (const { name, body } of hostileSubmissions(size, USER_ID)) {
      if (only !== undefined && name !== only) continue;
      const label = `${name}, ${(size / MiB).toFixed(0)} MiB`;
      await shapeRow(gateway, headers, label, body, repeat, { path: SUBMIT_AND_WAIT_PATH, probeHeaders });
    }
  }
}

async function main() {
  const { values } = parseArgs({
    options: {
      size: { type: 'string' },
      repeat: { type: 'string', default: '3' },
      root: { type: 'string', default: HERE },
      governed: { type: 'boolean', default: false },
      shape: { type: 'string' },
    },
    strict: true,
  });
  const root = values.root;
  const repeat = Number(values.repeat);
  const nodeOptions = shippedNodeOptions(root);
  const { ConfigSchema } = await import(join(root, 'dist/config/schema.js'));
  const ruleLimit = ConfigSchema.properties.policy.properties.maxBodyBytes?.default;
  const bodyLimit = ConfigSchema.properties.limits.properties.bodyBytes.default;
  const size = values.size === undefined ? (ruleLimit ?? 10 * MiB) : Number(values.size);

  const dir = mkdtempSync(join(tmpdir(), 'ledger-gateway-bodies-'));
  stopChildrenOnExit(() => rmSync(dir, { recursive: true, force: true }));
  try {
    const idp = await startIdentityProvider(dir);
    const upstreamPort = await freePort();
    const upstream = startProcess('upstream', process.execPath, [join(HERE, 'bench/fixed-upstream.mjs')], {
      env: { ...process.env, PORT: String(upstreamPort) },
    });
    await waitUntil(upstream, 'listening', () => portAccepts(upstreamPort));
    const settings = await gatewaySettings(root, {
      apiPort: await freePort(),
      adminPort: await freePort(),
      upstreamUrl: `http://127.0.0.1:${upstreamPort}`,
      idp,
    });
    if (ruleLimit !== undefined && size > ruleLimit) settings.config.policy.maxBodyBytes = size;
    if (values.governed) settings.config.ledgerPolicy = { policies: [GOVERNING_POLICY] };
    const gateway = await startGateway(root, dir, 'gateway', settings, {
      nodeArgs: nodeOptions.split(/\s+/),
      logFile: '/dev/null',
    });
    const headers = { authorization: `Bearer ${await idp.mint()}` };
    const probeHeaders = values.governed ? { authorization: `Bearer ${await idp.mint('other-caller')}` } : headers;

    log(
      `Gateway: ${root === HERE ? 'this checkout' : root}, node ${nodeOptions}, policy.maxBodyBytes ${ruleLimit ?? '(none)'}, limits.bodyBytes ${settings.config.limits?.bodyBytes ?? 'default'}`,
    );
    log(
      `Idle: the other caller waits ${ms(percentile((await measure(gateway, headers, '{"offset":1}', 1, 0, { probeHeaders })).waits, 0.5))} (median), resident ${mib(memory(gateway.pid).rss)}`,
    );
    if (values.governed) await governedRun(gateway, headers, probeHeaders, bodyLimit, repeat, values.shape);
    else await ruleCheckedRun(gateway, headers, size, repeat);
    const alive = gateway.child.exitCode === null && gateway.child.signalCode === null;
    log('');
    log(
      alive
        ? `Gateway still running; peak resident over the run ${mib(memory(gateway.pid).peak)}.`
        : `Gateway EXITED (${gateway.child.exitCode ?? gateway.child.signalCode}).`,
    );
    await idp.close();
  } finally {
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  process.stderr.write(`${error.stack ?? error}\n`);
  process.exitCode = 1;
});
