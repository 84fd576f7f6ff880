// `npm run test:fast`: the unit and in-process tests, without the ones that run the built gateway as
// a process, Redis, Prometheus, Chromium, the image or the benchmark harness, nor the in-process ones that wait
// out real timeouts and failovers for seconds (all of those stay in `npm test`).
import { configDefaults, defineConfig } from 'vitest/config';
import { shared } from './vitest.config.js';

// Nothing in this set runs dist/: the global setup need not build it.
process.env.LEDGER_GATEWAY_DIST_BUILT = '1';

export const SLOW_TESTS = [
  'test/build.test.ts',
  'test/cli.test.ts',
  'test/process.test.ts',
  'test/process-signals.test.ts',
  'test/auth/idp-demo.test.ts',
  'test/bench/**',
  'test/config/secrets.test.ts',
  'test/deploy/**',
  'test/protection/redis.test.ts',
  'test/protection/unauthenticated.test.ts',
  'test/reliability/**',
  'test/adversarial/**',
  'test/sandbox/main.test.ts',
  'test/telemetry/deploy-files.test.ts',
  'test/telemetry/log-backpressure.test.ts',
  'test/telemetry/logging.test.ts',
  'test/telemetry/prometheus.test.ts',
  'test/telemetry/tracing-process.test.ts',
  'test/protection/redis-failover.test.ts',
  'test/audit/process-audit.test.ts',
  'test/live/reload-file-safety.test.ts',
  'test/config/start-environment.test.ts',
  'test/process-shutdown.test.ts',
  // In process, but seconds of real waiting each: floods, failovers, held refreshes, listings.
  'test/auth/hostile-tokens.test.ts',
  'test/proxy/replicas.test.ts',
  'test/live/participant-idps-holds.test.ts',
  'test/live/participant-idps-listing.test.ts',
  'test/cache/version-cache.test.ts',
  'test/proxy/uploads.test.ts',
  'test/server/upgrade-requests.test.ts',
  'test/proxy/websocket.test.ts',
  // Redis shared by two replicas and a restart; token endpoints that stall for their timeout.
  'test/consumers/quotas-and-usage.test.ts',
  'test/consumers/brokered-tokens.test.ts',
  // A real Chromium, started twice.
  'test/server/status-page.test.ts',
];

export default defineConfig({
  test: {
    ...shared,
    include: ['test/**/*.test.ts'],
    maxWorkers: 2,
    minWorkers: 1,
    exclude: [...configDefaults.exclude, ...SLOW_TESTS],
  },
});
