// Builds dist/ once per test run, before any worker starts: the tests that run the built gateway as
// a process (as `npm start` and the image do) then never race a rebuild of the same files.
import { buildDist } from './helpers/process.js';

export default function setup(): void {
  buildDist();
  process.env.LEDGER_GATEWAY_DIST_BUILT = '1';
}
