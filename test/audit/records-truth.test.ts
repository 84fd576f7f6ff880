// What the records say happened, through a gateway: a write the participant never got (its
// connection refused) is `forwarded: false` with the reason, one it may have got (the connection cut
// after it was sent) `forwarded: true`; a write its request rules refuse still has its identifying
// fields (what it tried); strings are cut in bytes, lists at 100 items, each cut marked; a record
// is bounded in bytes; and a caller's share of the trail is bounded in bytes per minute.
import { createServer, type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { request } from 'undici';
import { gauge, startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream, type UpstreamHandler } from '../helpers/recording-upstream.js';
import { participantAnswers } from './load.js';
import { keyFiles, records, trailDirectory, type TrailRecord } from './support.js';

const current = perTest();
const keys = keyFiles();

async function auditedGateway(upstreamUrl: string, audit: Record<string, unknown> = {}) {
  const directory = trailDirectory();
  const gw = await startGateway(upstreamUrl, {
    audit: { enabled: true, directory, signingKeyFile: keys.privateKeyFile, ...audit },
  });
  current.gw = gw;
  return { gw, directory };
}

async function recordingGateway(audit: Record<string, unknown> = {}, answers: UpstreamHandler = participantAnswers) {
  const upstream = await startRecordingUpstream(answers);
  current.upstream = upstream;
  return { upstream, ...(await auditedGateway(upstream.url, audit)) };
}

const submission = (commandId: string, extra: Record<string, unknown> = {}) => ({
  commands: [{ CreateCommand: { templateId: '#app:Iou:Iou', createArguments: { owner: 'Alice::1220' } } }],
  commandId,
  actAs: ['Alice::1220'],
  userId: 'alice',
  ...extra,
});

async function post(base: string, headers: Record<string, string>, path: string, body: unknown) {
  const answer = await request(`${base}${path}`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body),
  });
  const text = await answer.body.text();
  return { status: answer.statusCode, headers: answer.headers, body: text };
}

/** The trail's intent and outcome of the write with `commandId`. */
function recordsOf(directory: string, commandId: string): { intent?: TrailRecord; outcome?: TrailRecord } {
  const trail = records(directory);
  const intent = trail.find(
    (record) =>
      record.kind === 'intent' && (record.request as { commandId?: string } | undefined)?.commandId === commandId,
  );
  const outcome = trail.find((record) => record.kind === 'outcome' && record.intentId === intent?.id);
  return { intent, outcome };
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('what the outcome says of forwarding', () => {
  it("a participant that refused the connection: forwarded false, the reason, the gateway's code", async () => {
    const { gw, directory } = await auditedGateway(`http://127.0.0.1:${await closedPort()}`);
    const answer = await post(gw.url, gw.auth(), '/v2/commands/submit-and-wait', submission('refused-1'));
    expect(answer.status).toBe(503);
    await gw.close();
    const { intent, outcome } = recordsOf(directory, 'refused-1');
    expect(intent).toBeDefined();
    expect(outcome).toMatchObject({
      forwarded: false,
      reason: 'participant unreachable',
      status: 503,
      errorCode: 'GATEWAY_UPSTREAM_UNAVAILABLE',
    });
  });

  it('a connection cut after the write was sent: forwarded true (the participant may have it)', async () => {
    const { gw, directory } = await recordingGateway({}, (_recorded, response) => {
      response.socket?.destroy();
    });
    const answer = await post(gw.url, gw.auth(), '/v2/commands/submit-and-wait', submission('cut-1'));
    expect(answer.status).toBe(503);
    await gw.close();
    expect(recordsOf(directory, 'cut-1').outcome).toMatchObject({
      forwarded: true,
      errorCode: 'GATEWAY_UPSTREAM_UNAVAILABLE',
    });
    expect(recordsOf(directory, 'cut-1').outcome).not.toHaveProperty('reason');
  });
});

describe('a write its request rules refuse', () => {
  it('has an intent with its identifying fields: the command id, the user id it tried, its parties', async () => {
    const { gw, directory, upstream } = await recordingGateway();
    const answer = await post(
      gw.url,
      gw.auth(),
      '/v2/commands/submit-and-wait',
      submission('mallory-1', { userId: 'mallory', actAs: ['Bob::1220'] }),
    );
    expect(answer.status).toBe(403);
    await gw.close();
    expect(upstream.requests).toEqual([]);
    const { intent, outcome } = recordsOf(directory, 'mallory-1');
    expect(intent).toMatchObject({
      request: {
        commandId: 'mallory-1',
        userId: 'mallory',
        actAs: ['Bob::1220'],
        commands: [{ kind: 'CreateCommand' }],
      },
    });
    expect(intent).not.toHaveProperty('late');
    expect(outcome).toMatchObject({ forwarded: false, reason: 'refused', status: 403 });
  });
});

describe('the bounds of a record, in bytes', () => {
  it('cuts a string at 512 bytes of JSON text, not 512 characters, and lists at 100 items, each cut named', async () => {
    const { gw, directory } = await recordingGateway();
    const commandId = `long-${'é'.repeat(600)}`; // 1,205 bytes in UTF-8
    const actAs = Array.from({ length: 150 }, (_, n) => `Alice${n}::1220`);
    const answer = await post(gw.url, gw.auth(), '/v2/commands/submit-and-wait', submission(commandId, { actAs }));
    expect(answer.status).toBe(200);
    await gw.close();
    const intent = records(directory).find((record) => record.kind === 'intent')!;
    const request = intent.request as { commandId: string; actAs: string[]; truncated: string[] };
    expect(Buffer.byteLength(JSON.stringify(request.commandId))).toBeLessThanOrEqual(514);
    expect(commandId.startsWith(request.commandId)).toBe(true);
    expect(request.actAs).toEqual(actAs.slice(0, 100));
    expect(request.truncated).toEqual(['commandId', 'actAs']);
  });

  it('bounds a whole record (audit.maxRecordBytes): a large body is left out at level body, and said so', async () => {
    const { gw, directory } = await recordingGateway({
      maxRecordBytes: 8192,
      policy: { defaultLevel: 'body' },
    });
    const large = submission('large-1', {
      commands: [{ CreateCommand: { templateId: '#app:Iou:Iou', createArguments: { note: 'n'.repeat(20_000) } } }],
    });
    expect((await post(gw.url, gw.auth(), '/v2/commands/submit-and-wait', large)).status).toBe(200);
    expect((await post(gw.url, gw.auth(), '/v2/commands/submit-and-wait', submission('small-1'))).status).toBe(200);
    await gw.close();
    const lines = records(directory).filter((record) => record.kind === 'intent');
    const big = lines.find((record) => (record.request as { commandId: string }).commandId === 'large-1')!;
    expect(Buffer.byteLength(JSON.stringify(big))).toBeLessThanOrEqual(8192);
    expect(big).not.toHaveProperty('body');
    expect(big).toMatchObject({
      request: { commandId: 'large-1' },
      shortened: { reason: 'maxRecordBytes', omitted: ['body'] },
    });
    expect((big.shortened as { bytes: number }).bytes).toBeGreaterThan(20_000);
    const small = lines.find((record) => (record.request as { commandId: string }).commandId === 'small-1')!;
    expect(small).toHaveProperty('body');
    expect(small).not.toHaveProperty('shortened');
    expect(await gauge(gw, 'ledger_gateway_audit_records_shortened_total', { reason: 'maxRecordBytes' })).toBe(1);
  });

  it('bounds a record whose identifying fields alone are too large: only its ids are kept', async () => {
    const { gw, directory } = await recordingGateway({ maxRecordBytes: 8192 });
    const commands = Array.from({ length: 100 }, (_, n) => ({
      ExerciseCommand: {
        templateId: `#app:${'T'.repeat(400)}:${n}`,
        contractId: 'c'.repeat(300),
        choice: 'Go',
        choiceArgument: {},
      },
    }));
    const answer = await post(gw.url, gw.auth(), '/v2/commands/submit-and-wait', submission('many-1', { commands }));
    expect(answer.status).toBe(200);
    await gw.close();
    const intent = records(directory).find((record) => record.kind === 'intent')!;
    expect(Buffer.byteLength(JSON.stringify(intent))).toBeLessThanOrEqual(8192);
    expect(intent).toMatchObject({
      request: { commandId: 'many-1', userId: 'alice' },
      shortened: { reason: 'maxRecordBytes', omitted: ['request'] },
    });
    expect(intent.request).not.toHaveProperty('commands');
  });
});

describe("a caller's share of the trail (audit.callerBytesPerMinute)", () => {
  it("closed: past it the caller's writes are refused with 429 GATEWAY_AUDIT_SHARE_EXHAUSTED and not recorded; another caller writes on", async () => {
    const { gw, directory, upstream } = await recordingGateway({ callerBytesPerMinute: 8192 });
    const started = performance.now();
    const statuses: number[] = [];
    let refusal: Awaited<ReturnType<typeof post>> | undefined;
    for (let n = 0; n < 30 && refusal === undefined; n++) {
      const answer = await post(gw.url, gw.auth(), '/v2/commands/submit-and-wait', submission(`share-${n}`));
      statuses.push(answer.status);
      if (answer.status === 429) refusal = answer;
    }
    expect(refusal).toBeDefined();
    expect(JSON.parse(refusal!.body)).toMatchObject({ code: 'GATEWAY_AUDIT_SHARE_EXHAUSTED' });
    expect(Number(refusal!.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    const bob = { authorization: `Bearer ${await gw.issuer.mint({ sub: 'bob' })}` };
    expect(
      (await post(gw.url, bob, '/v2/commands/submit-and-wait', submission('bob-1', { userId: 'bob' }))).status,
    ).toBe(200);
    await gw.close();
    const refusedId = `share-${statuses.length - 1}`;
    expect(recordsOf(directory, refusedId).intent).toBeUndefined();
    expect(upstream.requests.map((recorded) => JSON.parse(recorded.body.toString()).commandId)).not.toContain(
      refusedId,
    );
    // What alice's writes added to the trail stays within her share (one outcome may overdraw it).
    const aliceBytes = records(directory)
      .filter((record) => record.kind === 'intent' || record.kind === 'outcome')
      .filter((record) => JSON.stringify(record).includes('share-'))
      .reduce((sum, record) => sum + Buffer.byteLength(JSON.stringify(record)), 0);
    const refilled = ((performance.now() - started) / 60_000) * 8192;
    expect(aliceBytes).toBeLessThanOrEqual(8192 + refilled + 1024);
    expect(await gauge(gw, 'ledger_gateway_audit_caller_share_exceeded_total')).toBe(1);
  });

  it("spends only what reaches the disk: writes the trail could not take (503) leave the caller's share whole", async () => {
    const SHARE = 32_768;
    // One record may wait at a time: most of a burst is refused 503 GATEWAY_AUDIT_UNAVAILABLE.
    const { gw, directory } = await recordingGateway({ callerBytesPerMinute: SHARE, maxPendingRecords: 1 });
    const started = performance.now();
    const burst = await Promise.all(
      Array.from({ length: 32 }, (_, n) =>
        post(gw.url, gw.auth(), '/v2/commands/submit-and-wait', submission(`spent-burst-${n}`)),
      ),
    );
    const unavailable = burst.filter((answer) => answer.status === 503);
    expect(unavailable.length).toBeGreaterThan(10);
    expect(JSON.parse(unavailable[0]!.body)).toMatchObject({ code: 'GATEWAY_AUDIT_UNAVAILABLE' });
    // Then one at a time until the share is spent: by then the trail holds the whole share.
    let exhausted = false;
    for (let n = 0; n < 200 && !exhausted; n++) {
      const answer = await post(gw.url, gw.auth(), '/v2/commands/submit-and-wait', submission(`spent-one-${n}`));
      expect([200, 429, 503]).toContain(answer.status);
      exhausted = answer.status === 429;
      if (answer.status === 503) await new Promise((resolve) => setTimeout(resolve, 30)); // outcomes still waiting
    }
    expect(exhausted).toBe(true);
    await gw.close();
    const aliceBytes = records(directory)
      .filter((record) => JSON.stringify(record).includes('spent-'))
      .reduce((sum, record) => sum + Buffer.byteLength(JSON.stringify(record)), 0);
    const refilled = ((performance.now() - started) / 60_000) * SHARE;
    // Short of the share by at most the write that no longer fit (each refused write had spent its
    // intent, and its records when written later, leaving a third of it on disk).
    expect(aliceBytes).toBeGreaterThanOrEqual(SHARE - 4096);
    expect(aliceBytes).toBeLessThanOrEqual(SHARE + refilled + 1024);
  });

  it("open: past it the caller's writes are forwarded and recorded with only their ids, marked", async () => {
    const { gw, directory } = await recordingGateway({ callerBytesPerMinute: 4096, failMode: 'open' });
    for (let n = 0; n < 10; n++)
      expect((await post(gw.url, gw.auth(), '/v2/commands/submit-and-wait', submission(`open-${n}`))).status).toBe(200);
    await gw.close();
    const intents = records(directory).filter((record) => record.kind === 'intent');
    expect(intents).toHaveLength(10);
    const shortened = intents.filter((record) => record.shortened !== undefined);
    expect(shortened.length).toBeGreaterThan(0);
    expect(shortened[0]).toMatchObject({
      request: { commandId: expect.stringMatching(/^open-/), userId: 'alice' },
      shortened: { reason: 'callerShare', omitted: ['request'] },
    });
    expect(shortened[0]!.request).not.toHaveProperty('commands');
  });
});
