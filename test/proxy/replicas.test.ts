// Participant replicas (upstream.replicas): real replicas on fixed 127.0.0.1 ports, one answering at a
// time, the passive ones not listening (as a passive Canton replica's Ledger API port is not). Calls
// follow the active one; a call refused before it was written waits for the next one; a written call
// is never sent twice.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { buildGateway, type Gateway } from '../../src/app.js';
import { ConfigError, validateGatewayConfig } from '../../src/config/load.js';
import { READINESS_USER_AGENT } from '../../src/proxy/upstream-probe.js';
import { gauge } from '../helpers/gateway.js';
import { logCapture, type LogCapture } from '../helpers/log-capture.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';

const SUBMIT = '/v2/commands/submit-and-wait';
const LEDGER_END = '/v2/state/ledger-end';

interface Received {
  readonly method: string;
  readonly url: string;
  readonly commandId: string | undefined;
  /** performance.now() when it arrived. */
  readonly at: number;
}

/** A participant replica on a fixed port: started, killed (every connection cut) and started again. */
class TestReplica {
  readonly received: Received[] = [];
  readonly upgrades: string[] = [];
  readonly upgradeHeaders: http.IncomingHttpHeaders[] = [];
  probes = 0;
  /** performance.now() when it last began to listen. */
  listeningSince = 0;
  /** Its answer to the gateway's probe (GET /v2/version with the readiness user agent). */
  probeStatus: () => number = () => 200;
  /** How long it takes to answer a submission (a call in flight when it dies). */
  submitDelayMs = 0;
  private dieOnSubmission: ((at: number) => void) | undefined;
  /** Calls it receives and never answers. */
  holds: (call: Received) => boolean = () => false;
  private server: http.Server | undefined;
  private wss: WebSocketServer | undefined;

  constructor(
    readonly port: number,
    /** Every commandId any replica received, with how many times. */
    private readonly commandIds: Map<string, number>,
  ) {}

  static async freePort(): Promise<number> {
    const server = http.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    return port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get calls(): Received[] {
    return this.received;
  }

  get listening(): boolean {
    return this.server !== undefined;
  }

  async start(): Promise<void> {
    const server = http.createServer((request, response) => this.answer(request, response));
    const wss = new WebSocketServer({
      noServer: true,
      handleProtocols: (offered) => (offered.has('daml.ws.auth') ? 'daml.ws.auth' : false),
    });
    wss.on('connection', (socket) => socket.on('message', (data: Buffer) => socket.send(`echo:${data.toString()}`)));
    server.on('upgrade', (request, socket, head) => {
      this.upgrades.push(request.url ?? '');
      this.upgradeHeaders.push(request.headers);
      wss.handleUpgrade(request, socket, head, (client) => wss.emit('connection', client, request));
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.server = server;
    this.wss = wss;
    this.listeningSince = performance.now();
  }

  /** Dies at once: stops listening and cuts every connection, calls in flight and streams included. */
  /** Dies the moment its next submission arrives (so that calls are in flight on it); resolves with that time. */
  killOnNextSubmission(): Promise<number> {
    return new Promise((resolve) => (this.dieOnSubmission = resolve));
  }

  async kill(): Promise<void> {
    const { server, wss } = this;
    if (server === undefined) return;
    this.server = undefined;
    this.wss = undefined;
    for (const client of wss?.clients ?? []) client.terminate();
    wss?.close();
    const closed = new Promise((resolve) => server.close(resolve));
    server.closeAllConnections();
    await closed;
  }

  private answer(request: http.IncomingMessage, response: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.headers['user-agent'] === READINESS_USER_AGENT) {
        this.probes++;
        const status = this.probeStatus();
        response
          .writeHead(status, { 'content-type': 'application/json' })
          .end(status < 500 ? '{"version":"3.5.1"}' : '{}');
        return;
      }
      const body = Buffer.concat(chunks).toString();
      const commandId = request.method === 'POST' ? (JSON.parse(body) as { commandId: string }).commandId : undefined;
      this.received.push({ method: request.method ?? '', url: request.url ?? '', commandId, at: performance.now() });
      if (commandId !== undefined) this.commandIds.set(commandId, (this.commandIds.get(commandId) ?? 0) + 1);
      const die = commandId === undefined ? undefined : this.dieOnSubmission;
      if (die !== undefined) {
        this.dieOnSubmission = undefined;
        const at = performance.now();
        void this.kill().then(() => die(at)); // its connections are cut at once, before any answer
        return;
      }
      const send = () => {
        if (!response.destroyed)
          response
            .writeHead(200, { 'content-type': 'application/json' })
            .end(JSON.stringify({ replica: this.port, commandId }));
      };
      if (this.holds(this.received.at(-1)!)) return;
      if (commandId === undefined) send();
      else setTimeout(send, this.submitDelayMs);
    });
  }
}

interface ReplicaGateway {
  readonly url: string;
  readonly adminUrl: string;
  readonly gateway: Gateway;
  readonly registry: Registry;
  readonly log: LogCapture;
  readonly headers: Record<string, string>;
  close(): Promise<void>;
}

let replicas: TestReplica[] = [];
let gw: ReplicaGateway | undefined;
afterEach(async () => {
  await gw?.close();
  await Promise.all(replicas.map((replica) => replica.kill()));
  gw = undefined;
  replicas = [];
});

/** `count` replicas on ports of their own, none listening yet. */
async function reserveReplicas(count: number): Promise<{ replicas: TestReplica[]; commandIds: Map<string, number> }> {
  const commandIds = new Map<string, number>();
  replicas = [];
  for (let i = 0; i < count; i++) replicas.push(new TestReplica(await TestReplica.freePort(), commandIds));
  return { replicas, commandIds };
}

async function startReplicaGateway(
  entries: Array<string | { url: string; name: string }>,
  upstream: Record<string, unknown> = {},
): Promise<ReplicaGateway> {
  const issuer = await createTestIssuer();
  const config = validateGatewayConfig(
    {
      server: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
      upstream: { replicas: entries, readinessIntervalMs: 1_000, ...upstream },
      auth: { issuers: [issuer.issuerConfig], participantId: TEST_PARTICIPANT },
    },
    'test',
  );
  const registry = new Registry();
  const log = logCapture();
  const gateway = await buildGateway(config, { upstreamUrl: config.upstream.url, registry, logger: log.logger });
  const urls = await gateway.listen();
  const headers = { authorization: `Bearer ${await issuer.mint()}` };
  return { url: urls.api, adminUrl: urls.admin, gateway, registry, log, headers, close: () => gateway.close() };
}

let commandCounter = 0;
async function submit(
  gateway: ReplicaGateway,
  commandId = `cmd-${++commandCounter}`,
): Promise<{ status: number; body: Record<string, unknown>; commandId: string }> {
  const response = await fetch(`${gateway.url}${SUBMIT}`, {
    method: 'POST',
    headers: { ...gateway.headers, 'content-type': 'application/json' },
    body: JSON.stringify({ commands: [], commandId, actAs: ['Alice::1220'], userId: 'alice' }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown>, commandId };
}

async function ledgerEnd(gateway: ReplicaGateway): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${gateway.url}${LEDGER_END}`, { headers: gateway.headers });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const replicaUp = (gateway: ReplicaGateway, replica: string) =>
  gauge(gateway, 'ledger_gateway_upstream_replica_up', { replica });
const failovers = (gateway: ReplicaGateway) => gauge(gateway, 'ledger_gateway_upstream_failovers_total');
const changes = (gateway: ReplicaGateway) =>
  gateway.log
    .entries()
    .filter((entry) => entry.msg === 'active upstream replica changed' || entry.msg === 'no upstream replica answers');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('upstream.replicas: configuration', () => {
  const base = { auth: { issuers: [{ issuer: 'https://idp.test', jwksUrl: 'https://idp.test/jwks' }] } };

  it('takes url or replicas, not both; checks each replica like url; the first replica stands in for url', () => {
    const problems = (upstream: Record<string, unknown>) => {
      try {
        validateGatewayConfig({ ...base, upstream }, 'test');
        return [];
      } catch (error) {
        return (error as ConfigError).problems;
      }
    };
    expect(problems({ url: 'http://a:7575', replicas: ['http://b:7575'] })).toEqual([
      expect.stringMatching(/^upstream: set url or replicas, not both/),
    ]);
    expect(problems({ replicas: ['http://a:7575', 'http://user:secret@b:7575', 'sandbox', 'ftp://c'] })).toEqual([
      'upstream.replicas[1]: must not carry user information: callers authenticate with their own bearer token',
      'upstream.replicas[2]: must be a base URL: the sandbox has no replicas',
      'upstream.replicas[3]: must be an http: or https: URL, not ftp:',
    ]);
    expect(
      problems({
        replicas: [
          { url: 'http://a:7575', name: 'east' },
          { url: 'http://b:7575', name: 'east' },
        ],
      }),
    ).toEqual(['upstream.replicas[1].name: "east" names another replica too']);
    expect(problems({ replicas: [] }).join()).toMatch(/upstream.replicas/);
    expect(problems({ replicas: [{ url: 'http://a:7575', name: 'has space' }] }).join()).toMatch(/upstream.replicas/);
    // Never the sandbox (nor its development issuer): url is the first replica's.
    const config = validateGatewayConfig(
      { ...base, upstream: { replicas: [{ url: 'http://a:7575/base', name: 'east' }, 'http://b:7575'] } },
      'test',
    );
    expect(config.upstream.url).toBe('http://a:7575/base');
  });
});

describe('upstream.replicas: the active replica', () => {
  it('sends calls to the replica that answers; one answering 5xx to the probe is never chosen', async () => {
    const [failing, healthy] = (await reserveReplicas(2)).replicas as [TestReplica, TestReplica];
    failing.probeStatus = () => 503; // up, but its Ledger API answers 5xx
    await failing.start();
    await healthy.start();
    gw = await startReplicaGateway([
      { url: failing.url, name: 'east' },
      { url: healthy.url, name: 'west' },
    ]);
    await expect.poll(async () => (await fetch(`${gw!.adminUrl}/readyz`)).status, { timeout: 5_000 }).toBe(200);
    for (let i = 0; i < 5; i++) expect((await submit(gw)).status).toBe(200);
    expect((await ledgerEnd(gw)).status).toBe(200);
    expect(failing.calls).toHaveLength(0);
    expect(healthy.calls).toHaveLength(6);
    expect(await replicaUp(gw, 'east')).toBe(0);
    expect(await replicaUp(gw, 'west')).toBe(1);
    expect(await failovers(gw)).toBe(0);
    // The metric labels replicas by name, never by URL.
    expect(await gw.registry.getSingleMetricAsString('ledger_gateway_upstream_replica_up')).not.toMatch(/127\.0\.0\.1/);
  });

  it('keeps the active replica while another flaps', async () => {
    const [stable, flapping] = (await reserveReplicas(2)).replicas as [TestReplica, TestReplica];
    await stable.start();
    gw = await startReplicaGateway([stable.url, flapping.url], { readinessIntervalMs: 100 });
    await expect.poll(() => replicaUp(gw!, '0'), { timeout: 5_000 }).toBe(1);
    let probe = 0;
    flapping.probeStatus = () => (++probe % 2 === 0 ? 503 : 200);
    await flapping.start();
    await expect.poll(() => flapping.probes, { timeout: 5_000 }).toBeGreaterThanOrEqual(8);
    for (let i = 0; i < 5; i++) expect((await submit(gw)).status).toBe(200);
    expect(stable.calls).toHaveLength(5);
    expect(flapping.calls).toHaveLength(0);
    expect(await failovers(gw)).toBe(0);
    expect(changes(gw).map((entry) => entry.activeReplica)).toEqual(['0']);
  });

  it('moves once from an active replica that flaps, and stays on the one that took over', async () => {
    const [flapping, stable] = (await reserveReplicas(2)).replicas as [TestReplica, TestReplica];
    await flapping.start();
    gw = await startReplicaGateway([flapping.url, stable.url], { readinessIntervalMs: 100 });
    await expect.poll(() => replicaUp(gw!, '0'), { timeout: 5_000 }).toBe(1);
    await stable.start();
    await expect.poll(() => replicaUp(gw!, '1'), { timeout: 5_000 }).toBe(1);
    expect((await submit(gw)).status).toBe(200);
    expect(flapping.calls).toHaveLength(1); // still the active one
    let probe = 0;
    flapping.probeStatus = () => (++probe % 2 === 1 ? 503 : 200);
    await expect.poll(() => failovers(gw!), { timeout: 5_000 }).toBe(1);
    const probesThen = flapping.probes;
    await expect.poll(() => flapping.probes, { timeout: 5_000 }).toBeGreaterThanOrEqual(probesThen + 8);
    for (let i = 0; i < 5; i++) expect((await submit(gw)).status).toBe(200);
    expect(flapping.calls).toHaveLength(1);
    expect(stable.calls).toHaveLength(5);
    expect(await failovers(gw)).toBe(1);
    const [first, moved, ...rest] = changes(gw);
    expect(first).toMatchObject({ activeReplica: '0', previousReplica: null, cause: 'replica 0 answered the probe' });
    expect(moved).toMatchObject({
      activeReplica: '1',
      previousReplica: '0',
      cause: expect.stringMatching(/^replica 0 did not answer the probe/),
    });
    expect(rest).toEqual([]);
  });

  it('is ready while a replica answers, and says which one is active in one log line per change', async () => {
    const [first, second] = (await reserveReplicas(2)).replicas as [TestReplica, TestReplica];
    gw = await startReplicaGateway([first.url, second.url], { readinessIntervalMs: 100 });
    await sleep(300);
    expect((await fetch(`${gw.adminUrl}/readyz`)).status).toBe(503);
    await second.start();
    await expect.poll(async () => (await fetch(`${gw!.adminUrl}/readyz`)).status, { timeout: 5_000 }).toBe(200);
    await second.kill();
    await expect.poll(async () => (await fetch(`${gw!.adminUrl}/readyz`)).status, { timeout: 5_000 }).toBe(503);
    await first.start();
    await expect.poll(async () => (await fetch(`${gw!.adminUrl}/readyz`)).status, { timeout: 5_000 }).toBe(200);
    expect(changes(gw).map((entry) => [entry.activeReplica, entry.previousReplica])).toEqual([
      ['1', null],
      [null, '1'],
      ['0', null],
    ]);
    expect(await failovers(gw)).toBe(1);
    for (const entry of changes(gw)) expect(entry.cause).toEqual(expect.any(String));
  });
});

describe('upstream.replicas: failover without losing calls', () => {
  it('sends a call refused before it was written to the next replica that answers, probing at once', async () => {
    const {
      replicas: [dying, next],
      commandIds,
    } = (await reserveReplicas(2)) as { replicas: [TestReplica, TestReplica]; commandIds: Map<string, number> };
    await dying.start();
    // Probes at the interval would come far too late: the call's own failure must start them.
    gw = await startReplicaGateway([dying.url, next.url], { readinessIntervalMs: 60_000, timeoutMs: 5_000 });
    await expect.poll(() => replicaUp(gw!, '0'), { timeout: 5_000 }).toBe(1);
    expect((await submit(gw)).status).toBe(200);
    await dying.kill();
    await next.start();
    await sleep(100); // the gateway has seen its idle connections to the dead replica close
    const started = performance.now();
    const moved = await submit(gw);
    expect(moved.status).toBe(200);
    expect(moved.body.replica).toBe(next.port);
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(commandIds.get(moved.commandId)).toBe(1);
    expect(await failovers(gw)).toBe(1);
    expect(changes(gw).find((entry) => entry.previousReplica === '0')).toMatchObject({
      cause: expect.stringMatching(/^a call could not connect to replica 0 \(ECONNREFUSED\)/),
    });
    // The version cache keeps serving (one key for the whole set).
    expect((await fetch(`${gw.url}/v2/version`, { headers: gw.headers })).status).toBe(200);
  });

  it('fetches the version (for the shared cache) from the next replica when the active one refuses', async () => {
    const [dying, next] = (await reserveReplicas(2)).replicas as [TestReplica, TestReplica];
    await dying.start();
    gw = await startReplicaGateway([dying.url, next.url], { readinessIntervalMs: 60_000, timeoutMs: 5_000 });
    await expect.poll(() => replicaUp(gw!, '0'), { timeout: 5_000 }).toBe(1);
    await dying.kill();
    await next.start();
    const response = await fetch(`${gw.url}/v2/version`, { headers: gw.headers });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-cache')).toBe('MISS');
    expect(next.calls.map((call) => call.url)).toEqual(['/v2/version']);
    const cached = await fetch(`${gw.url}/v2/version`, { headers: gw.headers });
    expect(cached.headers.get('x-cache')).toBe('HIT');
  });

  it('holds refused calls until a replica answers, within their own timeout; then 503', async () => {
    const [first, second] = (await reserveReplicas(2)).replicas as [TestReplica, TestReplica];
    gw = await startReplicaGateway([first.url, second.url], { readinessIntervalMs: 200, timeoutMs: 800 });
    const started = performance.now();
    const refused = await submit(gw);
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({ code: 'GATEWAY_UPSTREAM_UNAVAILABLE' });
    expect(performance.now() - started).toBeGreaterThanOrEqual(700); // it waited its timeout for a replica
    const waiting = submit(gw);
    await sleep(200);
    await second.start();
    const served = await waiting;
    expect(served.status).toBe(200);
    expect(served.body.replica).toBe(second.port);
    expect(second.calls.map((call) => call.commandId)).toEqual([served.commandId]);
    expect(first.calls).toHaveLength(0);
  });

  it('never sends a written call twice: a submission in flight on a dying replica gets 503', async () => {
    const {
      replicas: [dying, next],
      commandIds,
    } = (await reserveReplicas(2)) as { replicas: [TestReplica, TestReplica]; commandIds: Map<string, number> };
    await dying.start();
    gw = await startReplicaGateway([dying.url, next.url], { readinessIntervalMs: 200 });
    await expect.poll(() => replicaUp(gw!, '0'), { timeout: 5_000 }).toBe(1);
    await next.start();
    await expect.poll(() => replicaUp(gw!, '1'), { timeout: 5_000 }).toBe(1);
    dying.holds = (call) => call.method === 'POST';
    const inFlight = submit(gw);
    await expect.poll(() => dying.calls.length, { timeout: 5_000 }).toBe(1);
    await dying.kill();
    const answer = await inFlight;
    expect(answer.status).toBe(503);
    expect(answer.body).toMatchObject({ code: 'GATEWAY_UPSTREAM_UNAVAILABLE' });
    await sleep(500); // long enough for any resend to have arrived
    expect(commandIds.get(answer.commandId)).toBe(1);
    expect(next.calls).toHaveLength(0);
    const after = await submit(gw);
    expect(after.status).toBe(200);
    expect(after.body.replica).toBe(next.port);
  });

  it('sends a GET in flight on a dying replica again, on to the next replica when its own refuses', async () => {
    const [dying, next] = (await reserveReplicas(2)).replicas as [TestReplica, TestReplica];
    await dying.start();
    gw = await startReplicaGateway([dying.url, next.url], { readinessIntervalMs: 200 });
    await expect.poll(() => replicaUp(gw!, '0'), { timeout: 5_000 }).toBe(1);
    await next.start();
    await expect.poll(() => replicaUp(gw!, '1'), { timeout: 5_000 }).toBe(1);
    dying.holds = (call) => call.method === 'GET';
    const inFlight = ledgerEnd(gw);
    await expect.poll(() => dying.calls.length, { timeout: 5_000 }).toBe(1);
    await dying.kill();
    const answer = await inFlight;
    expect(answer.status).toBe(200);
    expect(answer.body.replica).toBe(next.port);
    expect(next.calls.map((call) => call.url)).toEqual([LEDGER_END]);
  });
});

/** A stream through the gateway (Canton's subprotocol), open and echoing. */
function openStream(gateway: ReplicaGateway): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${gateway.url.replace('http', 'ws')}/v2/updates`, ['daml.ws.auth'], {
      headers: gateway.headers,
    });
    socket.once('open', () => resolve(socket));
    socket.once('error', reject);
    socket.once('unexpected-response', (_request, response) => reject(new Error(`status ${response.statusCode}`)));
  });
}

function echo(socket: WebSocket, text: string): Promise<string> {
  return new Promise((resolve) => {
    socket.once('message', (data: Buffer) => resolve(data.toString()));
    socket.send(text);
  });
}

function closeOf(socket: WebSocket): Promise<{ code: number; reason: string }> {
  return new Promise((resolve) => socket.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
}

describe('upstream.replicas: WebSocket streams', () => {
  it('closes a stream whose replica dies with 1012; a new stream opens on the one that took over', async () => {
    const [dying, next] = (await reserveReplicas(2)).replicas as [TestReplica, TestReplica];
    await dying.start();
    gw = await startReplicaGateway([dying.url, next.url], { readinessIntervalMs: 200 });
    await expect.poll(() => replicaUp(gw!, '0'), { timeout: 5_000 }).toBe(1);
    const stream = await openStream(gw);
    expect(await echo(stream, 'first')).toBe('echo:first');
    const closed = closeOf(stream);
    await dying.kill();
    expect(await closed).toEqual({ code: 1012, reason: 'participant replica changed; reconnect' });
    await next.start();
    let reopened: WebSocket | undefined;
    await expect
      .poll(async () => (reopened = await openStream(gw!).catch(() => undefined)) !== undefined, { timeout: 5_000 })
      .toBe(true);
    expect(await echo(reopened!, 'again')).toBe('echo:again');
    reopened!.close();
    expect(dying.upgrades).toHaveLength(1);
    expect(next.upgrades).toEqual(['/v2/updates']);
    const ended = gw.log.entries().filter((entry) => entry.msg === 'stream ended');
    expect(ended[0]).toMatchObject({ closedFirst: 'participant', reason: 'participant', closeCode: 1012 });
  });

  it('closes the streams of a replica calls moved away from, though its connections still stand', async () => {
    const [leaving, next] = (await reserveReplicas(2)).replicas as [TestReplica, TestReplica];
    await leaving.start();
    gw = await startReplicaGateway([leaving.url, next.url], { readinessIntervalMs: 100 });
    await expect.poll(() => replicaUp(gw!, '0'), { timeout: 5_000 }).toBe(1);
    await next.start();
    await expect.poll(() => replicaUp(gw!, '1'), { timeout: 5_000 }).toBe(1);
    const stream = await openStream(gw);
    expect(await echo(stream, 'first')).toBe('echo:first');
    const closed = closeOf(stream);
    leaving.probeStatus = () => 503; // still listening, its streams still open, but no longer serving
    expect(await closed).toMatchObject({ code: 1012 });
    expect(gw.log.entries().find((entry) => entry.msg === 'stream ended')).toMatchObject({
      closedFirst: 'gateway',
      reason: 'replica_changed',
      closeCode: 1012,
    });
    const reopened = await openStream(gw);
    expect(await echo(reopened, 'again')).toBe('echo:again');
    reopened.close();
    expect(next.upgrades).toHaveLength(1);
  });
});

/** An upgrade the gateway (or the participant) refused: its status and Canton-shaped body. */
function refusedUpgrade(gateway: ReplicaGateway): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${gateway.url.replace('http', 'ws')}/v2/updates`, ['daml.ws.auth'], {
      headers: gateway.headers,
    });
    socket.once('open', () => reject(new Error('the upgrade was tunnelled')));
    socket.once('error', reject);
    socket.once('unexpected-response', (_request, response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.once('end', () =>
        resolve({
          status: response.statusCode ?? 0,
          body: JSON.parse(Buffer.concat(chunks).toString() || '{}') as Record<string, unknown>,
        }),
      );
    });
  });
}

/**
 * A replica that answers the probe and accepts every connection, but fails each upgrade once it read
 * its request: answers 500, or closes the connection without a word.
 */
async function startHandshakeFailingReplica(
  failure: 'status 500' | 'close',
): Promise<{ url: string; upgrades: number; close(): Promise<void> }> {
  let upgrades = 0;
  const server = http.createServer((_request, response) =>
    response.writeHead(200, { 'content-type': 'application/json' }).end('{"version":"3.5.1"}'),
  );
  server.on('upgrade', (_request, socket: Socket) => {
    upgrades++;
    if (failure === 'close') socket.destroy();
    else socket.end('HTTP/1.1 500 Internal Server Error\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get upgrades() {
      return upgrades;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('upstream.replicas: failover of WebSocket upgrades', () => {
  it('opens an upgrade refused before it was written on the next replica that answers; frames flow both ways', async () => {
    const [dying, next] = (await reserveReplicas(2)).replicas as [TestReplica, TestReplica];
    await dying.start();
    // Probes at the interval would come far too late: the upgrade's own failure must start them.
    gw = await startReplicaGateway([dying.url, next.url], { readinessIntervalMs: 60_000, timeoutMs: 5_000 });
    await expect.poll(() => replicaUp(gw!, '0'), { timeout: 5_000 }).toBe(1);
    await dying.kill(); // its port now refuses connections
    await next.start();
    const started = performance.now();
    const stream = await openStream(gw);
    expect(await echo(stream, 'moved')).toBe('echo:moved');
    expect(await echo(stream, 'and back')).toBe('echo:and back');
    expect(performance.now() - started).toBeLessThan(2_000);
    const closed = closeOf(stream);
    stream.close(1000, 'done');
    expect(await closed).toEqual({ code: 1000, reason: 'done' });
    expect(dying.upgrades).toEqual([]);
    expect(next.upgrades).toEqual(['/v2/updates']);
    expect(next.upgradeHeaders[0]).toMatchObject({
      host: new URL(next.url).host,
      'sec-websocket-protocol': 'daml.ws.auth',
    });
    expect(await failovers(gw)).toBe(1);
    // Logged as a call's failover is: the refusal took replica 0 out, the probe it set off found 1.
    expect(changes(gw).slice(1)).toMatchObject([
      { activeReplica: null, previousReplica: '0', cause: 'a call could not connect to replica 0 (ECONNREFUSED)' },
      { activeReplica: '1', previousReplica: null, cause: 'replica 1 answered the probe' },
    ]);
  });

  for (const failure of ['close', 'status 500'] as const) {
    it(`never sends a written upgrade again: a replica that took it and failed the handshake (${failure})`, async () => {
      const [other] = (await reserveReplicas(1)).replicas as [TestReplica];
      const failing = await startHandshakeFailingReplica(failure);
      try {
        gw = await startReplicaGateway([failing.url, other.url], { readinessIntervalMs: 100, timeoutMs: 5_000 });
        await expect.poll(() => replicaUp(gw!, '0'), { timeout: 5_000 }).toBe(1);
        await other.start();
        await expect.poll(() => replicaUp(gw!, '1'), { timeout: 5_000 }).toBe(1);
        const refused = await refusedUpgrade(gw);
        await sleep(300); // long enough for any resend to have arrived
        expect(failing.upgrades).toBe(1);
        expect(other.upgrades).toEqual([]);
        expect(await failovers(gw)).toBe(0);
        expect(await replicaUp(gw, '0')).toBe(1); // still the active replica: it answers
        if (failure === 'status 500') {
          expect(refused.status).toBe(500); // the replica's answer, passed on
          return;
        }
        // Reset after the request was written: ECONNRESET, which before a write would be a connect
        // failure to fail over; here the gateway's own 503.
        expect(refused).toMatchObject({ status: 503, body: { code: 'GATEWAY_UPSTREAM_UNAVAILABLE' } });
        const line = await gw.log.requestLine(refused.body.correlationId as string);
        expect(line).toMatchObject({ reason: 'ECONNRESET' });
      } finally {
        await failing.close();
      }
    });
  }

  it('holds a refused upgrade until a replica answers, within its own timeout; then 503', async () => {
    const [first, second] = (await reserveReplicas(2)).replicas as [TestReplica, TestReplica];
    gw = await startReplicaGateway([first.url, second.url], { readinessIntervalMs: 200, timeoutMs: 800 });
    const started = performance.now();
    expect(await refusedUpgrade(gw)).toMatchObject({ status: 503, body: { code: 'GATEWAY_UPSTREAM_UNAVAILABLE' } });
    expect(performance.now() - started).toBeGreaterThanOrEqual(700); // it waited its timeout for a replica
    const waiting = openStream(gw);
    await sleep(200);
    await second.start();
    const stream = await waiting;
    expect(await echo(stream, 'late')).toBe('echo:late');
    stream.close();
    expect(second.upgrades).toEqual(['/v2/updates']);
    expect(first.upgrades).toEqual([]);
  });
});

describe('upstream.replicas: failover under load', () => {
  interface Outcome {
    readonly kind: 'submit' | 'get';
    readonly status: number;
    readonly code: unknown;
    readonly requestId: string | null;
    readonly startedAt: number;
    readonly endedAt: number;
  }

  it('fails only calls written to a dead replica, none twice, and serves within the interval + 1 s', async () => {
    const {
      replicas: [first, second, third],
      commandIds,
    } = (await reserveReplicas(3)) as {
      replicas: [TestReplica, TestReplica, TestReplica];
      commandIds: Map<string, number>;
    };
    for (const replica of [first, second, third]) replica.submitDelayMs = 40; // submissions are in flight when one dies
    await first.start();
    const interval = 1_000;
    gw = await startReplicaGateway([first.url, second.url, third.url], { readinessIntervalMs: interval });
    await expect.poll(async () => (await fetch(`${gw!.adminUrl}/readyz`)).status, { timeout: 5_000 }).toBe(200);

    const outcomes: Outcome[] = [];
    let running = true;
    const client = async () => {
      for (let call = 0; running; call++) {
        const kind = call % 2 === 0 ? 'submit' : 'get';
        const startedAt = performance.now();
        const response =
          kind === 'submit'
            ? await fetch(`${gw!.url}${SUBMIT}`, {
                method: 'POST',
                headers: { ...gw!.headers, 'content-type': 'application/json' },
                body: JSON.stringify({
                  commands: [],
                  commandId: `load-${++commandCounter}`,
                  actAs: ['Alice::1220'],
                  userId: 'alice',
                }),
              })
            : await fetch(`${gw!.url}${LEDGER_END}`, { headers: gw!.headers });
        const body = (await response.json()) as { code?: unknown };
        outcomes.push({
          kind,
          status: response.status,
          code: body.code,
          requestId: response.headers.get('x-request-id'),
          startedAt,
          endedAt: performance.now(),
        });
      }
    };
    const clients = Array.from({ length: 8 }, client);
    await sleep(3_000);
    // Canton's way: the active replica dies; a passive one takes over a moment later.
    const firstDied = await first.killOnNextSubmission();
    await sleep(300);
    await second.start();
    await sleep(3_000);
    // And again, the next one listening at once.
    const secondDied = await second.killOnNextSubmission();
    await third.start();
    await sleep(3_000);
    running = false;
    await Promise.all(clients);

    const gaps = [
      { replica: second, died: firstDied },
      { replica: third, died: secondDied },
    ].map(({ replica, died }) => ({
      afterListening: replica.calls[0]!.at - replica.listeningSince,
      afterDeath: replica.calls[0]!.at - died,
    }));

    const failed = outcomes.filter((outcome) => outcome.status !== 200);
    const lines = gw.log.entries().filter((entry) => entry.msg === 'request');
    const cutAt = (died: number) => failed.filter((outcome) => outcome.startedAt < died && outcome.endedAt >= died);
    console.log(
      `replica failover under load (8 clients, readinessIntervalMs ${interval}): ` +
        gaps
          .map(
            (gap, i) =>
              `#${i + 1} served ${gap.afterListening.toFixed(0)} ms after the next replica listened ` +
              `(${gap.afterDeath.toFixed(0)} ms after the active one died)`,
          )
          .join('; ') +
        `; ${outcomes.length} calls, ${failed.length} failed ` +
        `(${cutAt(firstDied).length} + ${cutAt(secondDied).length})`,
    );
    for (const gap of gaps) expect(gap.afterListening).toBeLessThanOrEqual(interval + 1_000);
    for (const [commandId, times] of commandIds) expect(times, commandId).toBe(1);
    for (const outcome of failed) {
      expect(outcome.status).toBe(503);
      expect(outcome.code).toBe('GATEWAY_UPSTREAM_UNAVAILABLE');
      // Written before its replica died (its connection lost), never one refused before it was written.
      const inFlightAtDeath = [firstDied, secondDied].some(
        (died) => outcome.startedAt < died && outcome.endedAt >= died,
      );
      expect(inFlightAtDeath).toBe(true);
      const line = lines.find((entry) => entry.reqId === outcome.requestId);
      expect(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']).toContain(line?.reason);
    }
    // At most the calls in flight when each died (one per client), at least one of them each time.
    for (const died of [firstDied, secondDied]) {
      const cut = cutAt(died);
      expect(cut.length).toBeGreaterThanOrEqual(1);
      expect(cut.length).toBeLessThanOrEqual(8);
    }
    expect(outcomes.length - failed.length).toBeGreaterThan(200);
    expect(third.calls.length).toBeGreaterThan(0);
    expect(await failovers(gw)).toBe(2);
  }, 60_000);
});
