// Signals other than SIGTERM/SIGINT: SIGHUP (a configuration reload, by convention) reloads the
// config file, and neither ends the gateway process nor loses a log line.
import { appendFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildDist, startProcess, writeGatewayConfig } from './helpers/process.js';
import { answerJson, startRecordingUpstream } from './helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT } from './helpers/tokens.js';

beforeAll(() => buildDist(), 120_000);

describe('SIGHUP', () => {
  it('reloads the config file: the process keeps serving, and every request line reaches stdout at shutdown', async () => {
    const upstream = await startRecordingUpstream(answerJson(200, { offset: 3 }));
    const issuer = await createTestIssuer();
    const configFile = writeGatewayConfig(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT);
    const gateway = await startProcess(['dist/main.js', '--config', configFile]);
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
        .poll(() => gateway.output.some((line) => line.includes('configuration reloaded')), {
          timeout: 5_000,
          interval: 50,
        })
        .toBe(true);
      expect(gateway.child.exitCode).toBeNull();
      const after = await call();
      // The file is watched too: an invalid edit is logged, with every bad key path, and changes nothing.
      appendFileSync(configFile, '\npolicy: { rules: { getVersion: [{ role: admin }] } }\n');
      await expect
        .poll(() => gateway.output.some((line) => line.includes('invalid configuration')), {
          timeout: 5_000,
          interval: 50,
        })
        .toBe(true);
      const last = await call();

      gateway.child.kill('SIGTERM');
      expect(await gateway.exited).toBe(0);
      const lines = gateway.output
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      const logged = new Set(lines.filter((line) => line.msg === 'request').map((line) => line.reqId));
      expect([...before, after, last].filter((id) => !logged.has(id))).toEqual([]);
      expect(lines.find((line) => String(line.msg).includes('invalid configuration'))).toMatchObject({
        level: 'error',
        trigger: 'file',
        problems: ['policy.rules.getVersion[0].role: unknown key'],
      });
      expect(lines.find((line) => line.msg === 'configuration reloaded')).toMatchObject({
        level: 'info',
        trigger: 'SIGHUP',
        fingerprint: expect.stringMatching(/^[0-9a-f]{16}$/),
      });
      expect(lines.at(-1)).toMatchObject({ msg: 'shutdown complete' });
    } finally {
      gateway.child.kill('SIGKILL');
      await upstream.close();
    }
  });
});
