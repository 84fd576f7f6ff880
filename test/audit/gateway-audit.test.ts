// The audit trail through a gateway: every write the participant receives has one intent and one
// outcome record, the outcome carries the participant's updateId, reads make no record, and the
// trail verifies with its public key.
import { describe, expect, it } from 'vitest';
import { request } from 'undici';
import { verifyTrail } from '../../src/audit/verify.js';
import { digestChecker } from '../../src/audit/chain.js';
import { gauge, startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream, type UpstreamHandler } from '../helpers/recording-upstream.js';
import { keyOf, mixedLoad, participantAnswers, recordKey } from './load.js';
import { keyFiles, readTrail, records, trailDirectory } from './support.js';

const current = perTest();
const keys = keyFiles();

/**
 * The participant's answers, and for each write it receives, whether its intent record was in the
 * trail's files already (read as the participant gets the call): never lost means written first.
 */
function answersCheckingTrail(directory: string, onDisk: Map<string, boolean>): UpstreamHandler {
  return (recorded, response) => {
    const key = recorded.method === 'POST' ? keyOf(recorded) : undefined;
    if (key !== undefined)
      onDisk.set(
        key,
        readTrail(directory, 2).some(({ text }) => text.includes(`"${key}"`)),
      );
    return participantAnswers(recorded, response);
  };
}

async function auditedGateway(
  directory: string,
  audit: Record<string, unknown> = {},
  answers: UpstreamHandler = participantAnswers,
) {
  const upstream = await startRecordingUpstream(answers);
  current.upstream = upstream;
  const gw = await startGateway(upstream.url, {
    // No caller's share: one caller at full speed writes past it (records-truth.test.ts tests it).
    audit: {
      enabled: true,
      directory,
      signingKeyFile: keys.privateKeyFile,
      rotateBytes: 64 * 1024,
      callerBytesPerMinute: 0,
      ...audit,
    },
  });
  current.gw = gw;
  return { upstream, gw };
}

describe('the audit trail of ledger writes', () => {
  it('records every write the participant received once as intent and once as outcome, with its updateId; reads make none', async () => {
    const directory = trailDirectory();
    const onDisk = new Map<string, boolean>();
    const { upstream, gw } = await auditedGateway(directory, {}, answersCheckingTrail(directory, onDisk));
    const sent = await mixedLoad(gw.url, gw.auth(), 8, 5_000);
    await gw.close(); // the last outcomes are written and the file ends with a signed digest
    expect(sent.filter((call) => call.status !== 200)).toEqual([]);
    expect(sent.length).toBeGreaterThan(100);

    const trail = records(directory);
    const intents = trail.filter((record) => record.kind === 'intent');
    const outcomes = trail.filter((record) => record.kind === 'outcome');
    const writes = upstream.requests.filter((recorded) => recorded.method === 'POST');
    expect(writes.length).toBe(sent.filter((call) => call.kind !== 'read').length);
    // Reads (GET /v2/state/ledger-end) make no record.
    expect(trail.filter((record) => record.operation === 'getV2StateLedger-end')).toEqual([]);
    expect(intents).toHaveLength(writes.length);
    // Each write's intent was on disk before the participant got it.
    expect(onDisk.size).toBe(writes.length);
    expect([...onDisk].filter(([, written]) => !written)).toEqual([]);
    expect(outcomes).toHaveLength(writes.length);

    const intentByKey = new Map(intents.map((record) => [recordKey(record), record]));
    const outcomeByIntent = new Map(outcomes.map((record) => [record.intentId, record]));
    for (const recorded of writes) {
      const key = keyOf(recorded)!;
      const intent = intentByKey.get(key);
      expect(intent, key).toBeDefined();
      // The intent was on disk before the participant got the call: its request id is the one forwarded.
      expect(intent!.requestId).toBe(recorded.headers['x-request-id'] ?? intent!.requestId);
      expect(intent).toMatchObject({
        principal: { issuer: gw.issuer.issuerConfig.issuer, subject: 'alice' },
        clientAddress: '127.0.0.1',
      });
      const outcome = outcomeByIntent.get(intent!.id);
      expect(outcome, key).toMatchObject({
        status: 200,
        errorCode: null,
        forwarded: true,
        requestId: intent!.requestId,
      });
      if (recorded.url.startsWith('/v2/commands/')) expect(outcome!.updateId).toBe(`update-${key}`);
      if (recorded.url === '/v2/commands/submit-and-wait-for-transaction')
        expect(outcome).toMatchObject({ offset: 18, recordTime: '2026-11-28T00:00:00Z' });
      if (recorded.url === '/v2/parties') expect(outcome!.party).toBe(`${key}::1220`);
    }
    // Identifying fields only: a command's arguments never reach the trail.
    expect(JSON.stringify(trail)).not.toContain('not-audited');
    expect(intents.find((record) => record.operation === 'updateVettedPackages')).toMatchObject({
      request: { dryRun: false, changes: ['Vet'] },
    });

    const files = readTrail(directory);
    expect(files.length).toBeGreaterThan(1); // rotated under load
    expect(verifyTrail(files, digestChecker(keys.publicKeyPem))).toMatchObject({ ok: true, unsignedTail: 0 });
    expect(await gauge(gw, 'ledger_gateway_audit_records_written_total')).toBe(2 * writes.length);
  }, 30_000);

  it('follows its policy live: a write audited at level none makes no record, one at body keeps its body', async () => {
    const directory = trailDirectory();
    const { gw } = await auditedGateway(directory, { policy: { levels: { postV2Parties: 'none' } } });
    const party = () =>
      request(`${gw.url}/v2/parties`, {
        method: 'POST',
        headers: { ...gw.auth(), 'content-type': 'application/json' },
        body: JSON.stringify({ partyIdHint: 'p1', localMetadata: { annotations: { k: 'v' } } }),
      }).then((answer) => answer.body.text());
    await party();
    await gw.gateway.reload(() => ({
      ...gw.config,
      audit: { ...gw.config.audit, policy: { defaultLevel: 'request', levels: { postV2Parties: 'body' } } },
    }));
    await party();
    await gw.close();
    const intents = records(directory).filter((record) => record.kind === 'intent');
    expect(intents).toHaveLength(1);
    expect(intents[0]).toMatchObject({
      level: 'body',
      body: { partyIdHint: 'p1', localMetadata: { annotations: { k: 'v' } } },
    });
  });
});
