// protection config: per-operation entries inherit the default key by key; names are checked at start.
import { describe, expect, it } from 'vitest';
import { ConfigError, validateGatewayConfig } from '../../src/config/load.js';
import { resolveProtectionConfig } from '../../src/protection/config.js';

const resolve = (protection: Record<string, unknown>) =>
  resolveProtectionConfig(validateGatewayConfig({ protection }, 'test').protection);

function problemsOf(action: () => unknown): readonly string[] {
  try {
    action();
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

describe('protection config', () => {
  it('defaults: a process-wide cap of 1024, no per-operation limits, fail open, in memory', () => {
    const resolved = resolve({});
    expect(resolved.maxInFlight).toBe(1024);
    expect(resolved.hasOperationLimits).toBe(false);
    expect(resolved.failMode).toBe('open');
    expect(resolved.redis.url).toBeUndefined();
    expect(resolved.limitsOf('submitAndWaitForTransaction')).toEqual({
      rate: undefined,
      maxInFlightPerPrincipal: undefined,
      maxInFlight: undefined,
    });
  });

  it('an operation entry replaces the keys it sets and inherits the others; null and 0 switch a limit off', () => {
    const resolved = resolve({
      maxInFlight: 0,
      default: { rate: { requests: 50, perSeconds: 1, burst: 100 }, maxInFlightPerPrincipal: 20 },
      operations: {
        submitAndWaitForTransaction: { rate: { requests: 10, perSeconds: 2 }, maxInFlight: 64 },
        getVersion: { rate: null, maxInFlightPerPrincipal: 0 },
      },
    });
    expect(resolved.maxInFlight).toBeUndefined();
    expect(resolved.limitsOf('submitAndWaitForTransaction')).toEqual({
      rate: { requests: 10, perSeconds: 2, burst: 10, intervalMs: 200 },
      maxInFlightPerPrincipal: 20,
      maxInFlight: 64,
    });
    expect(resolved.limitsOf('getVersion')).toEqual({
      rate: undefined,
      maxInFlightPerPrincipal: undefined,
      maxInFlight: undefined,
    });
    expect(resolved.limitsOf('getV2Parties').rate).toEqual({ requests: 50, perSeconds: 1, burst: 100, intervalMs: 20 });
  });

  it('refuses an unknown operation name, naming the key path', () => {
    const problems = problemsOf(() =>
      resolve({ operations: { submitAndWait: { maxInFlight: 1 }, onV2Updates: { maxInFlightPerPrincipal: 2 } } }),
    );
    expect(problems).toEqual([expect.stringMatching(/^protection\.operations\.submitAndWait: unknown operation name/)]);
  });

  it('the schema refuses unknown keys and bad values, naming each', () => {
    const problems = problemsOf(() =>
      validateGatewayConfig(
        {
          protection: {
            failMode: 'maybe',
            default: { rate: { requests: 0 }, burst: 3 },
            redis: { url: 'http://redis:6379', leaseMs: 10 },
          },
        },
        'test',
      ),
    );
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^protection\.failMode:/),
        expect.stringMatching(/^protection\.default\.burst: unknown key/),
        expect.stringMatching(/^protection\.default\.rate/),
        expect.stringMatching(/^protection\.redis\.url:/),
        expect.stringMatching(/^protection\.redis\.leaseMs:/),
      ]),
    );
  });

  it('Redis: one of url, sentinel and cluster; data-node credentials only where no URL carries them; host:port addresses', () => {
    const sentinel = { nodes: ['10.0.0.1:26379', '[fd00::2]:26379'], masterName: 'limits' };
    expect(resolve({ redis: { sentinel, password: 'p' } }).redis.sentinel).toEqual(sentinel);
    expect(resolve({ redis: { cluster: { nodes: ['redis-0.redis:6379'] }, username: 'gw' } }).redis.cluster).toEqual({
      nodes: ['redis-0.redis:6379'],
    });
    expect(
      problemsOf(() => resolve({ redis: { url: 'redis://redis:6379', sentinel, cluster: { nodes: ['r:6379'] } } })),
    ).toEqual(['protection.redis: set one of url, sentinel and cluster, not url and sentinel and cluster']);
    expect(problemsOf(() => resolve({ redis: { url: 'redis://redis:6379', password: 'p' } }))).toEqual([
      'protection.redis.password: only with sentinel or cluster (with url, the URL carries it)',
    ]);
    const schemaProblems = problemsOf(() =>
      validateGatewayConfig(
        { protection: { redis: { sentinel: { nodes: ['redis:port'] }, cluster: { nodes: [] } } } },
        'test',
      ),
    );
    expect(schemaProblems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^protection\.redis\.sentinel\.nodes\[0\]:/),
        expect.stringMatching(/^protection\.redis\.sentinel\.masterName:/),
        expect.stringMatching(/^protection\.redis\.cluster\.nodes:/),
      ]),
    );
  });
});
