// Signals other than SIGTERM/SIGINT: SIGHUP (a configuration reload, by convention) neither ends
// the gateway process nor loses a log line.
import { beforeAll, describe, expect, it } from 'vitest';
import { buildDist, startProcess, writeGatewayConfig } from './helpers/process.js';
import { answerJson, startRecordingUpstream } from './helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT } from './helpers/tokens.js';

beforeAll(() => buildDist(), 120_000);

describe('SIGHUP', () => {
  it('is logged and ignored: the process keeps serving, and every request line reaches stdout at shutdown', async () => {
    const upstream = await startRecordingUpstream(answerJson(200, { offset: 3 }));
    const issuer = await createTestIssuer();
    const gateway = await startProcess([
      'dist/main.js',
      '--config',
      writeGatewayConfig(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT),
    ]);
    try {
      const headers = { authorization: `Bearer ${await issuer.mint()}` };
      const call = async () => {
        const answer = await fetch(`${gateway.api}/v2/state/ledger-end`, { headers });
        expect(answer.status).toBe(200);
        return answer.headers.get('x-request-id')!;
      };
      // Request lines are written in batches (up to a second late): these are still buffered when SIGHUP comes.
      const before = await Promise.all(Array.from({ length: 20 }, call));
      gateway.child.kill('SIGHUP');
      await expect
        .poll(() => gateway.output.some((line) => line.includes('SIGHUP received')), { timeout: 3_000, interval: 50 })
        .toBe(true);
      expect(gateway.child.exitCode).toBeNull();
      const after = await call();

      gateway.child.kill('SIGTERM');
      expect(await gateway.exited).toBe(0);
      const lines = gateway.output
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      const logged = new Set(lines.filter((line) => line.msg === 'request').map((line) => line.reqId));
      expect([...before, after].filter((id) => !logged.has(id))).toEqual([]);
      expect(lines.find((line) => String(line.msg).startsWith('SIGHUP received'))).toMatchObject({
        level: 'warn',
        signal: 'SIGHUP',
      });
      expect(lines.at(-1)).toMatchObject({ msg: 'shutdown complete' });
    } finally {
      gateway.child.kill('SIGKILL');
      await upstream.close();
    }
  });
});
