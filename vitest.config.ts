import { configDefaults, defineConfig } from 'vitest/config';
import type { InlineConfig } from 'vitest/node';

/**
 * The tests whose figures are about the gateway alone (another caller's latency or rate, and the
 * resident peak, while 16 callers send 8 MiB bodies, bombs go off or a flood comes): they run after
 * the rest, one file at a time, so that no other test file shares the two cores with them.
 */
export const MEASURED_ALONE = [
  'test/adversarial/large-submissions.test.ts',
  'test/adversarial/body-bombs.test.ts',
  'test/adversarial/pipelined-flood.test.ts',
];

/** What every run shares (vitest.fast.config.ts too). */
export const shared: InlineConfig = {
  globalSetup: ['test/global-setup.ts'],
  // The last line names the groups a missing program kept from running (test/helpers/system-tools.ts).
  reporters: ['default', './test/missing-tools-reporter.ts'],
  environment: 'node',
  pool: 'forks',
  testTimeout: 20_000,
  hookTimeout: 20_000,
  // Tests start real servers on 127.0.0.1; two cores, so keep parallelism modest.
  maxWorkers: 2,
  minWorkers: 1,
};

export default defineConfig({
  test: {
    ...shared,
    projects: [
      {
        extends: true,
        test: {
          name: 'suite',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...MEASURED_ALONE],
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'measured alone',
          include: MEASURED_ALONE,
          poolOptions: { forks: { singleFork: true } }, // one file at a time
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
