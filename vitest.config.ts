import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
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
  },
});
