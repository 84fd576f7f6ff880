// Issue 32 §2: two ordinary callers each open 256 connections (their share of protection.maxInFlight),
// declare a 1 MiB submission body (read whole: a rule-checked route) and send all but its last byte
// (issue 40: a declared length holds nothing until its bytes arrive).
// Before limits.bufferedBodyBytes the sum of those bodies had no bound and the pod's cgroup killed the
// gateway. Here the built process runs under the shipped heap flag with every default, and its peak
// resident memory is held against the shipped pod memory limit.
import net from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../src/config/schema.js';
import { MAX_LINGERING } from '../../src/exchange/lingering-close.js';
import { buildDist, startProcess, writeGatewayConfig, type GatewayProcess } from '../helpers/process.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';
import { residentMemory, shipped } from '../adversarial/shipped-gateway.js';

const MiB = 1024 * 1024;
const SUBMIT = '/v2/commands/submit-and-wait-for-transaction';
const SUBMISSION =
  '{"commands":{"commands":[{"CreateCommand":{"templateId":"p:M:E","createArguments":{}}}],"commandId":"c","actAs":["Alice"]}}';

async function metric(admin: string, name: string): Promise<number> {
  const text = await (await fetch(`${admin}/metrics`)).text();
  return Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)`, 'm').exec(text)![1]);
}

/** Polls `done` every 50 ms until it holds or `withinMs` passes; true when it held. */
async function waitFor(done: () => boolean | Promise<boolean>, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (!(await done())) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return true;
}

/** How many connections got each answer, or none (then: closed or open, and the error met). */
function tally(connections: readonly Unfinished[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const c of connections) {
    const key =
      c.status !== undefined ? `${c.status} ${c.code}` : `none, ${c.closed ? 'closed' : 'open'} ${c.error ?? ''}`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

/** One connection that declares a 1 MiB submission and sends its head; `send` then sends all but the last byte. */
interface Unfinished {
  status: number | undefined;
  /** Whether the connection was closed, and the error it met (a reset), for a failure's message. */
  closed: boolean;
  error: string | undefined;
  /** The answer's code, and its context.limit when it has one. */
  code: string | undefined;
  send(): Promise<void>;
  destroy(): void;
}

const BODY = Buffer.alloc(MiB - 1, 0x20); // shared by every connection: the test holds one copy
/** How a connection closed while its client still sent ends for the client. */
const RESETS: ReadonlySet<string> = new Set(['EPIPE', 'ECONNRESET']);

function unfinishedSubmission(api: string, token: string): Unfinished {
  const { hostname, port } = new URL(api);
  const socket = net.connect(Number(port), hostname);
  let answer = '';
  const connection: Unfinished = {
    status: undefined,
    closed: false,
    error: undefined,
    code: undefined,
    send: () => new Promise((resolve) => socket.write(BODY, () => resolve())),
    destroy: () => socket.destroy(),
  };
  socket.on('error', (error: NodeJS.ErrnoException) => (connection.error = error.code));
  socket.on('close', () => (connection.closed = true));
  socket.on('data', (data: Buffer) => {
    answer += data.toString('latin1');
    const status = /^HTTP\/1\.1 (\d{3})/.exec(answer);
    const code = /"code":"([A-Z_]+)"/.exec(answer);
    if (status !== null && code !== null) {
      connection.status = Number(status[1]);
      connection.code = [code[1], /"limit":"(\w+)"/.exec(answer)?.[1]].filter(Boolean).join(' ');
    }
  });
  socket.write(
    `POST ${SUBMIT} HTTP/1.1\r\nhost: ${hostname}\r\nauthorization: Bearer ${token}\r\n` +
      `content-type: application/json\r\ncontent-length: ${MiB}\r\n\r\n`,
  );
  return connection;
}

async function submit(gateway: GatewayProcess, token: string) {
  const response = await fetch(`${gateway.api}${SUBMIT}`, {
    method: 'POST',
    body: SUBMISSION,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    signal: AbortSignal.timeout(20_000),
  });
  const text = await response.text();
  return { status: response.status, retryAfter: response.headers.get('retry-after'), text };
}

describe('unfinished bodies from many connections, in a gateway process with the shipped heap flag and defaults', () => {
  beforeAll(() => buildDist(), 120_000);

  it('holds them within limits.bufferedBodyBytes: a caller over its share gets 429, the full budget 503, the process stays inside the pod limit, others are served', async () => {
    const { env, memoryLimitBytes } = shipped();
    const limits = ConfigSchema.properties.limits.properties;
    const budget = limits.bufferedBodyBytes.default as number;
    const perCaller = Math.floor(budget * (limits.bufferedBodyShare.default as number));
    const bodiesPerCaller = Math.floor(perCaller / MiB);
    const upstream = await startRecordingUpstream();
    const issuer = await createTestIssuer();
    const config = writeGatewayConfig(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT);
    const gateway = await startProcess(['dist/main.js', '--config', config], env, 60_000);
    const pid = gateway.child.pid!;
    const idle = residentMemory(pid).peak;
    const connections: Unfinished[] = [];
    try {
      const token = (sub: string) => issuer.mint({ sub });
      const [mallory, trudy, carol, dave, erin] = await Promise.all(
        ['mallory', 'trudy', 'carol', 'dave', 'erin'].map(token),
      );
      // Each token verified once first: the attack's calls are then ordinary, verified calls.
      for (const t of [mallory, trudy, carol, dave, erin]) {
        const response = await fetch(`${gateway.api}/v2/state/ledger-end`, {
          headers: { authorization: `Bearer ${t}` },
        });
        expect(response.status).toBe(200);
      }
      // The attack: two callers, 256 connections each. A declared length holds nothing until its
      // bytes arrive (declared lengths, once reserved up front, filled the budget with no body).
      const attack = [mallory!, trudy!].flatMap((t) =>
        Array.from({ length: 256 }, () => unfinishedSubmission(gateway.api, t)),
      );
      connections.push(...attack);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(await metric(gateway.admin, 'ledger_gateway_body_buffer_bytes')).toBe(0);
      expect(attack.filter((c) => c.status !== undefined)).toEqual([]);
      await Promise.all(attack.map((c) => c.send()));
      // Counted as they arrive: each caller's share holds bodiesPerCaller of them, the rest are refused.
      // Only MAX_LINGERING refused connections linger at once (src/exchange/lingering-close.ts): past
      // them a refusal closes at once, and a client still sending meets a reset before it reads its 429.
      const refusedOnce = attack.length - 2 * bodiesPerCaller;
      const reset = (c: Unfinished) => c.status === undefined && c.closed && RESETS.has(c.error ?? '');
      const ended = await waitFor(
        () => attack.filter((c) => c.status !== undefined || reset(c)).length >= refusedOnce,
        60_000,
      );
      expect(ended, `connections by answer: ${JSON.stringify(tally(attack))}`).toBe(true);
      const refused = attack.filter((c) => c.status !== undefined);
      expect(refused.length + attack.filter(reset).length, JSON.stringify(tally(attack))).toBe(refusedOnce);
      expect(refused.length).toBeGreaterThanOrEqual(MAX_LINGERING);
      expect(new Set(refused.map((c) => `${c.status} ${c.code}`))).toEqual(
        new Set(['429 GATEWAY_RESOURCE_EXHAUSTED gatewayPrincipalBodyBytes']),
      );
      expect(await metric(gateway.admin, 'ledger_gateway_body_buffer_bytes')).toBe(2 * bodiesPerCaller * (MiB - 1));

      // Another caller is served meanwhile, and the attackers are refused a body of any size.
      const served = await submit(gateway, carol!);
      expect(served.status, served.text).toBe(200);
      expect(upstream.requests.at(-1)!.body.toString()).toBe(SUBMISSION);
      const overShare = await submit(gateway, mallory!);
      expect(overShare.status).toBe(429);
      expect(overShare.retryAfter).toBe('1');
      expect(overShare.text).toContain('gatewayPrincipalBodyBytes');

      // Two more callers fill the budget: the next body is refused with 503, bodiless calls still pass.
      const filling = [dave!, erin!].flatMap((t) =>
        Array.from({ length: bodiesPerCaller }, () => unfinishedSubmission(gateway.api, t)),
      );
      connections.push(...filling);
      await Promise.all(filling.map((c) => c.send()));
      const full4 = 4 * bodiesPerCaller * (MiB - 1);
      expect(
        await waitFor(async () => (await metric(gateway.admin, 'ledger_gateway_body_buffer_bytes')) >= full4, 30_000),
      ).toBe(true);
      const full = await submit(gateway, carol!);
      expect(full.status).toBe(503);
      expect(full.retryAfter).toBe('1');
      expect(full.text).toContain('GATEWAY_BODY_BUFFER_EXHAUSTED');
      const get = await fetch(`${gateway.api}/v2/state/ledger-end`, { headers: { authorization: `Bearer ${carol}` } });
      expect(get.status).toBe(200);

      // Every held body is cut when policy.bodyReadTimeoutMs passes (all its bytes but one read by then):
      // the peak resident memory is the attack's, with the budget full.
      const held = connections.filter((c) => c.status === undefined && !c.closed);
      expect(held.length).toBe(budget / MiB);
      expect(await waitFor(() => held.every((c) => c.status !== undefined), 60_000)).toBe(true);
      expect(new Set(held.map((c) => `${c.status} ${c.code}`))).toEqual(new Set(['400 GATEWAY_MALFORMED_REQUEST']));
      const peak = residentMemory(pid).peak;
      const margin = memoryLimitBytes / 4;
      expect(peak, `peak resident ${(peak / MiB).toFixed(0)} MiB`).toBeLessThan(memoryLimitBytes - margin);

      expect(gateway.child.exitCode).toBeNull();
      expect(await metric(gateway.admin, 'ledger_gateway_body_buffer_bytes')).toBe(0);
      expect((await submit(gateway, carol!)).status).toBe(200);
      console.info(
        `unfinished bodies: resident ${(idle / MiB) | 0} MiB idle, ${(peak / MiB) | 0} MiB peak with ${budget / MiB} MiB held`,
      );
    } finally {
      for (const c of connections) c.destroy();
      gateway.child.kill('SIGKILL');
      await gateway.exited;
      await upstream.close();
    }
  }, 180_000);
});
