#!/usr/bin/env node
// npm run bench: the gateway in its production configuration against the direct path and its
// peers (nginx, HAProxy, HAProxy verifying the JWT, a naive Fastify proxy), same machine, same run,
// interleaved and repeated; medians, ratios against the issue's targets, JSON results.
// Needs a built dist/ (the npm script builds first). bench/README.md: layout and caveats.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, relative } from 'node:path';
import { createLoadGenerator } from './load-generator.mjs';
import { readOptions, USAGE } from './options.mjs';
import {
  startFloorProxy,
  startHaproxy,
  startNaiveProxy,
  startNginxProxy,
  writeHaproxyConfig,
  writeNginxUpstreamConfig,
} from './peers.mjs';
import {
  busiestProcesses,
  cpuSeconds,
  loadAverage,
  machineCpuTicks,
  residentBytes,
  stealPercent,
} from './proc-stats.mjs';
import {
  canPin,
  freePort,
  pinSelf,
  portAccepts,
  startProcess,
  stopAll,
  stopChildrenOnExit,
  stopProcess,
  waitUntil,
  which,
} from './processes.mjs';
import { summarizeProfile } from './profile-summary.mjs';
import { median, ratios, renderRatios, renderTables, summarize } from './report.mjs';

const ROOT = new URL('..', import.meta.url).pathname.replace(/\/$/, '');
const PROFILE_DIR = join(ROOT, 'bench/results/profile');
/** The gateway process run under --cpu-prof (--profile). */
let profiled;
const MiB = 2 ** 20;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const log = (message = '') => process.stdout.write(`${message}\n`);

/** A missing tool or build: said in one line, exit code 2, no stack. */
class SetupError extends Error {}

// ---------------------------------------------------------------------------------------------
// Preconditions

function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

function requireBuild() {
  const main = join(ROOT, 'dist/main.js');
  if (!existsSync(main)) {
    console.error('bench: dist/main.js is missing; run `npm run bench` (it builds first) or `npm run build`.');
    process.exit(2);
  }
  if (newestMtime(join(ROOT, 'src')) > statSync(main).mtimeMs) {
    log('WARNING: src/ is newer than dist/main.js: the figures are for the last build (`npm run bench` builds first).');
  }
}

function firstLine(command, args) {
  const result = spawnSync(command, args, { encoding: 'utf8' });
  return `${result.stdout ?? ''}${result.stderr ?? ''}`
    .split('\n')
    .find((line) => line.trim() !== '')
    ?.trim();
}

function describeMachine() {
  const cpus = os.cpus();
  return {
    cpuModel: cpus[0]?.model ?? 'unknown',
    cores: os.availableParallelism?.() ?? cpus.length,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    loadAverageAtStart: loadAverage(),
    busiestAtStart: busiestProcesses(),
    cpuTicksAtStart: machineCpuTicks(),
  };
}

/** HAProxy >= 2.5 has jwt_verify; `haproxy -c` on a config that uses it says whether this build does. */
function haproxySupportsJwt(dir, idp) {
  const file = writeHaproxyConfig(dir, 'haproxy-jwt-check', {
    port: 1,
    upstreamPort: 2,
    jwt: { issuer: idp.issuer, publicKeyFile: idp.publicKeyFile },
  });
  return spawnSync('haproxy', ['-c', '-q', '-f', file], { encoding: 'utf8' }).status === 0;
}

// ---------------------------------------------------------------------------------------------
// Processes

const CORE_PROXY = 0;
const CORE_LOAD = 1;

async function startFixedUpstream(dir, kind, core, answer) {
  const port = await freePort();
  let handle;
  if (kind === 'nginx') {
    const prefix = join(dir, 'nginx-upstream');
    const config = writeNginxUpstreamConfig(prefix, port, answer);
    handle = startProcess(
      'fixed upstream (nginx)',
      'nginx',
      ['-p', prefix, '-c', config, '-e', 'stderr', '-g', 'daemon off;'],
      { core, stderr: join(dir, 'nginx-upstream.log') },
    );
  } else {
    handle = startProcess('fixed upstream (node:http)', process.execPath, [join(ROOT, 'bench/fixed-upstream.mjs')], {
      core,
      cwd: ROOT,
      env: { ...process.env, PORT: String(port) },
      stderr: join(dir, 'node-upstream.log'),
    });
  }
  await waitUntil(handle, `listening on ${port}`, () => portAccepts(port));
  return { ...handle, baseUrl: `http://127.0.0.1:${port}` };
}

async function startSandbox(dir, core) {
  const port = await freePort();
  const handle = startProcess(
    'sandbox',
    process.execPath,
    ['dist/sandbox/main.js', '--port', String(port), '--host', '127.0.0.1'],
    {
      core,
      cwd: ROOT,
      stderr: join(dir, 'sandbox.log'),
    },
  );
  await waitUntil(handle, `listening on ${port}`, () => portAccepts(port));
  return { ...handle, baseUrl: `http://127.0.0.1:${port}`, port };
}

// ---------------------------------------------------------------------------------------------
// Checks before measuring

async function call(url, { method = 'GET', body, token, headers = {} } = {}) {
  const response = await fetch(url, {
    method,
    body,
    headers: {
      ...(token && { authorization: `Bearer ${token}` }),
      ...(body !== undefined && { 'content-type': 'application/json' }),
      ...headers,
    },
    signal: AbortSignal.timeout(10_000),
  });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

/** What the gateway actually does with the configuration (auth, rules, tracing, the token counter). */
async function checkGateway(gateway, idp, scenarios) {
  const token = await idp.mint();
  const checks = {};
  const noToken = await call(`${gateway.baseUrl}/v2/state/ledger-end`);
  checks.auth = noToken.status === 401 ? 'on (no token: 401)' : `NOT ENFORCED (no token: HTTP ${noToken.status})`;
  const invalid = await call(`${gateway.baseUrl}${scenarios.submit.path}`, {
    method: 'POST',
    token,
    body: JSON.stringify({ commands: { commands: [], commandId: 'bench-invalid', actAs: ['Alice::1220'] } }),
  });
  checks.rules =
    invalid.status >= 400 && invalid.status < 500
      ? `on (empty commands: ${invalid.status} ${/"code"\s*:\s*"([^"]+)"/.exec(invalid.text)?.[1] ?? ''} from the gateway)`.replace(
          ' )',
          ')',
        )
      : `NOT ENFORCED (empty commands reached the fixed upstream: HTTP ${invalid.status})`;
  const traced = await call(`${gateway.baseUrl}/v2/state/ledger-end`, {
    token,
    headers: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
  });
  checks.tracing = traced.headers.get('traceresponse')
    ? 'on (traceresponse returned, no exporter)'
    : 'no traceresponse header: tracing not active';
  const counter = await verificationCountSafe(gateway.metricsUrl);
  checks.tokenCounter =
    counter === undefined
      ? 'not exposed: /metrics has no signature-verification counter (auth keeps `signatureChecks` in process only)'
      : `${counter.name} on /metrics`;
  return checks;
}

async function verificationCountSafe(metricsUrl) {
  const { verificationCount } = await import('./gateway.mjs');
  try {
    return await verificationCount(metricsUrl);
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Main

async function main() {
  let options;
  try {
    options = readOptions();
  } catch (error) {
    console.error(`bench: ${error.message}\n\n${USAGE}`);
    process.exit(2);
  }
  if (options.help) {
    log(USAGE);
    return;
  }
  requireBuild();
  // Imported after the build check: they read dist/.
  const { HTTP_SCENARIOS, FIXED_ANSWER } = await import('./requests.mjs');
  const { measureStream } = await import('./stream.mjs');
  const { gatewaySettings, startGateway } = await import('./gateway.mjs');
  const { startIdentityProvider } = await import('./tokens.mjs');

  const startedAt = Date.now();
  const machine = describeMachine();
  const dir = mkdtempSync(join(os.tmpdir(), 'ledger-gateway-bench-'));
  scratch.dir = dir;
  stopChildrenOnExit(cleanUp);

  const caveats = [];
  const pin = options.pin && canPin() && machine.cores >= 2;
  if (options.pin && !pin)
    caveats.push(
      canPin() ? 'fewer than 2 cores: processes are not pinned' : 'taskset not found: processes are not pinned',
    );
  const coreProxy = pin ? CORE_PROXY : undefined;
  const coreLoad = pin ? CORE_LOAD : undefined;
  if (pin) pinSelf(CORE_LOAD);

  const load = createLoadGenerator({ root: ROOT, dir, core: coreLoad });
  if (load === undefined)
    throw new SetupError('no load generator: install wrk (apt-get install wrk) or add autocannon as a devDependency.');
  const hasNginx = which('nginx') !== undefined;
  const hasHaproxy = which('haproxy') !== undefined;
  const upstreamKind = options.upstream ?? (hasNginx ? 'nginx' : 'node');
  if (upstreamKind === 'nginx' && !hasNginx) throw new SetupError('--upstream nginx: nginx is not installed');
  if (upstreamKind === 'node')
    caveats.push(
      hasNginx
        ? 'fixed upstream: node:http (--upstream node), slower than nginx: direct figures are lower'
        : 'nginx not installed: the fixed upstream is a node:http server (slower than nginx; direct figures are lower) and the nginx column is skipped',
    );
  if (load.name !== 'wrk')
    caveats.push(
      'wrk not installed: autocannon generates the load (it is slower than wrk and runs in Node: lower ceilings)',
    );

  const idp = await startIdentityProvider(dir);
  scratch.idp = idp;
  const haproxyJwt = hasHaproxy && haproxySupportsJwt(dir, idp);
  if (!hasHaproxy) caveats.push('HAProxy not installed: the haproxy and haproxy-jwt columns are skipped');
  else if (!haproxyJwt) caveats.push('this HAProxy has no jwt_verify (needs 2.5+): the haproxy-jwt column is skipped');

  const unavailable = {
    nginx: hasNginx ? undefined : 'nginx not installed',
    haproxy: hasHaproxy ? undefined : 'HAProxy not installed',
    'haproxy-jwt': haproxyJwt ? undefined : hasHaproxy ? 'HAProxy without jwt_verify' : 'HAProxy not installed',
  };

  const matrix = options.memory ? { 'ledger-end': ['gateway'] } : options.matrix;
  const httpScenarios = Object.keys(matrix).filter((scenario) => scenario !== 'stream' && matrix[scenario].length > 0);
  const pathsWanted = new Set(Object.entries(matrix).flatMap(([, paths]) => paths));
  const streamPaths = new Set(matrix.stream ?? []);
  const httpPaths = new Set(httpScenarios.flatMap((scenario) => matrix[scenario]));

  log(`ledger-gateway bench — ${new Date(startedAt).toISOString()}`);
  log(
    `machine: ${machine.cpuModel}, ${machine.cores} cores, ${machine.memoryGiB} GiB, ${machine.kernel}, Node ${machine.node}`,
  );
  log(
    `load average at start: ${machine.loadAverageAtStart.join(' ')}${machine.loadAverageAtStart[0] > 0.5 ? '  (something else is running: figures will be noisy)' : ''}`,
  );
  log(
    `load generator: ${load.version}; fixed upstream: ${upstreamKind === 'nginx' ? firstLine('nginx', ['-v']) : 'node:http (bench/fixed-upstream.mjs)'}; HAProxy: ${hasHaproxy ? firstLine('haproxy', ['-v']) : 'not installed'}${hasHaproxy && !haproxyJwt ? ' (no jwt_verify)' : ''}`,
  );
  log(
    pin
      ? `layout: core ${CORE_PROXY} = the proxy under test (one loaded at a time); core ${CORE_LOAD} = wrk (1 thread) + fixed upstream (1 worker) + sandbox (WebSocket upstream) + this script`
      : 'layout: not pinned (taskset missing or --no-pin): load generator, upstream and proxy share every core',
  );

  // --- processes --------------------------------------------------------------------------------
  const targets = {};
  const sandbox = await startSandbox(dir, coreLoad);
  const upstream =
    httpPaths.size > 0 || pathsWanted.has('gateway')
      ? await startFixedUpstream(dir, upstreamKind, coreLoad, FIXED_ANSWER)
      : undefined;
  const upstreamPort = upstream ? Number(new URL(upstream.baseUrl).port) : sandbox.port;
  targets.direct = { http: upstream?.baseUrl, stream: sandbox.baseUrl };

  let gatewayFeatures;
  let gatewayMissing = [];
  if (pathsWanted.has('gateway')) {
    const logFile = options.gatewayLog;
    if (httpPaths.has('gateway')) {
      const settings = await gatewaySettings(ROOT, {
        apiPort: await freePort(),
        adminPort: await freePort(),
        upstreamUrl: upstream.baseUrl,
        idp,
      });
      gatewayFeatures = settings.features;
      gatewayMissing = settings.missing;
      const nodeArgs = options.profile ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`] : [];
      if (options.profile) {
        rmSync(PROFILE_DIR, { recursive: true, force: true });
        mkdirSync(PROFILE_DIR, { recursive: true });
      }
      const gateway = await startGateway(ROOT, dir, 'gateway', settings, { core: coreProxy, logFile, nodeArgs });
      if (options.profile) profiled = gateway;
      targets.gateway = { http: gateway.baseUrl, pid: gateway.pid, metricsUrl: gateway.metricsUrl };
    }
    if (streamPaths.has('gateway')) {
      // The WebSocket stream needs the sandbox as upstream: a second gateway process, same settings.
      const settings = await gatewaySettings(ROOT, {
        apiPort: await freePort(),
        adminPort: await freePort(),
        upstreamUrl: sandbox.baseUrl,
        idp,
      });
      gatewayFeatures ??= settings.features;
      const gatewayWs = await startGateway(ROOT, dir, 'gateway-ws', settings, { core: coreProxy, logFile });
      targets.gateway = {
        ...targets.gateway,
        stream: gatewayWs.baseUrl,
        streamPid: gatewayWs.pid,
        streamMetricsUrl: gatewayWs.metricsUrl,
      };
    }
  }
  if (pathsWanted.has('nginx') && hasNginx) {
    const proxy = await startNginxProxy(dir, coreProxy, upstreamPort, sandbox.port);
    targets.nginx = { http: proxy.baseUrl, stream: proxy.baseUrl, pid: proxy.pid, streamPid: proxy.pid };
  }
  if (pathsWanted.has('haproxy') && hasHaproxy) {
    const proxy = await startHaproxy(dir, 'haproxy', coreProxy, upstreamPort, sandbox.port);
    targets.haproxy = { http: proxy.baseUrl, stream: proxy.baseUrl, pid: proxy.pid, streamPid: proxy.pid };
  }
  if (pathsWanted.has('haproxy-jwt') && haproxyJwt) {
    const proxy = await startHaproxy(dir, 'haproxy-jwt', coreProxy, upstreamPort, sandbox.port, {
      issuer: idp.issuer,
      publicKeyFile: idp.publicKeyFile,
    });
    targets['haproxy-jwt'] = { http: proxy.baseUrl, stream: proxy.baseUrl, pid: proxy.pid, streamPid: proxy.pid };
  }
  if (pathsWanted.has('naive')) {
    const proxy = await startNaiveProxy(dir, coreProxy, upstream?.baseUrl ?? sandbox.baseUrl, sandbox.port);
    targets.naive = { http: proxy.baseUrl, stream: proxy.baseUrl, pid: proxy.pid, streamPid: proxy.pid };
  }
  for (const floor of ['fastify', 'node']) {
    if (!pathsWanted.has(`${floor}-floor`)) continue;
    const proxy = await startFloorProxy(dir, coreProxy, upstream?.baseUrl ?? sandbox.baseUrl, floor);
    targets[`${floor}-floor`] = { http: proxy.baseUrl, pid: proxy.pid }; // plain GETs only: no stream
  }

  // --- checks -----------------------------------------------------------------------------------
  const checks = {};
  if (targets.gateway?.http) {
    checks.gateway = await checkGateway(
      { baseUrl: targets.gateway.http, metricsUrl: targets.gateway.metricsUrl },
      idp,
      HTTP_SCENARIOS,
    );
  }
  // The POST bodies must be ones Canton accepts: the sandbox emulates its decoding and validation.
  const validity = {};
  for (const scenario of ['submit', 'update-by-offset']) {
    const spec = HTTP_SCENARIOS[scenario];
    const answer = await call(`${sandbox.baseUrl}${spec.path}`, {
      method: 'POST',
      body: spec.body,
      token: await idp.mint(),
    });
    validity[scenario] =
      answer.status === 200
        ? 'accepted by the sandbox (200)'
        : `REFUSED by the sandbox: ${answer.status} ${answer.text.slice(0, 200)}`;
  }
  checks.bodies = validity;

  const skipped = [];
  const pairs = [];
  for (const [scenario, paths] of Object.entries(matrix)) {
    for (const path of paths) {
      const target = targets[path];
      const url = scenario === 'stream' ? target?.stream : target?.http;
      if (url === undefined) {
        skipped.push({ scenario, path, reason: unavailable[path] ?? 'not started' });
        continue;
      }
      try {
        if (scenario === 'stream') {
          await measureStream({ baseUrl: url, token: await idp.mint(), messages: 50, timeoutMs: 10_000 });
        } else {
          const spec = HTTP_SCENARIOS[scenario];
          const answer = await call(`${url}${spec.path}`, {
            method: spec.method,
            body: spec.body,
            token: await idp.mint(),
          });
          if (answer.status !== 200) throw new Error(`HTTP ${answer.status}: ${answer.text.slice(0, 300)}`);
        }
        pairs.push({ scenario, path });
      } catch (error) {
        skipped.push({ scenario, path, reason: `check failed: ${error.message}` });
      }
    }
  }

  log('');
  if (gatewayFeatures) {
    log('gateway configuration (production):');
    for (const [feature, state] of Object.entries(gatewayFeatures)) log(`  ${feature.padEnd(10)} ${state}`);
    for (const [feature, state] of Object.entries(checks.gateway ?? {})) log(`  check ${feature.padEnd(12)} ${state}`);
    if (gatewayMissing.length > 0) log(`  NOT IN THIS BUILD: ${gatewayMissing.join(', ')} (left out of the config)`);
  }
  for (const [scenario, state] of Object.entries(checks.bodies)) log(`  body ${scenario.padEnd(17)} ${state}`);
  for (const skip of skipped) log(`  skipped: ${skip.scenario} × ${skip.path}: ${skip.reason}`);

  const result = {
    date: new Date(startedAt).toISOString(),
    command: `node bench/run.mjs ${process.argv.slice(2).join(' ')}`.trim(),
    machine,
    tools: {
      loadGenerator: load.version,
      upstream: upstreamKind === 'nginx' ? firstLine('nginx', ['-v']) : 'node:http',
      haproxy: hasHaproxy ? firstLine('haproxy', ['-v']) : null,
    },
    layout: pin
      ? { proxyCore: CORE_PROXY, loadCore: CORE_LOAD, load: 'wrk + fixed upstream + sandbox + bench script' }
      : 'not pinned',
    options: { ...options, matrix },
    gateway: { features: gatewayFeatures, missing: gatewayMissing, checks: checks.gateway },
    bodies: checks.bodies,
    skipped,
    caveats,
    runs: [],
  };

  const loadSamples = [];
  async function measureHttp(scenario, path, round, { seconds = options.duration, connections } = {}) {
    const spec = HTTP_SCENARIOS[scenario];
    const target = targets[path];
    const token = await idp.mint(); // a new token per run: none outlives the 300 s lifetime limit
    const counter = path === 'gateway' ? await verificationCountSafe(target.metricsUrl) : undefined;
    const cpuBefore = target.pid ? cpuSeconds(target.pid) : undefined;
    const figures = await load.run({
      url: `${target.http}${spec.path}`,
      method: spec.method,
      body: spec.body,
      token,
      connections: connections ?? (spec.lowLoad ? options.latencyConnections : options.connections),
      seconds,
    });
    const cpuAfter = target.pid ? cpuSeconds(target.pid) : undefined;
    const rssMiB = target.pid ? residentBytes(target.pid) / MiB : undefined;
    const counterAfter = counter !== undefined ? await verificationCountSafe(target.metricsUrl) : undefined;
    loadSamples.push(loadAverage()[0]);
    return {
      kind: 'http',
      scenario,
      path,
      round,
      connections: connections ?? (spec.lowLoad ? options.latencyConnections : options.connections),
      ...figures,
      cpuSecondsPer10k:
        cpuBefore !== undefined && figures.requests > 0
          ? ((cpuAfter - cpuBefore) / figures.requests) * 10_000
          : undefined,
      rssMiB,
      verifications: counterAfter !== undefined ? counterAfter.total - counter.total : undefined,
    };
  }

  async function measureStreamRun(path, round) {
    const target = targets[path];
    const pid = target.streamPid;
    const cpuBefore = pid ? cpuSeconds(pid) : undefined;
    const figures = await measureStream({
      baseUrl: target.stream,
      token: await idp.mint(),
      messages: options.streamMessages,
    });
    const cpuAfter = pid ? cpuSeconds(pid) : undefined;
    return {
      kind: 'stream',
      scenario: 'stream',
      path,
      round,
      ...figures,
      cpuSecondsPer10k: cpuBefore !== undefined ? ((cpuAfter - cpuBefore) / figures.messages) * 10_000 : undefined,
      rssMiB: pid ? residentBytes(pid) / MiB : undefined,
    };
  }

  if (options.memory) {
    result.memory = await memorySoak({ options, targets, measureHttp, httpScenarios: HTTP_SCENARIOS });
  } else {
    // --- warm-up: the Node processes JIT-compile their paths ----------------------------------
    const warm = pairs.filter(
      (pair) =>
        pair.scenario !== 'stream' &&
        pair.scenario !== 'latency' &&
        (pair.path === 'gateway' || pair.path === 'naive' || pair.path.endsWith('-floor')),
    );
    const overhead = 0.5; // wrk start and stop, /proc and /metrics reads, the pause between runs
    const estimate =
      warm.length * (options.warmupSeconds + overhead) +
      options.repetitions *
        pairs.reduce((sum, pair) => sum + (pair.scenario === 'stream' ? 1 : options.duration + overhead), 0);
    log('');
    log(
      `plan: ${pairs.length} scenario × path pairs, ${options.repetitions} interleaved round(s) of ${options.duration} s runs, ${options.connections} connections (latency: ${options.latencyConnections}); about ${(Math.ceil(estimate / 30) / 2).toFixed(1)} min`,
    );
    for (const pair of warm) await measureHttp(pair.scenario, pair.path, 0, { seconds: options.warmupSeconds });
    for (const pair of pairs.filter((candidate) => candidate.scenario === 'stream'))
      await measureStreamRun(pair.path, 0);

    for (let round = 1; round <= options.repetitions; round++) {
      // Interleaved: every pair once per round, the order rotated so that no pair always goes first.
      const shift = ((round - 1) * Math.ceil(pairs.length / options.repetitions)) % Math.max(1, pairs.length);
      const order = [...pairs.slice(shift), ...pairs.slice(0, shift)];
      for (const pair of order) {
        const run =
          pair.scenario === 'stream'
            ? await measureStreamRun(pair.path, round)
            : await measureHttp(pair.scenario, pair.path, round);
        result.runs.push(run);
        log(
          `  round ${round}/${options.repetitions}  ${pair.scenario.padEnd(16)} ${pair.path.padEnd(11)} ${
            run.kind === 'stream'
              ? `${Math.round(run.messagesPerSecond).toLocaleString('en').padStart(8)} msg/s  ${run.seconds.toFixed(2)} s`
              : `${Math.round(run.rps).toLocaleString('en').padStart(8)} req/s  p50 ${run.latencyMs.p50.toFixed(2)} ms  p99 ${run.latencyMs.p99.toFixed(2)} ms${run.nonSuccess ? `  NON-2XX ${run.nonSuccess}` : ''}`
          }`,
        );
        await sleep(200);
      }
    }
  }

  // --- report -------------------------------------------------------------------------------------
  machine.loadAverageAtEnd = loadAverage();
  machine.busiestAtEnd = busiestProcesses();
  machine.stealPercent = stealPercent(machine.cpuTicksAtStart, machineCpuTicks());
  if (machine.stealPercent > 5)
    caveats.push(
      `the hypervisor took ${machine.stealPercent.toFixed(0)}% of this VM's CPU time during the run (steal, /proc/stat): every path ran slower than on a quiet host; compare ratios, not figures`,
    );
  const maxLoad = Math.max(machine.loadAverageAtStart[0] ?? 0, ...loadSamples);
  if (maxLoad > 2.6)
    caveats.push(
      `the 1-minute load average reached ${maxLoad.toFixed(2)} (the bench alone keeps it near 2 on 2 cores): other processes competed for the cores`,
    );
  result.summary = summarize(result.runs.filter((run) => run.round > 0));
  result.ratios = ratios(result.summary, result.memory);
  result.durationSeconds = Math.round((Date.now() - startedAt) / 1000);

  const titles = Object.fromEntries(Object.entries(HTTP_SCENARIOS).map(([name, spec]) => [name, spec.title]));
  log('');
  if (result.summary.length > 0) {
    log(
      `medians of ${options.repetitions} run(s) per row; CPU = the proxy process tree's user+system seconds per 10,000 requests (messages); RSS after the run`,
    );
    log(renderTables(result.summary, titles));
    log('');
  }
  if (result.memory) {
    const m = result.memory;
    log(
      `memory soak: ${m.requests.toLocaleString('en')} requests in ${m.seconds.toFixed(0)} s after ${m.warmupRequests.toLocaleString('en')} warm-up requests`,
    );
    log(
      `  RSS after warm-up ${m.rssAfterWarmupMiB.toFixed(1)} MiB, at the end ${m.rssEndMiB.toFixed(1)} MiB (${m.growthPercent >= 0 ? '+' : ''}${m.growthPercent.toFixed(1)} %), peak ${m.rssPeakMiB.toFixed(1)} MiB`,
    );
    log(`  RSS after each chunk (MiB): ${m.rssAfterChunksMiB.map((value) => value.toFixed(0)).join(' ')}`);
    if (m.secondHalfGrowthPercent !== undefined)
      log(
        `  growth over the second half of the chunks: ${m.secondHalfGrowthPercent >= 0 ? '+' : ''}${m.secondHalfGrowthPercent.toFixed(1)} % (a leak keeps growing; a settling heap is flat here)`,
      );
    if (m.heapUsedMedianFirstHalfMiB !== undefined)
      log(
        `  V8 heap in use after the chunks, median of the first half ${m.heapUsedMedianFirstHalfMiB.toFixed(1)} MiB, of the second half ${m.heapUsedMedianSecondHalfMiB.toFixed(1)} MiB (a leak raises it; RSS also moves as V8 grows and shrinks its heap)`,
      );
    log(
      `  non-2xx/errors: ${m.nonSuccess}; signature verifications: ${m.verifications ?? 'not exposed'}${m.verifications !== undefined ? ` (${(m.verifications / m.requests).toFixed(6)} per request)` : ''}`,
    );
    log('');
  }
  // The soak measures one thing; the comparison ratios would all read "not measured".
  log(
    renderRatios(
      options.memory
        ? result.ratios.filter((entry) => entry.value !== undefined || entry.name.startsWith('token cache'))
        : result.ratios,
    ),
  );
  if (checks.gateway?.tokenCounter?.startsWith('not exposed'))
    log('  (token cache: the counter is not on /metrics, so verifications per request cannot be read)');
  result.jwksFetches = idp.jwksFetches;
  log(
    `JWKS fetched ${idp.jwksFetches} time(s) (expected: once per gateway process at start, and once per auth.keySets.refreshIntervalMs, 5 min by default, after that)`,
  );
  log('');
  if (options.quick)
    caveats.push('--quick: short single runs check that the harness works; the figures are not for comparison');
  for (const caveat of caveats) log(`caveat: ${caveat}`);
  log(
    `load average at end: ${machine.loadAverageAtEnd.join(' ')}; hypervisor steal during the run: ${machine.stealPercent === undefined ? 'unknown' : `${machine.stealPercent.toFixed(1)}%`}; run took ${result.durationSeconds} s`,
  );

  const out = join(ROOT, options.out);
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
  log(`results: ${relative(ROOT, out)}`);
  if (profiled !== undefined) await reportProfile(profiled);
}

/** --profile: V8 writes the profile when the gateway exits, so it is stopped (SIGTERM) first. */
async function reportProfile(gateway) {
  await stopProcess(gateway, 30_000);
  const file = readdirSync(PROFILE_DIR)
    .filter((name) => name.endsWith('.cpuprofile'))
    .map((name) => join(PROFILE_DIR, name))[0];
  if (file === undefined)
    throw new Error(`--profile: the gateway wrote no profile into ${relative(ROOT, PROFILE_DIR)}`);
  log('');
  // The first seconds are start-up (module loading, key fetch, the readiness probe), not load.
  for (const line of summarizeProfile(file, { skipSeconds: 3 })) log(line);
  log(
    `profile: ${relative(ROOT, file)} (a flame graph: Chrome DevTools, Performance, "Load profile"; or speedscope.app)`,
  );
}

/** The median of the first (half 0) or second (half 1) half of the defined values, or undefined. */
function halfMedian(values, half) {
  const known = values.filter((value) => value !== undefined);
  if (known.length < 2) return undefined;
  const middle = Math.floor(known.length / 2);
  return median(half === 0 ? known.slice(0, middle) : known.slice(middle));
}

/** Memory soak: warm-up, then `memoryRequests` requests through the gateway in chunks (a fresh token each). */
async function memorySoak({ options, targets, measureHttp, httpScenarios }) {
  const pid = targets.gateway?.pid;
  if (pid === undefined) throw new Error('--memory needs the gateway (check the skipped lines above)');
  const rotation = ['ledger-end', 'submit', 'update-by-offset', 'version'].filter(
    (scenario) => httpScenarios[scenario],
  );
  const chunkSeconds = options.quick ? 3 : 15;
  const requests = options.quick ? Math.min(options.memoryRequests, 100_000) : options.memoryRequests;
  log('');
  log(
    `memory soak: warm-up (${rotation.length} × ${chunkSeconds} s), then ${requests.toLocaleString('en')} requests in ${chunkSeconds} s chunks rotating ${rotation.join(', ')}`,
  );
  let warmupRequests = 0;
  for (const scenario of rotation)
    warmupRequests += (await measureHttp(scenario, 'gateway', 0, { seconds: chunkSeconds })).requests;
  await sleep(1_000);
  const rssAfterWarmup = residentBytes(pid);
  let peak = rssAfterWarmup;
  const sampler = setInterval(() => {
    peak = Math.max(peak, residentBytes(pid));
  }, 500);
  const started = Date.now();
  const afterChunks = [];
  // The V8 heap in use after each chunk: a leak shows here as a rising floor, whatever V8 does with RSS.
  const { heapUsedBytes } = await import('./gateway.mjs');
  const heapUsedMiB = async () => {
    try {
      const bytes = await heapUsedBytes(targets.gateway.metricsUrl);
      return bytes === undefined ? undefined : bytes / MiB;
    } catch {
      return undefined;
    }
  };
  const heapAfterChunks = [];
  let done = 0;
  let nonSuccess = 0;
  let verifications = 0;
  let chunk = 0;
  try {
    while (done < requests) {
      const scenario = rotation[chunk++ % rotation.length];
      const run = await measureHttp(scenario, 'gateway', 1, { seconds: chunkSeconds });
      if (run.requests === 0) throw new Error('the gateway answered nothing during a soak chunk');
      done += run.requests;
      nonSuccess += run.nonSuccess + run.errors.connect + run.errors.read + run.errors.write + run.errors.timeout;
      verifications =
        run.verifications === undefined || verifications === undefined ? undefined : verifications + run.verifications;
      afterChunks.push(residentBytes(pid) / MiB);
      heapAfterChunks.push(await heapUsedMiB());
      const heap = heapAfterChunks.at(-1);
      log(
        `  ${done.toLocaleString('en').padStart(10)} requests  RSS ${afterChunks.at(-1).toFixed(1)} MiB  heap used ${heap === undefined ? '?' : heap.toFixed(1)} MiB  (${scenario}, ${Math.round(run.rps).toLocaleString('en')} req/s)`,
      );
    }
  } finally {
    clearInterval(sampler);
  }
  await sleep(2_000);
  const rssEnd = residentBytes(pid);
  return {
    requests: done,
    seconds: (Date.now() - started) / 1000,
    warmupRequests,
    rssAfterWarmupMiB: rssAfterWarmup / MiB,
    rssEndMiB: rssEnd / MiB,
    rssPeakMiB: Math.max(peak, rssEnd) / MiB,
    growthPercent: ((rssEnd - rssAfterWarmup) / rssAfterWarmup) * 100,
    // A leak keeps growing; a heap settling into its size grows early and then stays flat.
    secondHalfGrowthPercent:
      afterChunks.length >= 2
        ? ((rssEnd / MiB - afterChunks[Math.floor((afterChunks.length - 1) / 2)]) /
            afterChunks[Math.floor((afterChunks.length - 1) / 2)]) *
          100
        : undefined,
    rssAfterChunksMiB: afterChunks,
    rssMedianOfChunksMiB: median(afterChunks),
    heapUsedAfterChunksMiB: heapAfterChunks,
    // Heap in use swings with the garbage not yet collected: compare the halves' medians.
    heapUsedMedianFirstHalfMiB: halfMedian(heapAfterChunks, 0),
    heapUsedMedianSecondHalfMiB: halfMedian(heapAfterChunks, 1),
    nonSuccess,
    verifications,
  };
}

/** What cleanUp removes besides the processes: the JWKS server and the temp dir (configs, logs). */
const scratch = { dir: undefined, idp: undefined, keep: false };

async function cleanUp() {
  await stopAll();
  await scratch.idp?.close();
  scratch.idp = undefined;
  if (scratch.dir !== undefined) {
    if (scratch.keep) console.error(`bench: configs and process logs kept in ${scratch.dir}`);
    else rmSync(scratch.dir, { recursive: true, force: true });
  }
  scratch.dir = undefined;
}

main()
  .catch((error) => {
    if (error instanceof SetupError) {
      console.error(`bench: ${error.message}`);
      process.exitCode = 2;
      return;
    }
    console.error(`bench failed: ${error.stack ?? error}`);
    scratch.keep = true;
    process.exitCode = 1;
  })
  .finally(async () => {
    await cleanUp();
    process.exit(process.exitCode ?? 0);
  });
