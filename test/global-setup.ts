// Runs once per test run, before any worker starts.
// - Builds dist/ once: the tests that run the built gateway as a process (as `npm start` and the
//   image do) then never race a rebuild of the same files.
// - Gives the run its own temporary directory (TMPDIR, which os.tmpdir() reads and every worker and
//   spawned gateway inherits) and removes it at the end, so config files, keys and profiles written
//   by tests do not pile up in the machine's /tmp run after run.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildDist } from './helpers/process.js';

export default function setup(): () => void {
  // Vitest runs a global setup for the root config and for each project of it (vitest.config.ts): the
  // first makes the run's directory, the others find it (nested, its paths passed Chromium's socket bound).
  if (process.env.LEDGER_GATEWAY_TEST_RUN_DIR !== undefined) return () => undefined;
  buildDist();
  process.env.LEDGER_GATEWAY_DIST_BUILT = '1';
  const scratch = mkdtempSync(join(tmpdir(), 'ledger-gateway-test-run-'));
  const previous = process.env.TMPDIR;
  process.env.TMPDIR = scratch;
  process.env.LEDGER_GATEWAY_TEST_RUN_DIR = scratch;
  return () => {
    delete process.env.LEDGER_GATEWAY_TEST_RUN_DIR;
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
    rmSync(scratch, { recursive: true, force: true });
  };
}
