// The audit trail of the built gateway process: killed with SIGKILL under load, it leaves every
// write the participant received recorded, and the trail verifies after a restart; a trail that
// cannot be written (a file size limit: EFBIG) refuses writes in closed mode while reads go on, and
// forwards them, counted, in open mode.

import { beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { digestChecker } from '../../src/audit/chain.js';
import { verifyTrail } from '../../src/audit/verify.js';
import { buildDist, runToExit, startProcess, writeGatewayConfig, type GatewayProcess } from '../helpers/process.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';
import { keyOf, mixedLoad, participantAnswers, recordKey } from './load.js';
import { keyFiles, readTrail, records, trailDirectory } from './support.js';

const keys = keyFiles();
/**
 * One caller at full speed writes past its share of the trail (about 100 writes a second) on a fast
 * machine: these tests are about the trail, so the share is off (it has its own, records-truth.test.ts).
 */
const NO_SHARE = 'callerBytesPerMinute: 0';

beforeAll(() => buildDist());

async function gatewayProcess(upstream: RecordingUpstream, audit: string, shellPrefix?: string) {
  const issuer = await createTestIssuer();
  const configFile = writeGatewayConfig(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT, [`audit: ${audit}`]);
  const start = () => startProcess(['dist/main.js', '--config', configFile], {}, 15_000, shellPrefix);
  const headers = { authorization: `Bearer ${await issuer.mint({}, {})}` };
  return { start, headers, configFile };
}

const stop = async (gateway: GatewayProcess) => {
  gateway.child.kill('SIGTERM');
  await gateway.exited;
};

const metric = async (admin: string, name: string) => {
  const text = await (await request(`${admin}/metrics`)).body.text();
  return text
    .split('\n')
    .filter((line) => line.startsWith(name))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
};

describe('the audit trail of the gateway process', () => {
  it('keeps the intent of every write the participant received when the gateway is killed mid-load; the trail verifies after a restart', async () => {
    const upstream = await startRecordingUpstream(participantAnswers);
    const directory = trailDirectory();
    const { start, headers } = await gatewayProcess(
      upstream,
      `{ enabled: true, directory: "${directory}", signingKeyFile: "${keys.privateKeyFile}", digestIntervalMs: 200, ${NO_SHARE} }`,
    );
    try {
      const first = await start();
      const load = mixedLoad(first.api, headers, 8, 3_000);
      await expect.poll(() => upstream.requests.length, { timeout: 5_000 }).toBeGreaterThan(200);
      first.child.kill('SIGKILL');
      await first.exited;
      await load; // the rest of the load meets a closed port
      const received = upstream.requests.filter((recorded) => recorded.method === 'POST');

      const second = await start();
      const after = await mixedLoad(second.api, headers, 2, 300);
      expect(after.every((call) => call.status === 200)).toBe(true);
      await stop(second);

      const intents = new Set(
        records(directory)
          .filter((r) => r.kind === 'intent')
          .map(recordKey),
      );
      const missing = received.map(keyOf).filter((key) => !intents.has(key));
      expect(missing).toEqual([]);
      expect(verifyTrail(readTrail(directory), digestChecker(keys.publicKeyPem))).toMatchObject({ ok: true });
      // The command line says the same.
      const verified = await runToExit([
        'dist/main.js',
        'audit',
        'verify',
        '--public-key',
        keys.publicKeyFile,
        directory,
      ]);
      expect(verified).toMatchObject({ code: 0, stdout: expect.stringMatching(/^OK: /) });
    } finally {
      await upstream.close();
    }
  }, 40_000);

  it('refuses writes with GATEWAY_AUDIT_UNAVAILABLE while the trail cannot be written (closed), and keeps serving reads', async () => {
    const upstream = await startRecordingUpstream(participantAnswers);
    const directory = trailDirectory();
    // 48 KiB per file at most: the trail fails mid-load (EFBIG), and again after each new file.
    const { start, headers } = await gatewayProcess(
      upstream,
      `{ enabled: true, directory: "${directory}", signingKeyFile: "${keys.privateKeyFile}", retryIntervalMs: 300, ${NO_SHARE} }`,
      "ulimit -f 96; trap '' XFSZ;",
    );
    try {
      const gateway = await start();
      const sent = await mixedLoad(gateway.api, headers, 8, 3_000);
      const refused = sent.filter((call) => call.status !== 200);
      expect(refused.length).toBeGreaterThan(0);
      expect(refused.every((call) => call.status === 503 && call.errorCode === 'GATEWAY_AUDIT_UNAVAILABLE')).toBe(true);
      expect(refused.every((call) => call.kind !== 'read')).toBe(true);
      expect(sent.filter((call) => call.kind === 'read').every((call) => call.status === 200)).toBe(true);
      expect(await metric(gateway.admin, 'ledger_gateway_audit_writes_refused_total')).toBe(refused.length);
      expect(await metric(gateway.admin, 'ledger_gateway_audit_write_failures_total')).toBeGreaterThan(0);
      await stop(gateway);
      // No write reached the participant unrecorded, and none refused reached it at all.
      const intents = new Set(
        records(directory)
          .filter((r) => r.kind === 'intent' && r.late === undefined)
          .map(recordKey),
      );
      const received = upstream.requests.filter((recorded) => recorded.method === 'POST').map(keyOf);
      expect(received.filter((key) => !intents.has(key))).toEqual([]);
      const refusedKeys = new Set(refused.map((call) => call.key));
      expect(received.filter((key) => refusedKeys.has(key!))).toEqual([]);
      expect(verifyTrail(readTrail(directory), digestChecker(keys.publicKeyPem)).ok).toBe(true);
    } finally {
      await upstream.close();
    }
  }, 40_000);

  it('forwards writes and counts the records lost while the trail cannot be written (open)', async () => {
    const upstream = await startRecordingUpstream(participantAnswers);
    const directory = trailDirectory();
    const { start, headers } = await gatewayProcess(
      upstream,
      `{ enabled: true, directory: "${directory}", failMode: open, retryIntervalMs: 300, ${NO_SHARE} }`,
      "ulimit -f 96; trap '' XFSZ;",
    );
    try {
      const gateway = await start();
      const sent = await mixedLoad(gateway.api, headers, 8, 3_000);
      expect(sent.filter((call) => call.status !== 200)).toEqual([]);
      expect(upstream.requests.filter((r) => r.method === 'POST')).toHaveLength(
        sent.filter((c) => c.kind !== 'read').length,
      );
      expect(await metric(gateway.admin, 'ledger_gateway_audit_records_lost_total')).toBeGreaterThan(0);
      await stop(gateway);
    } finally {
      await upstream.close();
    }
  }, 40_000);
});
