// P1 of issue 40: one connection without a token, bare GETs pipelined on it as fast as the gateway
// takes them, once the address's budget of unverified calls is spent. The gateway parsed every one
// at once and kept each until its turn: 100,000 of them (4.4 MiB) ran the heap of the shipped process
// out within a second, and another caller's rate fell from thousands of calls a second to two first.
// Now what waits for its turn is bounded (limits.pipelining): the connection is not read further, the
// process stays up and small, and the other caller keeps at least half its rate.
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { ConfigSchema } from '../../src/config/schema.js';
import { buildDist } from '../helpers/process.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';
import {
  metricValue,
  plainUpstream,
  rateAgainstDriver,
  residentMemory,
  runDriver,
  shipped,
  sleep,
  splitCores,
  startShippedGateway,
  steadyCaller,
} from './shipped-gateway.js';

const MiB = 1024 * 1024;
const pipelining = ConfigSchema.properties.limits.properties.pipelining.properties;

describe('P1, a pipelined flood on one connection without a token, against the shipped process', () => {
  beforeAll(() => buildDist(), 120_000);

  it('stays up inside the pod limit, holds what waits to its bound, and another caller keeps at least half its rate', async () => {
    const upstream = await plainUpstream();
    const issuer = await createTestIssuer();
    const cores = splitCores();
    onTestFinished(cores.release);
    const gateway = await startShippedGateway(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT, {
      prefix: cores.gatewayPrefix,
    });
    const { memoryLimitBytes } = shipped();
    try {
      const caller = steadyCaller(gateway.api, await issuer.mint({ sub: 'carol' }));
      await sleep(1_000);
      const beforeFrom = Date.now();
      await sleep(3_000);
      const before = caller.window(beforeFrom, Date.now()).rate;
      const flood = runDriver('P1', { api: gateway.api, connections: 4 });
      let waiting = 0;
      const watch = setInterval(() => {
        void metricValue(gateway.admin, 'ledger_gateway_pipelined_requests_waiting').then(
          (now) => (waiting = Math.max(waiting, now)),
          () => undefined,
        );
      }, 500);
      // At full rate: without a bound, 100,000 waiting requests ran the heap out within a second.
      await sleep(6_000);
      const rates = await rateAgainstDriver(caller, flood);
      clearInterval(watch);
      const result = (await flood.stop()) as { sent: number; answers: Record<string, number> };
      await caller.stop();

      const memory = residentMemory(gateway.pid);
      const report =
        `caller before the flood ${before.toFixed(0)}/s, with the flood held ${rates.alone.toFixed(0)}/s, flooded ` +
        `${rates.driven.toFixed(0)}/s; the flood sent ` +
        `${result.sent} requests, answered ${JSON.stringify(result.answers)}; at most ${waiting} waiting; ` +
        `resident peak ${(memory.peak / MiB).toFixed(0)} MiB`;
      console.info(`P1: ${report}`);
      expect(gateway.alive(), `${report}\n${gateway.lastLines.slice(-5).join('\n')}`).toBe(true);
      expect(result.sent, report).toBeGreaterThan(100_000);
      expect(result.answers['429'] ?? 0, report).toBeGreaterThan(0);
      expect(waiting, report).toBeLessThanOrEqual(pipelining.totalRequests.default as number);
      expect(rates.driven, report).toBeGreaterThanOrEqual(rates.alone / 2);
      // What the flood left waiting does not hold the caller while the flood is held.
      expect(rates.alone, report).toBeGreaterThanOrEqual(before / 2);
      expect(Object.keys(rates.drivenStatuses), report).toEqual(['200']);
      expect(memory.peak, report).toBeLessThan(memoryLimitBytes * 0.75);
      expect((await fetch(`${gateway.admin}/livez`)).status).toBe(200);
    } finally {
      await gateway.close();
      await upstream.close();
    }
  }, 120_000);
});
