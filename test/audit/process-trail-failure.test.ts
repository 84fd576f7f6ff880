// The built gateway process with a trail that fails (a file size limit: EFBIG after a few records
// per file): it retries a new file on its own timer, so an idle gateway's trail_writable comes back
// without a write; a late intent and an outcome held while the trail is down are written by that
// retry, not left in memory for a SIGTERM to lose; and the counters count writes, not records:
// a write forwarded unrecorded is one lost intent, a write refused (failMode closed) none.
import { beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { buildDist, startProcess, writeGatewayConfig, type GatewayProcess } from '../helpers/process.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';
import { keyOf, participantAnswers } from './load.js';
import { keyFiles, records, trailDirectory } from './support.js';

const keys = keyFiles();
/** 8 KiB per file: a file fails (EFBIG) after about eight writes' records. */
const SMALL_FILES = "ulimit -f 16; trap '' XFSZ;";

beforeAll(() => buildDist());

async function gatewayProcess(upstream: RecordingUpstream, audit: string) {
  const issuer = await createTestIssuer();
  const configFile = writeGatewayConfig(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT, [`audit: ${audit}`]);
  const gateway = await startProcess(['dist/main.js', '--config', configFile], {}, 30_000, SMALL_FILES);
  return { gateway, headers: { authorization: `Bearer ${await issuer.mint({}, {})}` } };
}

async function metric(gateway: GatewayProcess, name: string, labels = ''): Promise<number> {
  const text = await (await request(`${gateway.admin}/metrics`)).body.text();
  return text
    .split('\n')
    .filter((line) => line.startsWith(`${name}${labels}`) && !line.startsWith('#'))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

async function submit(gateway: GatewayProcess, headers: Record<string, string>, commandId: string) {
  const answer = await request(`${gateway.api}/v2/commands/submit-and-wait`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({
      commands: [{ CreateCommand: { templateId: '#app:Iou:Iou', createArguments: {} } }],
      commandId,
      actAs: ['Alice::1220'],
      userId: 'alice',
    }),
  });
  const text = await answer.body.text();
  return {
    status: answer.statusCode,
    code: answer.statusCode >= 400 ? (JSON.parse(text) as { code: string }).code : null,
  };
}

/** Submits until `done` says so (at most 200 writes); the statuses seen. */
async function submitUntil(
  gateway: GatewayProcess,
  headers: Record<string, string>,
  prefix: string,
  done: (status: number) => Promise<boolean>,
): Promise<number[]> {
  const statuses: number[] = [];
  for (let n = 0; n < 200; n++) {
    const { status } = await submit(gateway, headers, `${prefix}-${n}`);
    statuses.push(status);
    if (await done(status)) return statuses;
  }
  throw new Error('the trail never failed');
}

/** Intents the gateway counted as lost (a write forwarded without its intent on disk). */
const lostIntents = (gateway: GatewayProcess) =>
  metric(gateway, 'ledger_gateway_audit_records_lost_total', '{kind="intent"}');

/** Submits writes until the full disk has cost the first intent. */
const fillUntilAnIntentIsLost = (gateway: GatewayProcess, headers: Record<string, string>) =>
  submitUntil(gateway, headers, 'fill', async () => (await lostIntents(gateway)) > 0);

const stop = async (gateway: GatewayProcess) => {
  gateway.child.kill('SIGTERM');
  expect(await gateway.exited).toBe(0);
};

/** The intents of the trail by commandId, late or not. */
function intents(directory: string) {
  return records(directory).filter((record) => record.kind === 'intent') as unknown as Array<
    Record<string, unknown> & { request: { commandId?: string }; late?: boolean; id: string }
  >;
}

describe('a trail that cannot be written, in the gateway process', () => {
  it('comes back on its own timer: an idle gateway is writable again, and refused writes are not counted lost (closed)', async () => {
    const upstream = await startRecordingUpstream(participantAnswers);
    const directory = trailDirectory();
    const { gateway, headers } = await gatewayProcess(
      upstream,
      `{ enabled: true, directory: "${directory}", signingKeyFile: "${keys.privateKeyFile}", retryIntervalMs: 300 }`,
    );
    try {
      const statuses = await submitUntil(gateway, headers, 'idle', async (status) => status === 503);
      const refused = statuses.filter((status) => status === 503).length;
      // The refused write's own records are written once the trail is back (or not), never counted as lost.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(await metric(gateway, 'ledger_gateway_audit_writes_refused_total')).toBe(refused);
      expect(await metric(gateway, 'ledger_gateway_audit_write_failures_total')).toBeGreaterThan(0);
      // A write refused is not a write forwarded unrecorded.
      expect(await lostIntents(gateway)).toBe(0);
      // Nothing was sent since: the trail must take records again by itself.
      await expect
        .poll(() => metric(gateway, 'ledger_gateway_audit_trail_writable'), { timeout: 10_000, interval: 200 })
        .toBe(1);
      await stop(gateway);
    } finally {
      await gateway.close();
      await upstream.close();
    }
  }, 90_000);

  it('writes the late intent and the outcome of a write forwarded while it was down (open), before a SIGTERM can lose them', async () => {
    // The participant takes 2.5 s to answer the slow write: its outcome comes after the retry is due.
    const upstream = await startRecordingUpstream(async (recorded, response) => {
      if (keyOf(recorded)?.startsWith('slow') === true) await new Promise((resolve) => setTimeout(resolve, 2_500));
      await participantAnswers(recorded, response);
    });
    const directory = trailDirectory();
    const { gateway, headers } = await gatewayProcess(
      upstream,
      `{ enabled: true, directory: "${directory}", failMode: open, retryIntervalMs: 1500 }`,
    );
    try {
      await fillUntilAnIntentIsLost(gateway, headers);
      // Right after the failure: its intent cannot be written, it is forwarded (open).
      expect(await submit(gateway, headers, 'slow-1')).toEqual({ status: 200, code: null });
      const lost = await lostIntents(gateway);
      await stop(gateway);
      const trail = intents(directory);
      const slow = trail.filter((record) => record.request.commandId === 'slow-1');
      expect(slow).toHaveLength(1);
      expect(
        records(directory).filter((record) => record.kind === 'outcome' && record.intentId === slow[0]!.id),
      ).toHaveLength(1);
      // One lost intent per write forwarded without its intent on disk, whether its late one was written or not.
      const onTime = new Set(trail.filter((record) => record.late !== true).map((record) => record.request.commandId));
      const received = upstream.requests.filter((recorded) => recorded.method === 'POST').map(keyOf);
      expect(lost).toBe(received.filter((key) => !onTime.has(key)).length);
    } finally {
      await gateway.close();
      await upstream.close();
    }
  }, 90_000);

  it('counts one lost intent per write forwarded unrecorded, even when its late intent cannot be written either (open)', async () => {
    const upstream = await startRecordingUpstream(participantAnswers);
    const directory = trailDirectory();
    // No retry within the test: every record after the failure is refused at once, late intents included.
    const { gateway, headers } = await gatewayProcess(
      upstream,
      `{ enabled: true, directory: "${directory}", failMode: open, retryIntervalMs: 600000 }`,
    );
    try {
      await fillUntilAnIntentIsLost(gateway, headers);
      for (let n = 0; n < 5; n++) expect((await submit(gateway, headers, `after-${n}`)).status).toBe(200);
      const lost = await lostIntents(gateway);
      await stop(gateway);
      const onTime = new Set(
        intents(directory)
          .filter((r) => r.late !== true)
          .map((r) => r.request.commandId),
      );
      const received = upstream.requests.filter((recorded) => recorded.method === 'POST').map(keyOf);
      const unrecorded = received.filter((key) => !onTime.has(key)).length;
      expect(unrecorded).toBeGreaterThanOrEqual(6);
      expect(lost).toBe(unrecorded);
    } finally {
      await gateway.close();
      await upstream.close();
    }
  }, 90_000);
});
