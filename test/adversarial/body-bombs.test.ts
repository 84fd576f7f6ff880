// P2 of issue 40: bodies of arrays nested as deep as policy.maxBodyDepth allows, at the largest size
// parsed on the event loop (1 MiB: larger ones are judged in a worker thread), on update-by-offset (a read any token may make), 8 at a time. Each parsed
// body was kept alive on its request until its call ended (for the audit trail), so five of them ran
// the shipped heap out; without that, eight finishing together were parsed back to back and held the
// event loop 3.2 to 5.1 s, past the liveness probe's 2 s. Now a parsed body does not outlive its rule
// check, and a large one is parsed in a turn of its own: the loop serves others between two.
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { ConfigSchema } from '../../src/config/schema.js';
import { JUDGED_IN_THREAD_BYTES } from '../../src/policy/stage.js';
import { buildDist } from '../helpers/process.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';
import {
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
/** The liveness probe's timeoutSeconds in deploy/kubernetes/base/deployment.yaml. */
const LIVENESS_TIMEOUT_MS = 2_000;

describe('P2, parsed-body bombs 8 at a time, against the shipped process', () => {
  beforeAll(() => buildDist(), 120_000);

  it('stays up inside the pod limit, answers its liveness probe in time, and another caller keeps at least half its rate', async () => {
    const upstream = await plainUpstream();
    const issuer = await createTestIssuer();
    const cores = splitCores();
    onTestFinished(cores.release);
    const gateway = await startShippedGateway(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT, {
      prefix: cores.gatewayPrefix,
    });
    const { memoryLimitBytes } = shipped();
    const policy = ConfigSchema.properties.policy.properties;
    try {
      const caller = steadyCaller(gateway.api, await issuer.mint({ sub: 'carol' }));
      const tokens = await Promise.all(['m1', 'm2'].map((sub) => issuer.mint({ sub })));
      await sleep(1_000);
      const beforeFrom = Date.now();
      await sleep(3_000);
      const before = caller.window(beforeFrom, Date.now()).rate;
      const bombs = runDriver('P2', {
        api: gateway.api,
        tokens,
        concurrency: 8,
        size: JUDGED_IN_THREAD_BYTES,
        maxDepth: policy.maxBodyDepth.default,
      });
      // The kubelet's liveness probe, every 500 ms while the bombs go off.
      let probing = true;
      let slowestProbeMs = 0;
      const probes = (async () => {
        while (probing) {
          const started = Date.now();
          const status = await fetch(`${gateway.admin}/livez`, { signal: AbortSignal.timeout(10_000) }).then(
            (response) => response.status,
            () => 0,
          );
          slowestProbeMs = Math.max(slowestProbeMs, status === 200 ? Date.now() - started : Infinity);
          await sleep(500);
        }
      })();
      await sleep(4_000);
      const rates = await rateAgainstDriver(caller, bombs);
      probing = false;
      await probes;
      const result = (await bombs.stop()) as { answers: Record<string, number> };
      await caller.stop();

      const memory = residentMemory(gateway.pid);
      const report =
        `caller before ${before.toFixed(0)}/s, bombs held ${rates.alone.toFixed(0)}/s, going off ` +
        `${rates.driven.toFixed(0)}/s; bombs answered ${JSON.stringify(result.answers)}; slowest liveness ` +
        `probe ${slowestProbeMs} ms; resident peak ${(memory.peak / MiB).toFixed(0)} MiB`;
      console.info(`P2: ${report}`);
      expect(gateway.alive(), `${report}\n${gateway.lastLines.slice(-5).join('\n')}`).toBe(true);
      expect(result.answers['200'] ?? 0, report).toBeGreaterThanOrEqual(4);
      expect(Object.keys(result.answers), report).toEqual(['200']);
      expect(slowestProbeMs, report).toBeLessThan(LIVENESS_TIMEOUT_MS);
      expect(rates.driven, report).toBeGreaterThanOrEqual(rates.alone / 2);
      expect(rates.alone, report).toBeGreaterThanOrEqual(before / 2);
      expect(Object.keys(rates.drivenStatuses), report).toEqual(['200']);
      expect(memory.peak, report).toBeLessThan(memoryLimitBytes * 0.75);
    } finally {
      await gateway.close();
      await upstream.close();
    }
  }, 180_000);
});
