// Submissions up to the participant's own body limit (limits.bodyBytes, 8 MiB on Canton 3.4/3.5; issue
// 42): read only for their userId, tokenized as they arrive, never parsed whole. An interactive execute
// carrying a 3 MiB prepared transaction, a submit-and-wait with 3 MiB of disclosed contracts and a
// 7.9 MiB submission whose userId comes last each reach the participant byte for byte; another user's
// userId in the same is still refused and never reaches it; 8 MiB + 1 gets a 413 in Canton's shape.
import { describe, expect, it } from 'vitest';
import { JS_CANTON_ERROR_KEYS } from '../helpers/canton-error-shape.js';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';
import { keyFiles, records, trailDirectory } from '../audit/support.js';

const current = perTest();
const MiB = 1024 * 1024;
const COMMANDS =
  '"commands":[{"CreateCommand":{"templateId":"#app:Iou:Iou","createArguments":{"n":1}}}],"commandId":"c1","actAs":["Alice::1220"]';

/** Base64 text of `bytes` bytes of a repeating pattern (as a prepared transaction or a created-event blob). */
const base64 = (bytes: number) => Buffer.alloc(bytes, 'canton').toString('base64');

/** A 3 MiB interactive execute: the prepared transaction (with every input contract) base64-encoded. */
function execute(user: string): string {
  return `{"preparedTransaction":"${base64(3 * MiB * 0.75)}","partySignatures":{"signatures":[]},"submissionId":"s1","userId":"${user}","hashingSchemeVersion":"HASHING_SCHEME_VERSION_V2"}`;
}

/** A submit-and-wait with 1,000 disclosed contracts of a 3 KB blob each: about 3 MiB. */
function withDisclosedContracts(user: string): string {
  const contract = `{"templateId":"#app:Iou:Iou","contractId":"00ab","createdEventBlob":"${base64(2_300)}","synchronizerId":""}`;
  const disclosed = Array.from({ length: 1_000 }, () => contract).join(',');
  return `{${COMMANDS},"userId":"${user}","disclosedContracts":[${disclosed}]}`;
}

/** A submission of `bytes` bytes (within a few), its userId the last field: everything before it is held. */
function submissionOf(bytes: number, user: string): string {
  const head = `{${COMMANDS},"workflowId":"`;
  const tail = `","userId":"${user}"}`;
  return head + 'w'.repeat(bytes - head.length - tail.length) + tail;
}

describe('submissions up to the participant body limit (limits.bodyBytes)', () => {
  it('forwards a 3 MiB execute, a 3 MiB submit-and-wait with disclosed contracts and a 7.9 MiB submission byte for byte; refuses another user in each', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url));
    const send = (path: string, body: string) =>
      fetch(`${gw.url}${path}`, { method: 'POST', body, headers: gw.auth({ 'content-type': 'application/json' }) });
    const cases: ReadonlyArray<[string, (user: string) => string]> = [
      ['/v2/interactive-submission/execute', execute],
      ['/v2/commands/submit-and-wait', withDisclosedContracts],
      ['/v2/commands/async/submit', (user) => submissionOf(Math.floor(7.9 * MiB), user)],
    ];
    for (const [path, bodyFor] of cases) {
      const body = bodyFor('alice');
      expect(body.length, path).toBeGreaterThan(3 * MiB);
      const answer = await send(path, body);
      expect(answer.status, path).toBe(200);
      const received = upstream.requests.pop()!;
      expect(received.url, path).toBe(path);
      expect(received.body.equals(Buffer.from(body)), path).toBe(true);

      const refused = await send(path, bodyFor('bob'));
      expect(refused.status, path).toBe(403);
      expect(await refused.json(), path).toMatchObject({ code: 'NA', grpcCodeValue: 7 });
      expect(upstream.requests, path).toHaveLength(0);
    }
  }, 60_000);

  it('forwards a 3 MiB execute with the audit trail on and the request rules off, its intent recorded (the trail reads to the same limit)', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const directory = trailDirectory();
    const gw = (current.gw = await startGateway(upstream.url, {
      policy: { requestRules: false },
      audit: { enabled: true, directory, signingKeyFile: keyFiles().privateKeyFile },
    }));
    const body = execute('alice');
    const answer = await fetch(`${gw.url}/v2/interactive-submission/execute`, {
      method: 'POST',
      body,
      headers: gw.auth({ 'content-type': 'application/json' }),
    });
    expect(answer.status).toBe(200);
    expect(upstream.requests.pop()!.body.equals(Buffer.from(body))).toBe(true);
    await gw.close();
    const intent = records(directory).find((record) => record.kind === 'intent');
    expect(intent).toMatchObject({ request: { submissionId: 's1', userId: 'alice' } });
  });

  it("answers 8 MiB + 1 with a 413 in Canton's shape, naming limits.bodyBytes; nothing reaches the participant", async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url));
    for (const path of ['/v2/commands/async/submit', '/v2/interactive-submission/execute']) {
      const answer = await fetch(`${gw.url}${path}`, {
        method: 'POST',
        body: submissionOf(8 * MiB + 1, 'alice'),
        headers: gw.auth({ 'content-type': 'application/json' }),
      });
      expect(answer.status, path).toBe(413);
      const error = (await answer.json()) as Record<string, unknown>;
      expect(Object.keys(error).sort(), path).toEqual(JS_CANTON_ERROR_KEYS);
      expect(error, path).toMatchObject({ code: 'GATEWAY_REQUEST_TOO_LARGE' });
      expect(String(error.cause), path).toContain('limits.bodyBytes');
    }
    expect(upstream.requests).toHaveLength(0);
  }, 60_000);

  it('refuses a large body that is not JSON as the participant does, and one nested too deep, without parsing it whole', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url));
    const send = (body: string) =>
      fetch(`${gw.url}/v2/commands/async/submit`, {
        method: 'POST',
        body,
        headers: gw.auth({ 'content-type': 'application/json' }),
      });
    const cut = await send(submissionOf(2 * MiB, 'alice').slice(0, -2));
    expect(cut.status).toBe(400);
    expect(await cut.text()).toMatch(/^Invalid value for: body \(Malformed JSON/);
    const deep = await send(`{"userId":"alice","x":${'['.repeat(2 * MiB)}}`);
    expect(deep.status).toBe(400);
    expect(await deep.json()).toMatchObject({ code: 'GATEWAY_MALFORMED_REQUEST' });
    expect(upstream.requests).toHaveLength(0);
  }, 60_000);
});
