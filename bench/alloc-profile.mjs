#!/usr/bin/env node
// npm run bench:alloc: how many bytes the gateway allocates per request, and where (by origin and
// by function), for the bench's scenarios; --floor also measures the Fastify floor (a Fastify route
// forwarding on undici, no features), the least a Fastify gateway allocates here. The gateway runs
// in the bench's production configuration with V8's sampling heap profiler loaded
// (bench/alloc-sampler.mjs); each scenario is warmed up, then sampled while wrk (or autocannon)
// loads it. Bytes per request do not move with the machine's speed the way CPU seconds do: a
// change to the hot path's allocations shows in one run. Needs a built dist/ (the npm script builds).
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { summarizeAllocations } from './alloc-summary.mjs';
import { createLoadGenerator } from './load-generator.mjs';
import { writeNginxUpstreamConfig } from './peers.mjs';
import {
  canPin,
  freePort,
  portAccepts,
  startProcess,
  stopAll,
  stopChildrenOnExit,
  waitUntil,
  which,
} from './processes.mjs';

const ROOT = new URL('..', import.meta.url).pathname.replace(/\/$/, '');
const SCENARIOS = ['ledger-end', 'version', 'submit'];
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const log = (message = '') => process.stdout.write(`${message}\n`);
/** Stops what this run started; replaced once there is more to clean up (temp dir, JWKS server). */
let cleanUp = stopAll;

const USAGE = `Usage: npm run bench:alloc -- [options]
  --scenario <list>   comma-separated: ${SCENARIOS.join(', ')} (default: all)
  --seconds <s>       sampled seconds per scenario (default 5), after as many of warm-up
  --floor             also the Fastify floor (proxied GET only: it has no features to sample)
  --top <n>           functions listed (default 20)
  --env <K=V>         an environment variable for the gateway (repeatable), e.g.
                      --env LEDGER_GATEWAY_LOG__ACCESS__ENABLED=false`;

function readOptions() {
  const { values } = parseArgs({
    options: {
      scenario: { type: 'string', default: SCENARIOS.join(',') },
      seconds: { type: 'string', default: '5' },
      floor: { type: 'boolean', default: false },
      top: { type: 'string', default: '20' },
      env: { type: 'string', multiple: true, default: [] },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) return undefined;
  const scenarios = values.scenario.split(',').map((name) => name.trim());
  const unknown = scenarios.filter((name) => !SCENARIOS.includes(name));
  if (unknown.length > 0) throw new Error(`unknown scenario ${unknown.join(', ')}: one of ${SCENARIOS.join(', ')}`);
  const seconds = Number(values.seconds);
  const top = Number(values.top);
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > 60)
    throw new Error('--seconds must be a whole number from 1 to 60');
  if (!Number.isInteger(top) || top < 1) throw new Error('--top must be a positive whole number');
  const bad = values.env.find((pair) => pair.indexOf('=') < 1);
  if (bad !== undefined) throw new Error(`--env ${bad}: expected NAME=value`);
  const env = Object.fromEntries(
    values.env.map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
  );
  return { scenarios, seconds, floor: values.floor, top, env };
}

/** Toggles the sampler in `handle`'s process and, on stop, waits (bounded) for its profile. */
async function sample(handle, file, during) {
  rmSync(file, { force: true });
  process.kill(handle.pid, 'SIGUSR2');
  await sleep(200); // the inspector session starts sampling asynchronously
  const figures = await during();
  process.kill(handle.pid, 'SIGUSR2');
  await waitUntil(
    handle,
    'the allocation profile written',
    () => existsSync(file) && readFileSync(file, 'utf8').endsWith('}'),
    30_000,
  );
  return { profile: JSON.parse(readFileSync(file, 'utf8')), figures };
}

async function main() {
  let options;
  try {
    options = readOptions();
  } catch (error) {
    console.error(`bench:alloc: ${error.message}\n\n${USAGE}`);
    process.exit(2);
  }
  if (options === undefined) {
    log(USAGE);
    return;
  }
  if (!existsSync(join(ROOT, 'dist/main.js'))) {
    console.error(
      'bench:alloc: dist/main.js is missing; run `npm run bench:alloc` (it builds first) or `npm run build`.',
    );
    process.exit(2);
  }
  const { HTTP_SCENARIOS, FIXED_ANSWER } = await import('./requests.mjs');
  const { gatewaySettings, startGateway } = await import('./gateway.mjs');
  const { startIdentityProvider } = await import('./tokens.mjs');

  const dir = mkdtempSync(join(os.tmpdir(), 'ledger-gateway-alloc-'));
  let idp;
  cleanUp = async () => {
    await stopAll();
    await idp?.close?.();
    rmSync(dir, { recursive: true, force: true });
  };
  stopChildrenOnExit(() => cleanUp());
  const pin = canPin() && os.cpus().length >= 2;
  const [coreProxy, coreLoad] = pin ? [0, 1] : [undefined, undefined];
  const load = createLoadGenerator({ root: ROOT, dir, core: coreLoad });
  if (load === undefined)
    throw new Error('no load generator: install wrk (apt-get install wrk) or add autocannon as a devDependency.');

  // The fixed upstream (nginx when installed, else node:http), as in npm run bench.
  const upstreamPort = await freePort();
  const upstream =
    which('nginx') !== undefined
      ? startProcess(
          'fixed upstream (nginx)',
          'nginx',
          [
            '-p',
            join(dir, 'nginx'),
            '-c',
            writeNginxUpstreamConfig(join(dir, 'nginx'), upstreamPort, FIXED_ANSWER),
            '-e',
            'stderr',
            '-g',
            'daemon off;',
          ],
          { core: coreLoad, stderr: join(dir, 'nginx.log') },
        )
      : startProcess('fixed upstream (node:http)', process.execPath, [join(ROOT, 'bench/fixed-upstream.mjs')], {
          core: coreLoad,
          cwd: ROOT,
          env: { ...process.env, PORT: String(upstreamPort) },
        });
  await waitUntil(upstream, `listening on ${upstreamPort}`, () => portAccepts(upstreamPort));
  const upstreamUrl = `http://127.0.0.1:${upstreamPort}`;

  idp = await startIdentityProvider(dir);
  const token = await idp.mint();
  const sampler = ['--import', join(ROOT, 'bench/alloc-sampler.mjs')];
  const profileFile = join(dir, 'allocations.heapprofile');
  const settings = await gatewaySettings(ROOT, {
    apiPort: await freePort(),
    adminPort: await freePort(),
    upstreamUrl,
    idp,
  });
  const gateway = await startGateway(ROOT, dir, 'gateway', settings, {
    core: coreProxy,
    nodeArgs: sampler,
    env: { ...options.env, ALLOC_PROFILE_OUT: profileFile },
  });

  log(
    `ledger-gateway bench:alloc: bytes allocated per request (V8 sampling heap profiler, objects already collected included); ${load.name}, 50 connections, ${options.seconds} s warm-up and ${options.seconds} s sampled per scenario${pin ? '; the proxy on core 0, load and upstream on core 1' : ''}`,
  );
  const measure = async (label, baseUrl, spec, handle) => {
    const run = (seconds) =>
      load.run({
        url: `${baseUrl}${spec.path}`,
        method: spec.method,
        body: spec.body,
        token,
        connections: 50,
        seconds,
      });
    await run(options.seconds);
    const { profile, figures } = await sample(handle, profileFile, () => run(options.seconds));
    log('');
    log(
      `${label}: ${spec.title} (${Math.round(figures.rps).toLocaleString('en')} req/s while sampled${figures.nonSuccess ? `, ${figures.nonSuccess} NOT 2xx` : ''})`,
    );
    for (const line of summarizeAllocations(profile, figures.requests, { top: options.top })) log(`  ${line}`);
  };
  for (const scenario of options.scenarios)
    await measure('gateway', gateway.baseUrl, HTTP_SCENARIOS[scenario], gateway);
  if (options.floor) {
    const port = await freePort();
    const floor = startProcess('Fastify floor', process.execPath, [...sampler, join(ROOT, 'bench/floor-proxy.mjs')], {
      core: coreProxy,
      cwd: ROOT,
      env: {
        ...process.env,
        NODE_ENV: 'production',
        PORT: String(port),
        UPSTREAM: upstreamUrl,
        FLOOR: 'fastify',
        ALLOC_PROFILE_OUT: profileFile,
      },
    });
    await waitUntil(floor, `listening on ${port}`, () => portAccepts(port));
    await measure('Fastify floor', `http://127.0.0.1:${port}`, HTTP_SCENARIOS['ledger-end'], floor);
  }
  await cleanUp();
}

main().catch(async (error) => {
  console.error(`bench:alloc: ${error.message}`);
  await cleanUp().catch(() => undefined);
  process.exit(1);
});
