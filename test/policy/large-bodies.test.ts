// Rule-checked bodies past what the event loop parses at once (1 MiB), up to the participant's own
// limit (limits.bodyBytes): judged in a worker thread (src/policy/large-body-pool.ts) with the same
// rule and the same answers as a small body, through the running gateway to a recording upstream.
import { describe, expect, it } from 'vitest';
import { JS_CANTON_ERROR_KEYS } from '../helpers/canton-error-shape.js';
import { recordingGatewayPerTest } from '../helpers/per-test.js';
import { keyFiles, records, trailDirectory } from '../audit/support.js';

const MiB = 1024 * 1024;
const PATH = '/v2/commands/submit-and-wait-for-transaction';
const BLOB = 'Y2FudG9u'.repeat(384); // a 3 KB createdEventBlob, as disclosed contracts carry

const current = recordingGatewayPerTest();
const { start } = current;

/**
 * A submit-and-wait-for-transaction body of exactly `size` bytes (the disclosed contracts fill it, a
 * workflowId pads it), in `userId`'s name; `templateId` of its one command.
 */
function submission(size: number, userId: string, templateId = '#app:Iou:Iou'): string {
  const command = `{"CreateCommand":{"templateId":"${templateId}","createArguments":{"n":1}}}`;
  const head = `{"commands":{"commands":[${command}],"commandId":"big-1","actAs":["Alice::1220"],"userId":"${userId}","disclosedContracts":[`;
  const contract = `{"templateId":"#app:Iou:Iou","contractId":"00ab","createdEventBlob":"${BLOB}","synchronizerId":""}`;
  const tail = '],"workflowId":"';
  const end = '"}}';
  const count = Math.floor((size - head.length - tail.length - end.length) / (contract.length + 1));
  const contracts = Array.from({ length: count }, () => contract).join(',');
  const pad = size - head.length - contracts.length - tail.length - end.length;
  const body = `${head}${contracts}${tail}${'w'.repeat(pad)}${end}`;
  expect(Buffer.byteLength(body)).toBe(size);
  return body;
}

async function post(body: string, path = PATH): Promise<Response> {
  return fetch(`${current.gw!.url}${path}`, {
    method: 'POST',
    body,
    headers: current.gw!.auth({ 'content-type': 'application/json' }),
  });
}

async function refusal(response: Response, status: number, code: string): Promise<Record<string, unknown>> {
  expect(response.status).toBe(status);
  const body = (await response.json()) as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(JS_CANTON_ERROR_KEYS);
  expect(body.code).toBe(code);
  expect(current.upstream!.requests).toHaveLength(0);
  return body;
}

describe('rule-checked bodies over 1 MiB, up to limits.bodyBytes', () => {
  it('a 3 MiB and a 7.9 MiB submission reach the participant byte for byte', async () => {
    await start();
    for (const size of [3 * MiB, Math.floor(7.9 * MiB)]) {
      const body = submission(size, 'alice');
      const response = await post(body);
      expect(response.status, `${size} bytes`).toBe(200);
      expect(current.upstream!.requests.at(-1)!.url).toBe(PATH);
      expect(current.upstream!.requests.at(-1)!.body.equals(Buffer.from(body)), `${size} bytes`).toBe(true);
    }
    expect(current.upstream!.requests).toHaveLength(2);
  });

  it("another user's userId is refused as a small body's is (403, redacted), and never reaches the participant", async () => {
    await start();
    const small = await refusal(await post(submission(4096, 'bob')), 403, 'NA');
    const large = await refusal(await post(submission(3 * MiB, 'bob')), 403, 'NA');
    expect(large).toMatchObject({ cause: 'A security-sensitive error has been received', context: {}, resources: [] });
    expect({ ...large, correlationId: null }).toEqual({ ...small, correlationId: null });
  });

  it('a malformed large body gets the same coded refusal as a small one', async () => {
    await start();
    const detail =
      "Invalid identifier format (Iou) not matching the expected format (<package>:<moduleName>:<entityName>) at 'commands.commands[0].CreateCommand.templateId'";
    for (const size of [4096, 3 * MiB]) {
      const response = await post(submission(size, 'alice', 'Iou'));
      expect(response.status, `${size} bytes`).toBe(400);
      expect(await response.text()).toBe(`Invalid value for: body (${detail})`);
    }
    // Not JSON: the decoder's 400, with JSON.parse's account of where, as for a small body.
    const cut = submission(3 * MiB, 'alice').slice(0, -2);
    const notJson = await post(cut);
    expect(notJson.status).toBe(400);
    expect(await notJson.text()).toMatch(/^Invalid value for: body \(Malformed JSON: /);
    // Too deep: the gateway's own 400, as for a small body.
    const deep = `{"commands":{"x":${'['.repeat(600)}${']'.repeat(600)},"pad":"${'p'.repeat(2 * MiB)}"}}`;
    await refusal(await post(deep), 400, 'GATEWAY_MALFORMED_REQUEST');
    expect(current.upstream!.requests).toHaveLength(0);
  });

  it('limits.bodyBytes + 1 gets the 413 shape, naming limits.bodyBytes; a tree too large for a worker gets a 413 too', async () => {
    await start();
    const over = await refusal(
      await post(`${submission(8 * MiB, 'alice').slice(0, -2)}x"}}`),
      413,
      'GATEWAY_REQUEST_TOO_LARGE',
    );
    expect(over.cause).toBe('The request body is larger than 8388608 bytes (limits.bodyBytes).');
    // 2 MiB of empty objects: a tree of 700,000 objects, refused before it is built.
    const objects = `{"commands":{"x":[${Array(700_000).fill('{}').join(',')}]}}`;
    const tree = await refusal(await post(objects), 413, 'GATEWAY_REQUEST_TOO_LARGE');
    expect(tree.cause).toMatch(/^The request body would parse to more than 600000 objects and arrays/);
  });

  it('policy.maxBodyBytes, set, is a lower cap on these routes only', async () => {
    await start({ policy: { maxBodyBytes: 2 * MiB } });
    const refused = await refusal(await post(submission(3 * MiB, 'alice')), 413, 'GATEWAY_REQUEST_TOO_LARGE');
    expect(refused.cause).toBe(`The request body is larger than ${2 * MiB} bytes (policy.maxBodyBytes).`);
    const streamed = `{"userId":"alice","commands":[],"pad":"${'p'.repeat(3 * MiB)}"}`;
    expect((await post(streamed, '/v2/commands/submit-and-wait')).status).toBe(200);
  });

  it("the audit trail records a large write's identifying fields from the worker's excerpt, a refused one's as well", async () => {
    const directory = trailDirectory();
    await start({ audit: { enabled: true, directory, signingKeyFile: keyFiles().privateKeyFile } });
    expect((await post(submission(3 * MiB, 'alice'))).status).toBe(200);
    expect((await post(submission(3 * MiB, 'bob'))).status).toBe(403);
    await current.gw!.close();
    const intents = records(directory).filter((record) => record.kind === 'intent');
    const tried = (userId: string) => ({
      request: {
        commandId: 'big-1',
        userId,
        actAs: ['Alice::1220'],
        commands: [{ kind: 'CreateCommand', templateId: '#app:Iou:Iou' }],
      },
    });
    expect(intents).toMatchObject([tried('alice'), tried('bob')]);
  });
});
