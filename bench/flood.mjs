// A bad-token flood against a legitimate client (issue 24, item 3): how much of its throughput the
// legitimate client keeps while another client sends well-formed tokens with random signatures, and
// how many signature checks each flood request costs. For each gateway configuration (the budget
// of calls without a verified token off, then the defaults), a fresh gateway process:
//   1. the legitimate client alone (GET /v2/state/ledger-end, one valid token, closed loop);
//   2. the same client again while the flood runs. The flood starts first: the measured window opens
//      once the flood has spent its address's burst (the first unauthenticatedRate refusal on
//      /metrics), or after --flood-lead seconds without one, so that it sees the flood's steady state.
// Prints req/s alone and under flood, their ratio, the flood's own rate and answers, and signature
// checks per flood request (ledger_gateway_token_signature_checks_total on /metrics).
//   npm run bench:flood -- [--seconds 8] [--connections 8] [--flood-connections 8]
//                          [--flood-token rs256|large|unknown-kid] [--flood-lead 3] [--configs off,default]
// Layout as bench/README.md: the gateway on core 0; clients and the fixed upstream on core 1.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { gatewaySettings, startGateway } from './gateway.mjs';
import { canPin, freePort, portAccepts, startProcess, stopChildrenOnExit, stopProcess, waitUntil } from './processes.mjs';
import { AUDIENCE, USER_ID, startIdentityProvider } from './tokens.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const CORE_GATEWAY = 0;
const CORE_LOAD = 1;
const PATH = '/v2/state/ledger-end';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '8' },
    connections: { type: 'string', default: '8' },
    'flood-connections': { type: 'string', default: '8' },
    'flood-token': { type: 'string', default: 'rs256' },
    'flood-lead': { type: 'string', default: '3' },
    configs: { type: 'string', default: 'off,default' },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  console.log('npm run bench:flood -- [--seconds 8] [--connections 8] [--flood-connections 8] '
    + '[--flood-token rs256|large|unknown-kid] [--flood-lead 3] [--configs off,default]');
  process.exit(0);
}
const seconds = Number(args.seconds);
const connections = Number(args.connections);
const floodConnections = Number(args['flood-connections']);
const floodLead = Number(args['flood-lead']);

/** protection settings per configuration name. */
const CONFIGS = {
  off: { unauthenticated: { rate: null } },
  default: {},
};

/** The flood's tokens: the bench issuer's header and claims, a random signature on each call. */
function floodTemplate(kind, issuer, kid) {
  const now = Math.floor(Date.now() / 1000);
  const claims = { iss: issuer, sub: USER_ID, aud: AUDIENCE, iat: now, exp: now + 240 };
  // An 11 KB token: claims padded as a token with many groups or roles would be.
  if (kind === 'large') claims.groups = Array.from({ length: 300 }, (_, i) => `group-${String(i).padStart(4, '0')}-${'x'.repeat(16)}`);
  return { header: { alg: 'RS256', kid, typ: 'JWT' }, claims, signatureBytes: 256, randomKid: kind === 'unknown-kid' };
}

/** Runs one client process on the load core; resolves with its JSON result. */
function runClient(options) {
  const argv = [join(ROOT, 'bench/flood-client.mjs'), JSON.stringify(options)];
  const [file, rest] = canPin() ? ['taskset', ['-c', String(CORE_LOAD), process.execPath, ...argv]] : [process.execPath, argv];
  const child = spawn(file, rest, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (data) => { out += data; });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`flood client exited ${code}`))));
  });
}

/** The sum of a metric's series on /metrics whose labels contain `labels` (0 when there is none). */
async function metricValue(metricsUrl, name, labels = '') {
  const text = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(5_000) })).text();
  let sum = 0;
  for (const [, seriesLabels = '', value] of text.matchAll(new RegExp(`^${name}(?:\\{([^}]*)\\})? ([0-9.e+]+)$`, 'gm'))) {
    if (seriesLabels.includes(labels)) sum += Number(value);
  }
  return sum;
}

const signatureChecks = (metricsUrl) => metricValue(metricsUrl, 'ledger_gateway_token_signature_checks_total');
const budgetRefusals = (metricsUrl) => metricValue(metricsUrl, 'ledger_gateway_protection_refusals_total', 'limit="unauthenticatedRate"');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const round = (value, digits = 0) => Number(value.toFixed(digits));

async function measure(name, protection, { dir, idp, upstreamUrl, template }) {
  const settings = await gatewaySettings(ROOT, { apiPort: await freePort(), adminPort: await freePort(), upstreamUrl, idp });
  settings.config.protection = { ...settings.config.protection, ...protection };
  const gateway = await startGateway(ROOT, dir, `gateway-${name}`, settings, { core: CORE_GATEWAY, logFile: '/dev/null' });
  try {
    const origin = gateway.baseUrl;
    const legit = { origin, path: PATH, connections, token: await idp.mint() };
    await runClient({ ...legit, seconds: 1 }); // warm-up: the token verified and cached, the JIT warm
    const alone = await runClient({ ...legit, seconds });

    const checksBefore = await signatureChecks(gateway.metricsUrl);
    const flooding = runClient({ origin, path: PATH, connections: floodConnections, seconds: seconds + floodLead + 1, flood: template });
    const leadEnds = Date.now() + floodLead * 1_000;
    while (Date.now() < leadEnds && await budgetRefusals(gateway.metricsUrl) === 0) await sleep(100);
    const checksAtWindow = await signatureChecks(gateway.metricsUrl);
    const flooded = await runClient({ ...legit, seconds });
    const checksInWindow = await signatureChecks(gateway.metricsUrl) - checksAtWindow;
    const flood = await flooding;
    const checks = await signatureChecks(gateway.metricsUrl) - checksBefore;
    return {
      config: name,
      aloneRps: round(alone.rps),
      floodedRps: round(flooded.rps),
      ratio: round(flooded.rps / alone.rps, 2),
      floodRps: round(flood.rps),
      floodRequests: flood.requests,
      floodStatuses: flood.statuses,
      checksPerFloodRequest: round(checks / flood.requests, 4),
      signatureChecks: checks,
      checksPerSecondInWindow: round(checksInWindow / flooded.seconds, 1),
      legitNon200: Object.entries(flooded.statuses).filter(([status]) => status !== '200').reduce((sum, [, count]) => sum + count, 0) + flooded.errors,
    };
  } finally {
    await stopProcess(gateway);
  }
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-gateway-flood-'));
  stopChildrenOnExit(() => rmSync(dir, { recursive: true, force: true }));
  const idp = await startIdentityProvider(dir);
  const port = await freePort();
  const upstream = startProcess('fixed upstream (node:http)', process.execPath, [join(ROOT, 'bench/fixed-upstream.mjs')], {
    core: CORE_LOAD, cwd: ROOT, env: { ...process.env, PORT: String(port) },
  });
  await waitUntil(upstream, `listening on ${port}`, () => portAccepts(port));
  const kid = JSON.parse(Buffer.from((await idp.mint()).split('.')[0], 'base64url').toString()).kid;
  const template = floodTemplate(args['flood-token'], idp.issuer, kid);
  const encoded = (value) => Buffer.from(JSON.stringify(value)).toString('base64url').length;
  const tokenBytes = encoded(template.header) + encoded(template.claims) + Math.ceil((template.signatureBytes * 4) / 3) + 2;

  const load = () => readLoad().split(' ')[0];
  console.log(`flood bench: ${seconds} s per run, legitimate client ${connections} connections, flood ${floodConnections} connections of ${args['flood-token']} tokens (~${tokenBytes} bytes); pinned: ${canPin()}; load average at start ${load()}`);
  const results = [];
  for (const name of args.configs.split(',')) {
    if (!(name in CONFIGS)) throw new Error(`unknown configuration ${name} (${Object.keys(CONFIGS).join(', ')})`);
    const result = await measure(name, CONFIGS[name], { dir, idp, upstreamUrl: `http://127.0.0.1:${port}`, template });
    results.push(result);
    console.log(JSON.stringify(result));
  }
  console.log(`load average at end ${load()}`);
  console.table(results.map(({ config, aloneRps, floodedRps, ratio, floodRps, checksPerFloodRequest, checksPerSecondInWindow }) => ({
    config, aloneRps, floodedRps, ratio, floodRps, checksPerFloodRequest, checksPerSecondInWindow,
  })));
  await stopProcess(upstream);
  await idp.close();
  rmSync(dir, { recursive: true, force: true });
}

function readLoad() {
  try {
    return readFileSync('/proc/loadavg', 'utf8');
  } catch {
    return 'n/a';
  }
}

await main();
