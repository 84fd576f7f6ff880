// A bad-token flood against a legitimate client (issue 24, item 3): how much of its throughput the
// legitimate client keeps while another client sends well-formed tokens with random signatures, and
// how many signature checks each flood request costs. For each gateway configuration (the budget
// of calls without a verified token off, then the defaults), a fresh gateway process; the flood
// starts and runs until the address's burst is spent (the first unauthenticatedRate refusal on
// /metrics) or --flood-lead seconds, then --rounds rounds each measure the legitimate client
// (GET /v2/state/ledger-end, one valid token, closed loop) for --seconds alone (the flood paused)
// and for --seconds under the flood, in ABBA order. On a shared machine the rate alone drifts by
// a factor of two within a minute: each round's ratio is taken within the round, and the median
// reported with the range.
// Prints the median req/s alone and flooded, the ratio, the flood's rate and answers, and signature
// checks per flood request (ledger_gateway_token_signature_checks_total on /metrics): over the
// whole flood (its first burst included) and over the measured flooded windows.
//   npm run bench:flood -- [--seconds 2] [--rounds 4] [--connections 8] [--flood-connections 32]
//                          [--flood-token rs256|large|unknown-kid] [--flood-lead 3] [--configs off,default]
// Layout as bench/README.md: the gateway on core 0; clients and the fixed upstream on core 1.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { gatewaySettings, startGateway } from './gateway.mjs';
import {
  canPin,
  freePort,
  portAccepts,
  startProcess,
  stopChildrenOnExit,
  stopProcess,
  waitUntil,
} from './processes.mjs';
import { AUDIENCE, USER_ID, startIdentityProvider } from './tokens.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const CORE_GATEWAY = 0;
const CORE_LOAD = 1;
const PATH = '/v2/state/ledger-end';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '4' },
    connections: { type: 'string', default: '8' },
    'flood-connections': { type: 'string', default: '32' },
    'flood-token': { type: 'string', default: 'rs256' },
    'flood-lead': { type: 'string', default: '3' },
    configs: { type: 'string', default: 'off,default' },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  console.log(
    'npm run bench:flood -- [--seconds 2] [--rounds 4] [--connections 8] [--flood-connections 32] ' +
      '[--flood-token rs256|large|unknown-kid] [--flood-lead 3] [--configs off,default]',
  );
  process.exit(0);
}
const seconds = Number(args.seconds);
const connections = Number(args.connections);
const floodConnections = Number(args['flood-connections']);
const floodLead = Number(args['flood-lead']);
const roundCount = Number(args.rounds);

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
  if (kind === 'large')
    claims.groups = Array.from({ length: 300 }, (_, i) => `group-${String(i).padStart(4, '0')}-${'x'.repeat(16)}`);
  return { header: { alg: 'RS256', kid, typ: 'JWT' }, claims, signatureBytes: 256, randomKid: kind === 'unknown-kid' };
}

/**
 * Starts one client process on the load core: `result` resolves with its JSON line; `send` writes a
 * control line (a controlled client: pause, resume, stop).
 */
function startClient(options) {
  const argv = [join(ROOT, 'bench/flood-client.mjs'), JSON.stringify(options)];
  const [file, rest] = canPin()
    ? ['taskset', ['-c', String(CORE_LOAD), process.execPath, ...argv]]
    : [process.execPath, argv];
  const child = spawn(file, rest, { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (data) => {
    out += data;
  });
  const result = new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) =>
      code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`flood client exited ${code}`)),
    );
  });
  return { result, send: (command) => child.stdin.write(`${command}\n`) };
}

const runClient = (options) => startClient(options).result;

/** The sum of a metric's series on /metrics whose labels contain `labels` (0 when there is none). */
async function metricValue(metricsUrl, name, labels = '') {
  const text = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(5_000) })).text();
  let sum = 0;
  for (const [, seriesLabels = '', value] of text.matchAll(
    new RegExp(`^${name}(?:\\{([^}]*)\\})? ([0-9.e+]+)$`, 'gm'),
  )) {
    if (seriesLabels.includes(labels)) sum += Number(value);
  }
  return sum;
}

const signatureChecks = (metricsUrl) => metricValue(metricsUrl, 'ledger_gateway_token_signature_checks_total');
/** The flood's answers the gateway counted: every 401 and 429 (the legitimate client gets neither). */
const floodAnswers = async (metricsUrl) =>
  (await metricValue(metricsUrl, 'ledger_gateway_requests_total', 'status="401"')) +
  (await metricValue(metricsUrl, 'ledger_gateway_requests_total', 'status="429"'));
const budgetRefusals = (metricsUrl) =>
  metricValue(metricsUrl, 'ledger_gateway_protection_refusals_total', 'limit="unauthenticatedRate"');

/** A result's answers other than 200, and its errors. */
const non200 = (result) =>
  Object.entries(result.statuses)
    .filter(([status]) => status !== '200')
    .reduce((sum, [, count]) => sum + count, 0) + result.errors;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const round = (value, digits = 0) => Number(value.toFixed(digits));

async function measure(name, protection, { dir, idp, upstreamUrl, template }) {
  const settings = await gatewaySettings(ROOT, {
    apiPort: await freePort(),
    adminPort: await freePort(),
    upstreamUrl,
    idp,
  });
  settings.config.protection = { ...settings.config.protection, ...protection };
  const gateway = await startGateway(ROOT, dir, `gateway-${name}`, settings, {
    core: CORE_GATEWAY,
    logFile: '/dev/null',
  });
  try {
    const { metricsUrl } = gateway;
    const legit = { origin: gateway.baseUrl, path: PATH, connections, token: await idp.mint() };
    await runClient({ ...legit, seconds: 1 }); // warm-up: the token verified and cached, the JIT warm

    const checksBefore = await signatureChecks(metricsUrl);
    const flood = startClient({
      origin: gateway.baseUrl,
      path: PATH,
      connections: floodConnections,
      seconds: 600,
      flood: template,
      controlled: true,
    });
    const leadEnds = Date.now() + floodLead * 1_000;
    while (Date.now() < leadEnds && (await budgetRefusals(metricsUrl)) === 0) await sleep(100);

    // Alone and flooded windows alternate (ABBA), each round's ratio taken within the round.
    const rounds = [];
    let [floodedChecks, floodedAnswers] = [0, 0];
    for (let index = 0; index < roundCount; index += 1) {
      const windows = {};
      for (const kind of index % 2 === 0 ? ['alone', 'flooded'] : ['flooded', 'alone']) {
        flood.send(kind === 'alone' ? 'pause' : 'resume');
        const [checksAt, answersAt] = [await signatureChecks(metricsUrl), await floodAnswers(metricsUrl)];
        windows[kind] = await runClient({ ...legit, seconds });
        if (kind === 'flooded') {
          floodedChecks += (await signatureChecks(metricsUrl)) - checksAt;
          floodedAnswers += (await floodAnswers(metricsUrl)) - answersAt;
        }
      }
      rounds.push({ alone: windows.alone.rps, flooded: windows.flooded.rps, non200: non200(windows.flooded) });
    }
    flood.send('stop');
    const floodTotal = await flood.result;
    const checks = (await signatureChecks(metricsUrl)) - checksBefore;
    const ratios = rounds.map((r) => r.flooded / r.alone).sort((a, b) => a - b);
    const median = (values) =>
      (values[Math.floor((values.length - 1) / 2)] + values[Math.ceil((values.length - 1) / 2)]) / 2;
    return {
      config: name,
      aloneRps: round(median(rounds.map((r) => r.alone).sort((a, b) => a - b))),
      floodedRps: round(median(rounds.map((r) => r.flooded).sort((a, b) => a - b))),
      ratio: round(median(ratios), 2),
      ratioRange: [round(ratios[0], 2), round(ratios.at(-1), 2)],
      floodRequests: floodTotal.requests,
      floodStatuses: floodTotal.statuses,
      floodRpsWhileOn: round(floodedAnswers / (roundCount * seconds)),
      signatureChecks: checks,
      checksPerFloodRequest: round(checks / floodTotal.requests, 4),
      checksPerFloodRequestWhileMeasured: round(floodedChecks / floodedAnswers, 4),
      legitNon200: rounds.reduce((sum, r) => sum + r.non200, 0),
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
  const upstream = startProcess(
    'fixed upstream (node:http)',
    process.execPath,
    [join(ROOT, 'bench/fixed-upstream.mjs')],
    {
      core: CORE_LOAD,
      cwd: ROOT,
      env: { ...process.env, PORT: String(port) },
    },
  );
  await waitUntil(upstream, `listening on ${port}`, () => portAccepts(port));
  const kid = JSON.parse(Buffer.from((await idp.mint()).split('.')[0], 'base64url').toString()).kid;
  const template = floodTemplate(args['flood-token'], idp.issuer, kid);
  const encoded = (value) => Buffer.from(JSON.stringify(value)).toString('base64url').length;
  const tokenBytes =
    encoded(template.header) + encoded(template.claims) + Math.ceil((template.signatureBytes * 4) / 3) + 2;

  const load = () => readLoad().split(' ')[0];
  console.log(
    `flood bench: ${roundCount} rounds of ${seconds} s alone and ${seconds} s flooded, legitimate client ` +
      `${connections} connections, flood ${floodConnections} connections of ${args['flood-token']} tokens ` +
      `(~${tokenBytes} bytes); pinned: ${canPin()}; ` +
      `load average at start ${load()}`,
  );
  const results = [];
  for (const name of args.configs.split(',')) {
    if (!(name in CONFIGS)) throw new Error(`unknown configuration ${name} (${Object.keys(CONFIGS).join(', ')})`);
    const result = await measure(name, CONFIGS[name], { dir, idp, upstreamUrl: `http://127.0.0.1:${port}`, template });
    results.push(result);
    console.log(JSON.stringify(result));
  }
  console.log(`load average at end ${load()}`);
  console.table(
    results.map((result) => ({
      config: result.config,
      'alone req/s': result.aloneRps,
      'flooded req/s': result.floodedRps,
      ratio: result.ratio,
      'ratio range': result.ratioRange.join(' – '),
      'flood req/s': result.floodRpsWhileOn,
      'checks/flood request': result.checksPerFloodRequest,
      'while measured': result.checksPerFloodRequestWhileMeasured,
    })),
  );
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
