#!/usr/bin/env node
// npm run bench:compare -- --base <git ref>: is this build cheaper than another one? Both gateways
// run in the bench's production configuration, pinned to the SAME core, and are loaded AT THE SAME
// TIME (two wrk processes on the other core), round after round; each round compares their CPU
// seconds per request. On a shared VM one build's figures move by ±30% between runs; two builds
// loaded together see the same noise, so their ratio holds still. Needs git and a built dist/
// (the npm script builds first); the base is built from a temporary git worktree.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createLoadGenerator } from './load-generator.mjs';
import { writeNginxUpstreamConfig } from './peers.mjs';
import { cpuSeconds } from './proc-stats.mjs';
import { canPin, freePort, portAccepts, startProcess, stopAll, stopChildrenOnExit, waitUntil, which } from './processes.mjs';
import { median } from './report.mjs';

const ROOT = new URL('..', import.meta.url).pathname.replace(/\/$/, '');
const CORE_GATEWAYS = 0;
const CORE_LOAD = 1;
const log = (message = '') => process.stdout.write(`${message}\n`);

const USAGE = `Usage: npm run bench:compare -- --base <git ref> [options]
  --base <ref>          the build to compare with (a commit, branch or tag), built in a temporary worktree
  --scenario <name>     ledger-end (proxied GET, default), version (cached), submit or update-by-offset
  --rounds <n>          rounds, both gateways loaded together in each (default 8)
  --seconds <s>         seconds per round (default 4)
  --connections <n>     wrk connections per gateway (default 50)`;

function readOptions() {
  const { values } = parseArgs({
    options: {
      base: { type: 'string' },
      scenario: { type: 'string', default: 'ledger-end' },
      rounds: { type: 'string', default: '8' },
      seconds: { type: 'string', default: '4' },
      connections: { type: 'string', default: '50' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) return undefined;
  if (values.base === undefined) throw new Error('--base <git ref> is required');
  const count = (name) => {
    const value = Number(values[name]);
    if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer, got "${values[name]}"`);
    return value;
  };
  return { base: values.base, scenario: values.scenario, rounds: count('rounds'), seconds: count('seconds'), connections: count('connections') };
}

/** The base ref's gateway, compiled in a worktree that borrows this checkout's node_modules. */
function buildBase(ref, dir) {
  const tree = join(dir, 'base');
  const commit = execFileSync('git', ['rev-parse', '--short', `${ref}^{commit}`], { cwd: ROOT, encoding: 'utf8' }).trim();
  execFileSync('git', ['worktree', 'add', '--detach', '--quiet', tree, commit], { cwd: ROOT, stdio: 'pipe' });
  symlinkSync(join(ROOT, 'node_modules'), join(tree, 'node_modules'));
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(tree, 'tsconfig.json')], { cwd: tree, stdio: 'pipe' });
  return { tree, commit };
}

async function startUpstream(dir, answer) {
  const port = await freePort();
  const handle = which('nginx')
    ? startProcess('fixed upstream (nginx)', 'nginx', ['-p', join(dir, 'nginx'), '-c', writeNginxUpstreamConfig(join(dir, 'nginx'), port, answer), '-e', 'stderr', '-g', 'daemon off;'], { core: CORE_LOAD })
    : startProcess('fixed upstream (node:http)', process.execPath, [join(ROOT, 'bench/fixed-upstream.mjs')], { core: CORE_LOAD, env: { ...process.env, PORT: String(port) } });
  await waitUntil(handle, `listening on ${port}`, () => portAccepts(port));
  return `http://127.0.0.1:${port}`;
}

const perRequestUs = (cpu, requests) => (requests > 0 ? (cpu * 1e6) / requests : Number.NaN);
const fixed = (value, digits = 0) => value.toFixed(digits).padStart(7);

async function main() {
  const options = readOptions();
  if (options === undefined) {
    log(USAGE);
    return;
  }
  const { HTTP_SCENARIOS, FIXED_ANSWER } = await import('./requests.mjs');
  const spec = HTTP_SCENARIOS[options.scenario];
  if (spec === undefined) throw new Error(`--scenario must be one of ${Object.keys(HTTP_SCENARIOS).filter((name) => name !== 'latency').join(', ')}`);
  const { gatewaySettings, startGateway } = await import('./gateway.mjs');
  const { startIdentityProvider } = await import('./tokens.mjs');

  const dir = mkdtempSync(join(tmpdir(), 'ledger-gateway-compare-'));
  let base;
  let idp;
  let cleaned = false;
  const cleanUp = async () => {
    if (cleaned) return;
    cleaned = true;
    await stopAll();
    await idp?.close();
    if (base !== undefined) execFileSync('git', ['worktree', 'remove', '--force', base.tree], { cwd: ROOT, stdio: 'pipe' });
    rmSync(dir, { recursive: true, force: true });
  };
  stopChildrenOnExit(cleanUp);
  try {
    log(`building ${options.base} in a temporary worktree ...`);
    base = buildBase(options.base, dir);
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: ROOT, encoding: 'utf8' }).trim() !== '';
    const upstreamUrl = await startUpstream(dir, FIXED_ANSWER);
    idp = await startIdentityProvider(dir);
    const gateways = [];
    for (const [name, root, label] of [['base', base.tree, `base ${base.commit}`], ['this', ROOT, `this build (${head}${dirty ? ' + uncommitted changes' : ''})`]]) {
      const settings = await gatewaySettings(root, { apiPort: await freePort(), adminPort: await freePort(), upstreamUrl, idp });
      const gateway = await startGateway(root, dir, name, settings, { core: CORE_GATEWAYS, logFile: '/dev/null' });
      gateways.push({ ...gateway, label });
    }
    const load = createLoadGenerator({ root: ROOT, dir, core: CORE_LOAD, autocannonAllowed: false });
    const loadBoth = async (seconds) => {
      const token = await idp.mint();
      const before = gateways.map((gateway) => cpuSeconds(gateway.pid));
      const runs = await Promise.all(gateways.map((gateway) => load.run({
        url: `${gateway.baseUrl}${spec.path}`, method: spec.method, body: spec.body, token, connections: options.connections, seconds,
      })));
      return runs.map((run, index) => ({ ...run, cpuUs: perRequestUs(cpuSeconds(gateways[index].pid) - before[index], run.requests) }));
    };

    log(`${options.scenario}: ${gateways.map((gateway) => gateway.label).join(' vs ')}; both pinned to core ${CORE_GATEWAYS}${canPin() ? '' : ' (taskset missing: not pinned)'}, loaded together, ${options.rounds} rounds of ${options.seconds} s, ${options.connections} connections each`);
    await loadBoth(2); // warm-up: JIT, pools, token cache
    log('round   base µs/req  base req/s   this µs/req  this req/s   this/base CPU');
    const ratios = [];
    const rows = [];
    for (let round = 1; round <= options.rounds; round++) {
      const [baseRun, thisRun] = await loadBoth(options.seconds);
      const bad = baseRun.nonSuccess + thisRun.nonSuccess;
      if (bad > 0) throw new Error(`round ${round}: ${bad} answers were not 2xx; the comparison would mean nothing`);
      ratios.push(thisRun.cpuUs / baseRun.cpuUs);
      rows.push([baseRun, thisRun]);
      log(`${String(round).padStart(5)}   ${fixed(baseRun.cpuUs)}     ${fixed(baseRun.rps)}      ${fixed(thisRun.cpuUs)}    ${fixed(thisRun.rps)}      ${fixed(ratios.at(-1), 3)}`);
    }
    const middle = (pick) => median(rows.map(pick));
    log(`median  ${fixed(middle(([b]) => b.cpuUs))}     ${fixed(middle(([b]) => b.rps))}      ${fixed(middle(([, t]) => t.cpuUs))}    ${fixed(middle(([, t]) => t.rps))}      ${fixed(median(ratios), 3)}`);
    const ratio = median(ratios);
    log(`this build uses ${ratio < 1 ? `${((1 - ratio) * 100).toFixed(1)}% less` : `${((ratio - 1) * 100).toFixed(1)}% more`} CPU per request than ${options.base} (median of ${options.rounds} paired rounds; per-round ratios ${Math.min(...ratios).toFixed(3)} to ${Math.max(...ratios).toFixed(3)})`);
  } finally {
    await cleanUp();
  }
}

main().then(() => process.exit(0), (error) => {
  console.error(`bench:compare: ${error.message}`);
  process.exit(1);
});
