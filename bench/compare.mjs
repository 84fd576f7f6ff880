#!/usr/bin/env node
// npm run bench:compare -- --base <git ref>: is this build cheaper than another one? Both gateways
// run in the bench's production configuration, pinned to the SAME core, and are loaded AT THE SAME
// TIME (two wrk processes on the other core), round after round; each round compares their CPU
// seconds per request. On a shared VM one build's figures move by ±30% between runs; two builds
// loaded together see the same noise, so their ratio holds still. Needs git and a built dist/
// (the npm script builds first); the base is built from a temporary git worktree.
// --against <peer> pairs this build with one of the bench's Node peers instead (the naive Fastify
// proxy or a floor): the issue's first ratio, paired. Not nginx or HAProxy: sharing a core inflates
// a Node process's CPU per request far more than theirs (paired with HAProxy + jwt_verify the
// gateway measured 3.0x its CPU per request, alone 1.6x), so only like-with-like pairs hold.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createLoadGenerator } from './load-generator.mjs';
import { startFloorProxy, startNaiveProxy, writeNginxUpstreamConfig } from './peers.mjs';
import { cpuSeconds, machineCpuTicks, stealPercent } from './proc-stats.mjs';
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
import { median } from './report.mjs';

const ROOT = new URL('..', import.meta.url).pathname.replace(/\/$/, '');
const CORE_GATEWAYS = 0;
const CORE_LOAD = 1;
const log = (message = '') => process.stdout.write(`${message}\n`);

/** The peers --against can start, pinned to a core, in front of the fixed upstream (as in npm run bench). */
const PEERS = {
  naive: {
    label: 'naive Fastify proxy',
    start: (dir, core, upstream) => startNaiveProxy(dir, core, upstream.url, upstream.port),
  },
  'fastify-floor': {
    label: 'Fastify floor',
    start: (dir, core, upstream) => startFloorProxy(dir, core, upstream.url, 'fastify'),
  },
  'node-floor': {
    label: 'node:http floor',
    start: (dir, core, upstream) => startFloorProxy(dir, core, upstream.url, 'node'),
  },
};

const USAGE = `Usage: npm run bench:compare -- (--base <git ref> | --against <peer>) [options]
  --base <ref>          the build to compare with (a commit, branch or tag), built in a temporary worktree
  --against <peer>      a peer to compare with instead: ${Object.keys(PEERS).join(', ')}
  --scenario <name>     ledger-end (proxied GET, default), version (cached), submit, submit-4mib or update-by-offset
  --rounds <n>          rounds, both gateways loaded together in each (default 8)
  --seconds <s>         seconds per round (default 4)
  --warmup <s>          seconds of load on both before the first round (default 2): JIT, pools, token
                        cache. Two processes sharing a core settle slowly: a 1 KB submit's CPU per call
                        fell from 387 to about 170 µs over the first 20 s of rounds, the ledger policy's
                        stage from 45 to 6-8 µs per call over the first minute
  --connections <n>     wrk connections per gateway (default 50)
  --pace-ms <n>         each connection waits n ms before its next request: a load below saturation, so
                        both sides serve about the same rate and their CPU per request and latency compare
                        like with like (closed-loop at saturation, a side that waits on its disk idles
                        between wake-ups and pays more per request for it)
  --profile <dir>       each gateway writes a V8 CPU profile into <dir>/<base|this>/; the end prints where
                        each side's CPU per request went, by function and file (profile shares × measured
                        CPU; bench/profile-diff.mjs reads the profiles again)
  --profile-interval <µs>  the profiler's sampling interval (V8's default 1000): finer for short runs
  --env <K=V>           an environment variable for both builds (repeatable); {side} in V becomes base or
                        this, e.g. --env LEDGER_GATEWAY_AUDIT__DIRECTORY=/tmp/trail-{side}
  --base-env <K=V>      an environment variable for the base only (repeatable): the same comparison with
                        the sides swapped, to tell a setting's cost from a bias of the side it runs on
  --this-env <K=V>      an environment variable for this build only (repeatable): compare one build with
                        itself, a setting on and off, e.g. --base HEAD --this-env LEDGER_GATEWAY_AUDIT__ENABLED=true
  --both-ways           with --this-env (and no --base-env): a second run with that setting on the base
                        instead, then the geometric mean of the two readings (the second inverted): a
                        setting's cost without the bias of the side it runs on
  --this-token <token>  this build's load presents this bearer token instead of the bench's JWT, e.g. a
                        gateway key (docs/consumers.md) against the cached JWT of the same build`;

function readOptions() {
  const { values } = parseArgs({
    options: {
      base: { type: 'string' },
      against: { type: 'string' },
      scenario: { type: 'string', default: 'ledger-end' },
      rounds: { type: 'string', default: '8' },
      seconds: { type: 'string', default: '4' },
      connections: { type: 'string', default: '50' },
      'this-env': { type: 'string', multiple: true, default: [] },
      'base-env': { type: 'string', multiple: true, default: [] },
      'this-token': { type: 'string' },
      env: { type: 'string', multiple: true, default: [] },
      profile: { type: 'string' },
      'profile-interval': { type: 'string' },
      'pace-ms': { type: 'string' },
      warmup: { type: 'string', default: '2' },
      'both-ways': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) return undefined;
  if ((values.base === undefined) === (values.against === undefined))
    throw new Error('give one of --base <git ref> and --against <peer>');
  if (values.against !== undefined && PEERS[values.against] === undefined)
    throw new Error(`--against must be one of ${Object.keys(PEERS).join(', ')}`);
  if (
    values['both-ways'] &&
    (values.base === undefined ||
      values['this-env'].length === 0 ||
      values['base-env'].length > 0 ||
      values['this-token'] !== undefined ||
      values.profile !== undefined)
  )
    throw new Error(
      '--both-ways compares a setting: give --base and --this-env, without --base-env, --this-token or --profile',
    );
  const count = (name) => {
    const value = Number(values[name]);
    if (!Number.isInteger(value) || value < 1)
      throw new Error(`--${name} must be a positive integer, got "${values[name]}"`);
    return value;
  };
  return {
    base: values.base,
    against: values.against,
    scenario: values.scenario,
    rounds: count('rounds'),
    seconds: count('seconds'),
    connections: count('connections'),
    thisEnv: values['this-env'],
    baseEnv: values['base-env'],
    thisToken: values['this-token'],
    bothEnv: values.env,
    profile: values.profile,
    profileInterval: values['profile-interval'] === undefined ? undefined : count('profile-interval'),
    paceMs: values['pace-ms'] === undefined ? undefined : count('pace-ms'),
    warmupSeconds: count('warmup'),
    bothWays: values['both-ways'],
  };
}

/** The base ref's gateway, compiled in a worktree that borrows this checkout's node_modules. */
function buildBase(ref, dir) {
  const tree = join(dir, 'base');
  const commit = execFileSync('git', ['rev-parse', '--short', `${ref}^{commit}`], {
    cwd: ROOT,
    encoding: 'utf8',
  }).trim();
  execFileSync('git', ['worktree', 'add', '--detach', '--quiet', tree, commit], { cwd: ROOT, stdio: 'pipe' });
  symlinkSync(join(ROOT, 'node_modules'), join(tree, 'node_modules'));
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(tree, 'tsconfig.json')], {
    cwd: tree,
    stdio: 'pipe',
  });
  return { tree, commit };
}

async function startUpstream(dir, answer) {
  const port = await freePort();
  const handle = which('nginx')
    ? startProcess(
        'fixed upstream (nginx)',
        'nginx',
        [
          '-p',
          join(dir, 'nginx'),
          '-c',
          writeNginxUpstreamConfig(join(dir, 'nginx'), port, answer),
          '-e',
          'stderr',
          '-g',
          'daemon off;',
        ],
        { core: CORE_LOAD },
      )
    : startProcess('fixed upstream (node:http)', process.execPath, [join(ROOT, 'bench/fixed-upstream.mjs')], {
        core: CORE_LOAD,
        env: { ...process.env, PORT: String(port) },
      });
  await waitUntil(handle, `listening on ${port}`, () => portAccepts(port));
  return { url: `http://127.0.0.1:${port}`, port };
}

/**
 * Where each side's CPU per request went (--profile): a profile's shares of busy samples times the
 * side's measured CPU per request, by function and file (bench/profile-diff.mjs), the largest
 * differences first.
 */
async function printProfileDifference(profileDir, sides) {
  const { readdirSync } = await import('node:fs');
  const { selfShares, differences } = await import('./profile-diff.mjs');
  const shares = sides.map(({ name }) => {
    const files = readdirSync(join(profileDir, name))
      .filter((file) => file.endsWith('.cpuprofile'))
      .sort();
    return selfShares(join(profileDir, name, files.at(-1)), 2);
  });
  const scales = sides.map((side) => side.cpuUs);
  for (const [title, key, top] of [
    ['by function and file (self time)', 'byFunction', 25],
    ['by file and package (self time)', 'byPlace', 20],
  ]) {
    log(`CPU per request ${title}, µs: base, this, difference (largest differences first)`);
    for (const { name, base, other, difference } of differences(shares[0][key], shares[1][key], scales).slice(0, top))
      log(`  ${fixed(base, 1)} ${fixed(other, 1)} ${fixed(difference, 1)}  ${name}`);
  }
}

/** Records per write of the audit trail over the whole run (warm-up included), if it wrote any. */
async function auditBatching(metricsUrl) {
  if (metricsUrl === undefined) return undefined;
  const text = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(5_000) })).text();
  const sum = (name) =>
    [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+]+)$`, 'gm'))].reduce(
      (total, match) => total + Number(match[1]),
      0,
    );
  const records = sum('ledger_gateway_audit_records_written_total');
  const writes = sum('ledger_gateway_audit_sync_duration_seconds_count');
  if (records === 0) return undefined;
  const perWrite =
    writes > 0 ? `, ${(records / writes).toFixed(2)} a durable write (${writes} writes)` : ' (not durable)';
  return `${records} records${perWrite}`;
}

/** The environment with {side} in its values replaced by the side's name (a directory each, say). */
const sided = (env, side) =>
  Object.fromEntries(Object.entries(env).map(([key, value]) => [key, value.replaceAll('{side}', side)]));

const perRequestUs = (cpu, requests) => (requests > 0 ? (cpu * 1e6) / requests : Number.NaN);
const fixed = (value, digits = 0) => value.toFixed(digits).padStart(7);

async function main() {
  const options = readOptions();
  if (options === undefined) {
    log(USAGE);
    return;
  }
  const ratio = await compareOnce(options);
  if (!options.bothWays) return;
  const setting = options.thisEnv.map((pair) => pair.slice(0, pair.indexOf('='))).join(' ');
  log(`\nthe same with ${setting} on the base instead:`);
  const swapped = await compareOnce({ ...options, thisEnv: [], baseEnv: options.thisEnv });
  log(
    `both ways round: ${ratio.toFixed(3)}× with it on this build, ${swapped.toFixed(3)}× with it on the base (${(1 / swapped).toFixed(3)}× inverted); geometric mean ${Math.sqrt(ratio / swapped).toFixed(3)}×: what ${setting} costs`,
  );
}

/** One paired run of the two gateways; the median of the rounds' ratios (this / base). */
async function compareOnce(options) {
  const { HTTP_SCENARIOS, FIXED_ANSWER } = await import('./requests.mjs');
  const spec = HTTP_SCENARIOS[options.scenario];
  if (spec === undefined)
    throw new Error(
      `--scenario must be one of ${Object.keys(HTTP_SCENARIOS)
        .filter((name) => name !== 'latency')
        .join(', ')}`,
    );
  const { gatewaySettings, startGateway } = await import('./gateway.mjs');
  const { startIdentityProvider } = await import('./tokens.mjs');

  const dir = mkdtempSync(join(tmpdir(), 'ledger-gateway-compare-'));
  let medians;
  let ratio;
  let base;
  let idp;
  let cleaned = false;
  const cleanUp = async () => {
    if (cleaned) return;
    cleaned = true;
    await stopAll();
    await idp?.close();
    if (base !== undefined)
      execFileSync('git', ['worktree', 'remove', '--force', base.tree], { cwd: ROOT, stdio: 'pipe' });
    rmSync(dir, { recursive: true, force: true });
  };
  stopChildrenOnExit(cleanUp);
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
    const dirty =
      execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: ROOT, encoding: 'utf8' }).trim() !==
      '';
    const peer = options.against === undefined ? undefined : PEERS[options.against];
    if (peer === undefined) {
      log(`building ${options.base} in a temporary worktree ...`);
      base = buildBase(options.base, dir);
    }
    const upstream = await startUpstream(dir, FIXED_ANSWER);
    idp = await startIdentityProvider(dir);
    const pairs = (list) =>
      Object.fromEntries(list.map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]));
    const bothEnv = pairs(options.bothEnv);
    const thisEnv = sided({ ...bothEnv, ...pairs(options.thisEnv) }, 'this');
    const startThisBuild = async (name, root, label, env = {}) => {
      const settings = await gatewaySettings(root, {
        apiPort: await freePort(),
        adminPort: await freePort(),
        upstreamUrl: upstream.url,
        idp,
      });
      return {
        ...(await startGateway(root, dir, name, settings, {
          core: CORE_GATEWAYS,
          logFile: '/dev/null',
          env,
          nodeArgs:
            options.profile === undefined
              ? []
              : [
                  '--cpu-prof',
                  `--cpu-prof-dir=${join(options.profile, name)}`,
                  ...(options.profileInterval === undefined ? [] : [`--cpu-prof-interval=${options.profileInterval}`]),
                ],
        })),
        label,
      };
    };
    const gateways = [
      peer === undefined
        ? await startThisBuild(
            'base',
            base.tree,
            `base ${base.commit}${options.baseEnv.length > 0 ? ` with ${options.baseEnv.join(' ')}` : ''}`,
            sided({ ...bothEnv, ...pairs(options.baseEnv) }, 'base'),
          )
        : { ...(await peer.start(dir, CORE_GATEWAYS, upstream)), label: peer.label },
      await startThisBuild(
        'this',
        ROOT,
        `this build (${head}${dirty ? ' + uncommitted changes' : ''})${options.thisEnv.length > 0 ? ` with ${options.thisEnv.join(' ')}` : ''}`,
        thisEnv,
      ),
    ];
    const baseName = peer === undefined ? options.base : peer.label;
    const load = createLoadGenerator({ root: ROOT, dir, core: CORE_LOAD, autocannonAllowed: false });
    if (load === undefined)
      throw new Error('no load generator: bench:compare loads both sides with wrk (apt-get install wrk).');
    const loadBoth = async (seconds) => {
      const token = await idp.mint();
      const before = gateways.map((gateway) => cpuSeconds(gateway.pid));
      const runs = await Promise.all(
        gateways.map((gateway, index) =>
          load.run({
            url: `${gateway.baseUrl}${spec.path}`,
            method: spec.method,
            body: spec.body,
            token: index === 1 && options.thisToken !== undefined ? options.thisToken : token,
            connections: options.connections,
            seconds,
            ...(options.paceMs !== undefined && { paceMs: options.paceMs }),
          }),
        ),
      );
      return runs.map((run, index) => ({
        ...run,
        cpuUs: perRequestUs(cpuSeconds(gateways[index].pid) - before[index], run.requests),
      }));
    };

    log(
      `${options.scenario}: ${gateways.map((gateway) => gateway.label).join(' vs ')}; both pinned to core ${CORE_GATEWAYS}${canPin() ? '' : ' (taskset missing: not pinned)'}, loaded together, ${options.rounds} rounds of ${options.seconds} s, ${options.connections} connections each${options.paceMs === undefined ? '' : `, each waiting ${options.paceMs} ms between requests`}`,
    );
    await loadBoth(options.warmupSeconds); // warm-up: JIT, pools, token cache
    const ticksBefore = machineCpuTicks();
    log('round   base µs/req  base req/s   this µs/req  this req/s   this/base CPU');
    const ratios = [];
    const rows = [];
    for (let round = 1; round <= options.rounds; round++) {
      const [baseRun, thisRun] = await loadBoth(options.seconds);
      const bad = baseRun.nonSuccess + thisRun.nonSuccess;
      if (bad > 0) throw new Error(`round ${round}: ${bad} answers were not 2xx; the comparison would mean nothing`);
      for (const [index, run] of [baseRun, thisRun].entries()) {
        // A side that served nothing (or whose CPU could not be read) has no figure: say so, never drop the round quietly.
        if (!Number.isFinite(run.cpuUs))
          throw new Error(
            `round ${round}: ${gateways[index].label} served ${run.requests} requests in ${options.seconds} s (errors ${JSON.stringify(run.errors)}); no CPU per request to compare`,
          );
      }
      ratios.push(thisRun.cpuUs / baseRun.cpuUs);
      rows.push([baseRun, thisRun]);
      log(
        `${String(round).padStart(5)}   ${fixed(baseRun.cpuUs)}     ${fixed(baseRun.rps)}      ${fixed(thisRun.cpuUs)}    ${fixed(thisRun.rps)}      ${fixed(ratios.at(-1), 3)}`,
      );
    }
    const middle = (pick) => median(rows.map(pick));
    log(
      `median  ${fixed(middle(([b]) => b.cpuUs))}     ${fixed(middle(([b]) => b.rps))}      ${fixed(middle(([, t]) => t.cpuUs))}    ${fixed(middle(([, t]) => t.rps))}      ${fixed(median(ratios), 3)}`,
    );
    log(
      `latency p50 / p99 (ms, median of the rounds): base ${fixed(
        middle(([b]) => b.latencyMs.p50),
        2,
      )} / ${fixed(
        middle(([b]) => b.latencyMs.p99),
        2,
      )}, this ${fixed(
        middle(([, t]) => t.latencyMs.p50),
        2,
      )} / ${fixed(
        middle(([, t]) => t.latencyMs.p99),
        2,
      )}`,
    );
    for (const gateway of gateways) {
      const batching = await auditBatching(gateway.metricsUrl);
      if (batching !== undefined) log(`${gateway.label}: audit trail ${batching}`);
    }
    medians = { base: middle(([b]) => b.cpuUs), this: middle(([, t]) => t.cpuUs) };
    ratio = median(ratios);
    const steal = stealPercent(ticksBefore, machineCpuTicks());
    if (steal !== undefined)
      log(
        `hypervisor steal during the rounds: ${steal.toFixed(1)}% of the VM's CPU time (it slows both sides alike; the ratio stands)`,
      );
    if (peer !== undefined)
      log(
        `so, CPU-bound on one core, this build would serve ${(1 / ratio).toFixed(2)}× the requests per second of the ${peer.label}`,
      );
    log(
      `this build uses ${ratio < 1 ? `${((1 - ratio) * 100).toFixed(1)}% less` : `${((ratio - 1) * 100).toFixed(1)}% more`} CPU per request than ${baseName} (median of ${options.rounds} paired rounds; per-round ratios ${Math.min(...ratios).toFixed(3)} to ${Math.max(...ratios).toFixed(3)})`,
    );
  } finally {
    await cleanUp();
  }
  // The profiles are written as the gateways exit (cleanUp stops them).
  if (options.profile !== undefined && medians !== undefined)
    await printProfileDifference(options.profile, [
      { name: 'base', cpuUs: medians.base },
      { name: 'this', cpuUs: medians.this },
    ]);
  return ratio;
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(`bench:compare: ${error.message}`);
    process.exit(1);
  },
);
