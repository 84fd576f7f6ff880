// A Redis, or a sentinel, that is not what it claims (issue 40 §1): a server streaming an endless
// reply cannot take the process's memory (the built process, under the image's heap flags); a
// sentinel that names its own address as the master never receives the data nodes' password;
// refused credentials are logged and counted as what they are, not as an outage; an address with a
// port past 65535 stops the start, naming its key. The rogues are loopback servers speaking RESP
// (rogue-redis.ts); the credentials test runs a real redis-server (redis-server.ts).
import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, validateGatewayConfig } from '../../src/config/load.js';
import { closeAfterEach } from '../helpers/per-test.js';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { buildDist, startProcess, writeGatewayConfig, type GatewayProcess } from '../helpers/process.js';
import { answerJson, startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { describeNeeding } from '../helpers/tool-groups.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';
import { startRedisServer, type RedisServer } from './redis-server.js';
import { startRogueRedis, type RogueRedis } from './rogue-redis.js';

beforeAll(() => buildDist(), 120_000);

/** The image's NODE_OPTIONS (deploy/kubernetes/base/deployment.yaml). */
const SHIPPED_HEAP = { NODE_OPTIONS: '--max-old-space-size=211 --max-semi-space-size=2' };
const LIMITED = { getV2Parties: { rate: { requests: 1000, perSeconds: 1 } } };

let rogue: RogueRedis | undefined;
let redis: RedisServer | undefined;
let upstream: RecordingUpstream | undefined;
let child: GatewayProcess | undefined;
let gateway: RunningGateway | undefined;
closeAfterEach(
  () => child,
  () => gateway,
  () => upstream,
  () => rogue,
  () => (redis === undefined ? undefined : { close: () => redis!.stop() }),
);

/** The resident memory of a process, from /proc (what the kernel's OOM killer and a cgroup count). */
function residentMiB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('VmRSS:'));
  return Number(/(\d+)/.exec(line ?? '')?.[1] ?? 0) / 1024;
}

async function metric(admin: string, pattern: RegExp): Promise<number | undefined> {
  const text = await (await fetch(`${admin}/metrics`)).text();
  const match = pattern.exec(text);
  return match === null ? undefined : Number(match[1]);
}

/** A logger whose lines a test reads back. */
function capturedLogger() {
  const lines: string[] = [];
  const logger = pino(
    { level: 'info' },
    new Writable({
      write(chunk, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    }),
  );
  return { logger, lines };
}

describe('a Redis that streams an endless reply', () => {
  it('costs a bounded amount of memory: the connection is cut past maxReplyBytes, the store is down, failMode closed refuses', async () => {
    rogue = await startRogueRedis({ endlessReply: true });
    upstream = await startRecordingUpstream(answerJson(200, { partyDetails: [] }));
    const issuer = await createTestIssuer();
    const file = writeGatewayConfig(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT, [
      `protection: { failMode: closed, operations: ${JSON.stringify(LIMITED)}, redis: { url: "redis://127.0.0.1:${rogue.port}" } }`,
    ]);
    child = await startProcess(['dist/main.js', '--config', file], SHIPPED_HEAP, 30_000);
    const running = child;
    const token = await issuer.mint();
    const statuses: number[] = [];
    const startMiB = residentMiB(running.child.pid!);
    let peakMiB = startMiB;
    const deadline = Date.now() + 8_000;
    while (Date.now() < deadline) {
      const answer = await fetch(`${running.api}/v2/parties`, { headers: { authorization: `Bearer ${token}` } });
      await answer.arrayBuffer();
      statuses.push(answer.status);
      peakMiB = Math.max(peakMiB, residentMiB(running.child.pid!));
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(running.child.exitCode).toBeNull();
    // Far more was streamed at it than it ever held: each connection was cut past 1 MiB, and reopened.
    expect(rogue.streamedBytes).toBeGreaterThan(64 * 1024 * 1024);
    expect(rogue.connections).toBeGreaterThan(1);
    // A few MiB over what it held at start (without the bound it grew by 100 MiB in these 8 s, and on).
    expect(peakMiB - startMiB).toBeLessThan(48);
    expect(statuses.length).toBeGreaterThan(10);
    expect(new Set(statuses)).toEqual(new Set([503]));
    expect(upstream.requests).toEqual([]);
    expect(await metric(running.admin, /^ledger_gateway_protection_store_up (\d+)$/m)).toBe(0);
    expect(
      await metric(running.admin, /^ledger_gateway_protection_store_errors_total\{reason="reply_too_large"\} (\d+)$/m),
    ).toBeGreaterThan(0);
    expect(running.output.some((line) => line.includes('"code":"reply_too_large"'))).toBe(true);
  }, 60_000);
});

describe('a sentinel that names its own address as the master', () => {
  it("never receives the data nodes' password: its answer is refused, logged and counted", async () => {
    rogue = await startRogueRedis({ namesItselfMaster: true });
    upstream = await startRecordingUpstream(answerJson(200, { partyDetails: [] }));
    const { logger, lines } = capturedLogger();
    gateway = await startGateway(
      upstream.url,
      {
        protection: {
          operations: LIMITED,
          redis: {
            sentinel: { nodes: [`127.0.0.1:${rogue.port}`], masterName: 'mymaster', password: 'sentinel-secret-1f' },
            password: 'data-secret-7a',
          },
        },
      },
      { logger },
    );
    await expect
      .poll(() => rogue!.commands.filter(([name]) => name!.toUpperCase() === 'SENTINEL').length, { timeout: 10_000 })
      .toBeGreaterThan(2);
    const words = rogue.commands.flat();
    expect(words).toContain('sentinel-secret-1f'); // the sentinels' own password
    expect(words).not.toContain('data-secret-7a');
    expect(lines.some((line) => line.includes('"code":"master_at_sentinel"'))).toBe(true);
    expect(lines.join('\n')).not.toMatch(/secret-/);
    const text = await gateway.registry.metrics();
    expect(text).toMatch(/^ledger_gateway_protection_store_errors_total\{reason="master_at_sentinel"\} [1-9]/m);
    expect(text).toMatch(/^ledger_gateway_protection_store_up 0$/m);
  }, 30_000);
});

describeNeeding('redis-server')('refused Redis credentials', () => {
  it('are logged and counted as an authentication failure, coded, never as an outage and never with the password', async () => {
    redis = await startRedisServer();
    upstream = await startRecordingUpstream(answerJson(200, { partyDetails: [] }));
    const { logger, lines } = capturedLogger();
    gateway = await startGateway(
      upstream.url,
      {
        protection: {
          failMode: 'open',
          operations: LIMITED,
          redis: { url: `redis://:wrong-password-3c9@127.0.0.1:${redis.port}` },
        },
      },
      { logger },
    );
    await expect
      .poll(() => lines.filter((line) => line.includes('"code":"authentication"')).length, { timeout: 10_000 })
      .toBeGreaterThan(0);
    const answer = await fetch(`${gateway.url}/v2/parties`, { headers: gateway.auth() });
    expect(answer.status).toBe(200); // failMode open
    const warning = lines.find((line) => line.includes('limit store unavailable'));
    expect(warning).toMatch(/authentication failed/);
    expect(warning).not.toMatch(/Redis is connect/);
    expect(lines.join('\n')).not.toContain('wrong-password-3c9');
    expect(lines.join('\n')).not.toContain(redis.password);
    const text = await gateway.registry.metrics();
    expect(text).toMatch(/^ledger_gateway_protection_store_errors_total\{reason="authentication"\} [1-9]/m);
    expect(text).not.toContain('wrong-password-3c9');
  }, 30_000);
});

describe('Redis addresses', () => {
  const problemsOf = (redisSection: Record<string, unknown>) => {
    try {
      validateGatewayConfig({ upstream: { url: 'http://127.0.0.1:1' }, protection: { redis: redisSection } }, 'test');
      return [];
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      return error.problems;
    }
  };

  it('a port outside 1 to 65535, or no host, is refused at start with its key path; the URL is never echoed', () => {
    expect(problemsOf({ sentinel: { nodes: ['redis-0:26379', 'redis-1:99999'], masterName: 'm' } })).toEqual([
      'protection.redis.sentinel.nodes[1]: "redis-1:99999": the port must be 1 to 65535',
    ]);
    expect(problemsOf({ cluster: { nodes: ['[::1]:0', 'redis-0:6379'] } })).toEqual([
      'protection.redis.cluster.nodes[0]: "[::1]:0": the port must be 1 to 65535',
    ]);
    const url = problemsOf({ url: 'redis://:hunter2@redis:99999' });
    expect(url).toEqual([expect.stringMatching(/^protection\.redis\.url: not a URL/)]);
    expect(url.join()).not.toContain('hunter2');
    expect(problemsOf({ url: 'redis://redis:6379/0' })).toEqual([]);
  });
});
