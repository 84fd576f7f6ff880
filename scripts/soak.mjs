#!/usr/bin/env node
// Soak: mixed traffic over the five operations (successes and refusals) through the built gateway in
// front of the sandbox ledger, for a fixed time at high concurrency. Every answer is checked.
// WebSocket update streams stay open throughout and carry the new transactions. Reports resident
// memory idle, after warm-up, at the end and at its peak, the V8 heap's peak, and file descriptors
// and sockets before and after. Exits non-zero on any unexpected answer or a descriptor leak.
//
//   npm run soak                      # 150 s (60 s warm-up), 64 connections, 16 streams
//   npm run soak -- --image           # as the image runs in Kubernetes: the manifests' NODE_OPTIONS
//                                     # (heap cap) and OTEL_* (spans exported to a local sink)
//   npm run soak -- --duration 5 --connections 16 --short     # CI
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import WebSocket from 'ws';
import { parseAllDocuments } from 'yaml';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '150' },
    connections: { type: 'string', default: '64' },
    warmup: { type: 'string', default: '' },
    short: { type: 'boolean', default: false },
    'max-rss-growth': { type: 'string', default: '' },
    streams: { type: 'string', default: '' },
    image: { type: 'boolean', default: false },
    'node-options': { type: 'string' },
  },
});
const durationS = Number(values.duration);
const connections = Number(values.connections);
const streamCount = values.streams ? Number(values.streams) : Math.max(1, Math.round(connections / 4));
// V8 grows its heap for about a minute under this load: memory is judged after that.
const warmupS = values.warmup ? Number(values.warmup) : Math.max(1, Math.round(durationS * 0.4));
const maxRssGrowth = values['max-rss-growth'] ? Number(values['max-rss-growth']) : values.short ? Infinity : 20;
const ROOT = new URL('..', import.meta.url).pathname;
const children = [];
let dir; // the soak's config directory, removed on exit
const stopAll = () => {
  for (const child of children) child.kill('SIGKILL');
  if (dir) rmSync(dir, { recursive: true, force: true });
};
process.on('exit', stopAll);
process.on('SIGINT', () => process.exit(130));

function start(args, marker, env = {}) {
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${args.join(' ')} did not start:\n${out}`)), 20_000);
    const onData = (data) => {
      out += data;
      const line = out.split('\n').find((l) => l.includes(marker));
      if (line) {
        clearTimeout(timer);
        child.stdout.removeAllListeners('data');
        child.stdout.resume();
        child.stderr.resume();
        resolve({ child, line });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('close', (code) => reject(new Error(`${args[0]} exited ${code}:\n${out}`)));
  });
}

const procStatus = (pid) => readFileSync(`/proc/${pid}/status`, 'utf8');
const rssKiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(procStatus(pid))[1]);
const fdCount = (pid) => readdirSync(`/proc/${pid}/fd`).length;
/** The process's TCP sockets by role, from /proc: listeners, inbound (clients), outbound (upstream pool). */
function sockets(pid, apiPort) {
  const inodes = new Set();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match) inodes.add(match[1]);
    } catch {
      /* closed meanwhile */
    }
  }
  const counts = { listening: 0, inbound: 0, outbound: 0, other: 0 };
  for (const table of ['tcp', 'tcp6']) {
    let text;
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.trim().split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (!inodes.has(fields[9])) continue;
      const localPort = parseInt(fields[1].split(':')[1], 16);
      const state = fields[3];
      if (state === '0A') counts.listening += 1;
      else if (localPort === apiPort) counts.inbound += 1;
      else if (state === '01') counts.outbound += 1;
      else counts.other += 1;
    }
  }
  return counts;
}

// 1. The sandbox ledger as the participant, in its own process.
const sandbox = await start(['dist/sandbox/main.js', '--port', '0'], 'sandbox listening on');
const upstreamUrl = /(http:\/\/[^\s"]+)/.exec(sandbox.line)[1];

// 2. An identity provider key; the gateway trusts it through an inline JWKS.
const { privateKey, publicKey } = await generateKeyPair('RS256');
const jwk = { ...(await exportJWK(publicKey)), kid: 'soak', alg: 'RS256', use: 'sig' };
const ISSUER = 'https://idp.soak.invalid';
const participantId = 'participant1';
async function mint(sub) {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ sub, aud: `https://daml.com/jwt/aud/participant/${participantId}`, iat: now, exp: now + 280 })
    .setProtectedHeader({ alg: 'RS256', kid: 'soak' })
    .setIssuer(ISSUER)
    .sign(privateKey);
}
dir = mkdtempSync(join(tmpdir(), 'ledger-gateway-soak-'));
const configFile = join(dir, 'gateway.yaml');
writeFileSync(
  configFile,
  [
    'server: { host: 127.0.0.1, port: 0 }',
    'admin: { host: 127.0.0.1, port: 0 }',
    `upstream: { url: "${upstreamUrl}" }`,
    `auth: { participantId: ${participantId}, issuers: [${JSON.stringify({ issuer: ISSUER, jwks: { keys: [jwk] } })}] }`,
    'log: { level: info }', // as in production; the output is drained
  ].join('\n'),
);

// 3. The gateway as it runs in production (tracing bootstrap; no exporter, or with --image the
// environment of the base Deployment's container, its spans sent to a sink on loopback).
const gatewayArgs = ['--import', './dist/telemetry/register.js', 'dist/main.js', '--config', configFile];
const gateway = await start(
  gatewayArgs,
  'ledger-gateway listening',
  values.image ? await imageEnvironment() : { OTEL_TRACES_EXPORTER: 'none' },
);
const { api, admin } = JSON.parse(gateway.line);
const pid = gateway.child.pid;
const base = new URL(api);

/** The ENV lines of the image's final stage (deploy/Dockerfile), as KEY=value pairs. */
function imageEnv() {
  const text = readFileSync(join(ROOT, 'deploy/Dockerfile'), 'utf8');
  const final = text.slice(text.lastIndexOf('\nFROM '));
  const pairs = [...final.matchAll(/^ENV (.+)$/gm)].flatMap((line) => line[1].trim().split(/\s+/));
  return Object.fromEntries(pairs.map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]));
}

/** The image's ENV, NODE_OPTIONS and OTEL_* of the base Deployment's container, the collector replaced by a local sink. */
async function imageEnvironment() {
  const documents = parseAllDocuments(readFileSync(join(ROOT, 'deploy/kubernetes/base/deployment.yaml'), 'utf8'));
  const deployment = documents.map((d) => d.toJS()).find((o) => o?.kind === 'Deployment');
  const container = deployment.spec.template.spec.containers.find((c) => c.name === 'ledger-gateway');
  const sink = http.createServer((request, response) => request.resume().on('end', () => response.end()));
  await new Promise((resolve) => sink.listen(0, '127.0.0.1', resolve));
  sink.unref();
  const env = { ...imageEnv(), K8S_POD_NAME: 'soak', K8S_NAMESPACE: 'soak', K8S_NODE_NAME: 'soak' };
  for (const { name, value } of container.env) {
    if (value === undefined || !(name === 'NODE_OPTIONS' || name.startsWith('OTEL_'))) continue;
    env[name] = value.replace(/\$\((\w+)\)/g, (_, v) => env[v] ?? '');
  }
  env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${sink.address().port}`;
  if (values['node-options'] !== undefined) env.NODE_OPTIONS = values['node-options']; // trying other flags
  console.log(
    `soak: the image's environment: NODE_OPTIONS=${env.NODE_OPTIONS}, MALLOC_ARENA_MAX=${env.MALLOC_ARENA_MAX}, spans to a sink (${env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on'} ${env.OTEL_TRACES_SAMPLER_ARG ?? ''})`,
  );
  return env;
}

/** The V8 heap now (prom-client's default metrics on the admin listener), in bytes. */
async function heapBytes() {
  const text = await (await fetch(new URL('/metrics', admin))).text();
  const value = (name) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? NaN);
  return { used: value('nodejs_heap_size_used_bytes'), total: value('nodejs_heap_size_total_bytes') };
}
const mib = (bytes) => (bytes / 1024 / 1024).toFixed(1);

// 4. Traffic.
const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
function call(method, path, body, headers = {}) {
  return new Promise((resolve) => {
    const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    const request = http.request(
      {
        host: base.hostname,
        port: base.port,
        method,
        path,
        agent,
        headers: {
          ...(payload !== undefined
            ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }
            : {}),
          ...headers,
        },
      },
      (response) => {
        const chunks = [];
        response.on('data', (c) => chunks.push(c));
        response.on('end', () => resolve({ status: response.statusCode, body: Buffer.concat(chunks).toString() }));
        response.on('error', (error) => resolve({ status: -1, body: String(error) }));
      },
    );
    request.setTimeout(30_000, () => request.destroy(new Error('client timeout')));
    request.on('error', (error) => resolve({ status: -1, body: String(error) }));
    request.end(payload);
  });
}

const { SANDBOX_SEED: S } = await import(join(ROOT, 'dist/sandbox/seed.js'));
const token = await mint('participant_admin');
const auth = { authorization: `Bearer ${token}` };
const offsets = [1];
let commandCounter = 0;

const scenarios = [
  { name: 'getVersion ok', run: () => call('GET', '/v2/version', undefined, auth), expect: { status: 200 } },
  {
    name: 'getVersion no token',
    run: () => call('GET', '/v2/version'),
    expect: { status: 401, code: 'NA' },
    // Once this address has spent its budget of calls without a verified token (protection.unauthenticated).
    orExpect: { status: 429, code: 'GATEWAY_RESOURCE_EXHAUSTED' },
  },
  {
    name: 'submit ok',
    run: () =>
      call(
        'POST',
        '/v2/commands/submit-and-wait-for-transaction',
        {
          commands: {
            commands: [
              {
                CreateCommand: {
                  templateId: S.templates.iou,
                  createArguments: { issuer: S.parties.alice, owner: S.parties.alice, currency: 'USD', amount: '1.0' },
                },
              },
            ],
            commandId: `soak-${++commandCounter}`,
            actAs: [S.parties.alice],
          },
        },
        auth,
      ),
    expect: { status: 200 },
    after: (answer) => {
      const offset = JSON.parse(answer.body).transaction?.offset;
      if (offset && offsets.length < 10_000) offsets.push(offset);
    },
  },
  {
    name: 'submit refused locally',
    run: () =>
      call(
        'POST',
        '/v2/commands/submit-and-wait-for-transaction',
        { commands: { commands: [], commandId: 'x', actAs: [S.parties.alice] } },
        auth,
      ),
    expect: { status: 400 },
  },
  {
    name: 'update-by-offset ok',
    run: () =>
      call(
        'POST',
        '/v2/updates/update-by-offset',
        `{"offset":${offsets[Math.floor(Math.random() * offsets.length)]},"updateFormat":{"includeTransactions":{"eventFormat":{"filtersByParty":{"${S.parties.alice}":{"cumulative":[]}},"verbose":true},"transactionShape":"TRANSACTION_SHAPE_ACS_DELTA"}}}`,
        auth,
      ),
    expect: { status: 200 },
  },
  {
    name: 'update-by-offset refused locally',
    run: () => call('POST', '/v2/updates/update-by-offset', { offset: 0, updateFormat: {} }, auth),
    expect: { status: 400, code: 'NON_POSITIVE_OFFSET' },
  },
  {
    name: 'update-by-offset not found upstream',
    run: () =>
      call(
        'POST',
        '/v2/updates/update-by-offset',
        `{"offset":9223372036854775807,"updateFormat":{"includeTransactions":{"eventFormat":{"filtersByParty":{"${S.parties.alice}":{"cumulative":[]}}},"transactionShape":"TRANSACTION_SHAPE_ACS_DELTA"}}}`,
        auth,
      ),
    expect: { status: 404, code: 'UPDATE_NOT_FOUND' },
  },
  {
    name: 'vetting dry run ok',
    run: () =>
      call(
        'POST',
        '/v2/package-vetting/update',
        {
          changes: [{ operation: { Vet: { value: { packages: [{ packageId: S.packages.iouV2.packageId }] } } } }],
          dryRun: true,
          synchronizerId: S.synchronizers.global.synchronizerId,
        },
        auth,
      ),
    expect: { status: 200 },
  },
  {
    name: 'vetting refused locally',
    run: () => call('POST', '/v2/package-vetting/update', { changes: [], dryRun: true }, auth),
    expect: { status: 400 },
  },
  {
    name: 'vetting refused upstream',
    run: () =>
      call(
        'POST',
        '/v2/package-vetting/update',
        {
          changes: [{ operation: { Vet: { value: { packages: [{ packageId: S.packages.extras.packageId }] } } } }],
          dryRun: true,
          synchronizerId: S.synchronizers.global.synchronizerId,
        },
        auth,
      ),
    expect: { status: 400, code: 'TOPOLOGY_DEPENDENCIES_NOT_VETTED' },
  },
  {
    name: 'idp patch ok',
    run: () =>
      call(
        'PATCH',
        `/v2/idps/${S.identityProvider.identityProviderId}`,
        {
          identityProviderConfig: { ...S.identityProvider, isDeactivated: false },
          updateMask: { paths: ['is_deactivated'] },
        },
        auth,
      ),
    expect: { status: 200 },
  },
  {
    name: 'idp patch refused locally',
    run: () =>
      call(
        'PATCH',
        `/v2/idps/${S.identityProvider.identityProviderId}`,
        { identityProviderConfig: { ...S.identityProvider }, updateMask: { paths: ['jwksUrl'] } },
        auth,
      ),
    expect: { status: 400, code: 'INVALID_IDENTITY_PROVIDER_UPDATE_REQUEST' },
  },
];

const tally = new Map(scenarios.map((s) => [s.name, { ok: 0, unexpected: 0, sample: undefined }]));
let stop = false;
let total = 0;
async function worker() {
  while (!stop) {
    const scenario = scenarios[Math.floor(Math.random() * scenarios.length)];
    const answer = await scenario.run();
    total += 1;
    let parsedCode;
    try {
      parsedCode = JSON.parse(answer.body).code;
    } catch {
      parsedCode = undefined;
    }
    const matches = (expect) =>
      expect !== undefined &&
      answer.status === expect.status &&
      (expect.code === undefined || parsedCode === expect.code);
    const good = matches(scenario.expect) || matches(scenario.orExpect);
    const entry = tally.get(scenario.name);
    if (good) {
      entry.ok += 1;
      scenario.after?.(answer);
    } else {
      entry.unexpected += 1;
      entry.sample ??= `${answer.status} ${answer.body.slice(0, 300)}`;
    }
  }
}

/** Update streams held open for the whole run (the sandbox sends each new transaction on each). */
async function openStreams(count) {
  const filter = `{"filtersByParty":{"${S.parties.alice}":{"cumulative":[]}}}`;
  const request = `{"beginExclusive":0,"updateFormat":{"includeTransactions":{"eventFormat":${filter},"transactionShape":"TRANSACTION_SHAPE_ACS_DELTA"}}}`;
  const streams = { sockets: [], frames: 0, closedEarly: 0 };
  await Promise.all(
    Array.from({ length: count }, async () => {
      const socket = new WebSocket(`ws://${base.host}/v2/updates`, [`jwt.token.${token}`, 'daml.ws.auth']);
      await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
      socket.on('message', () => (streams.frames += 1));
      socket.once('close', () => (streams.closedEarly += stop ? 0 : 1));
      socket.send(request);
      streams.sockets.push(socket);
    }),
  );
  return streams;
}

const apiPort = Number(base.port);
// Idle: started, ready, no call yet (the readiness probe and key sets have run).
await new Promise((r) => setTimeout(r, 3000));
const rssIdle = rssKiB(pid);
const heapIdle = await heapBytes();
const fdBefore = fdCount(pid);
const socketsBefore = sockets(pid, apiPort);
const rssStart = rssKiB(pid);
console.log(
  `soak: ${durationS}s, ${connections} connections, warm-up ${warmupS}s, gateway pid ${pid}, upstream sandbox ${upstreamUrl}`,
);
const streams = await openStreams(streamCount);
const workers = Array.from({ length: connections }, () => worker());
const peak = { rss: rssStart, heapUsed: heapIdle.used, heapTotal: heapIdle.total };
const peakSampler = setInterval(() => {
  peak.rss = Math.max(peak.rss, rssKiB(pid));
  heapBytes().then(
    (heap) => {
      peak.heapUsed = Math.max(peak.heapUsed, heap.used);
      peak.heapTotal = Math.max(peak.heapTotal, heap.total);
    },
    () => {},
  );
}, 500);
await new Promise((r) => setTimeout(r, warmupS * 1000));
const rssWarm = rssKiB(pid);
const totalWarm = total;
const samples = [];
const sampler = setInterval(() => samples.push(rssKiB(pid)), 1000);
await new Promise((r) => setTimeout(r, Math.max(0, durationS - warmupS) * 1000));
stop = true;
await Promise.all(workers);
clearInterval(sampler);
clearInterval(peakSampler);
const rssEnd = rssKiB(pid);
await Promise.all(
  streams.sockets.map(
    (socket) =>
      new Promise((resolve) => {
        const timer = setTimeout(() => resolve(socket.terminate()), 5000);
        socket.once('close', () => resolve(clearTimeout(timer)));
        socket.close(1000);
      }),
  ),
);
agent.destroy();
await new Promise((r) => setTimeout(r, 1500)); // let the gateway see the closes
const fdAfter = fdCount(pid);
const socketsAfter = sockets(pid, apiPort);

const unexpected = [...tally.values()].reduce((n, t) => n + t.unexpected, 0);
const measured = total - totalWarm;
const growth = ((rssEnd - rssWarm) / rssWarm) * 100;
console.log('\nscenario                                  ok   unexpected');
for (const [name, t] of tally)
  console.log(
    `${name.padEnd(40)} ${String(t.ok).padStart(6)} ${String(t.unexpected).padStart(6)}${t.sample ? `   e.g. ${t.sample}` : ''}`,
  );
console.log(
  `\nrequests: ${total} (${Math.round(measured / Math.max(1, durationS - warmupS))}/s after warm-up), unexpected answers: ${unexpected}`,
);
console.log(
  `resident memory: start ${(rssStart / 1024).toFixed(1)} MiB, after warm-up ${(rssWarm / 1024).toFixed(1)} MiB, end ${(rssEnd / 1024).toFixed(1)} MiB, growth after warm-up ${growth.toFixed(1)}% (max sampled ${(Math.max(...samples, rssEnd) / 1024).toFixed(1)} MiB)`,
);
console.log(
  `idle: resident ${(rssIdle / 1024).toFixed(1)} MiB, heap used ${mib(heapIdle.used)} MiB of ${mib(heapIdle.total)} MiB; peak under load: resident ${(peak.rss / 1024).toFixed(1)} MiB, heap used ${mib(peak.heapUsed)} MiB of ${mib(peak.heapTotal)} MiB`,
);
console.log(
  `streams: ${streamCount} open, ${streams.frames} frames received, ${streams.closedEarly} closed before the end`,
);
const show = (c) => `listening ${c.listening}, client ${c.inbound}, upstream pool ${c.outbound}, other ${c.other}`;
console.log(`file descriptors: before ${fdBefore}, after ${fdAfter}`);
console.log(`sockets before: ${show(socketsBefore)}`);
console.log(
  `sockets after:  ${show(socketsAfter)} (idle upstream keep-alive connections stay pooled, at most ${connections} + those open before)`,
);

gateway.child.kill('SIGTERM');
const exitCode = await new Promise((resolve) => gateway.child.once('exit', resolve));
console.log(`gateway exit on SIGTERM: ${exitCode}`);
sandbox.child.kill('SIGTERM');

const failures = [];
if (unexpected > 0) failures.push(`${unexpected} unexpected answers`);
// Every client connection is gone; pooled upstream connections are bounded by the concurrency.
if (socketsAfter.inbound > 0)
  failures.push(`${socketsAfter.inbound} client sockets still open after every client left`);
// Besides the traffic's, the connections open before it (the readiness probe's own, the version
// refresh's) may stay.
const upstreamBound = connections + socketsBefore.outbound;
if (socketsAfter.outbound > upstreamBound)
  failures.push(`${socketsAfter.outbound} upstream sockets for ${connections} connections (bound ${upstreamBound})`);
if (socketsAfter.other > socketsBefore.other + 2)
  failures.push(`sockets in other states grew from ${socketsBefore.other} to ${socketsAfter.other}`);
if (fdAfter - socketsAfter.outbound > fdBefore - socketsBefore.outbound + 2)
  failures.push(`file descriptors other than pooled upstream sockets grew from ${fdBefore} to ${fdAfter}`);
if (growth > maxRssGrowth)
  failures.push(`resident memory grew ${growth.toFixed(1)}% after warm-up (limit ${maxRssGrowth}%)`);
if (exitCode !== 0) failures.push(`gateway exited ${exitCode} on SIGTERM`);
if (streams.closedEarly > 0) failures.push(`${streams.closedEarly} of ${streamCount} streams closed before the end`);
if (failures.length > 0) {
  console.error(`\nSOAK FAILED: ${failures.join('; ')}`);
  process.exit(1);
}
console.log('\nsoak passed');
process.exit(0);
