// A governed caller's bodies past what the event loop parses (the request rules' 1 MiB), up to the
// participant's limit (limits.bodyBytes): their decision documents built in the ledger policy's worker
// (src/ledger-policy/large-body-document.ts), never parsed on the event loop, decided as a small body
// is, through the running gateway to a recording upstream; a consumer's budget reads a large body's
// arguments from the same worker.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { JS_CANTON_ERROR_KEYS } from '../helpers/canton-error-shape.js';
import { recordingGatewayPerTest } from '../helpers/per-test.js';
import type { Submission } from '../../src/sandbox/commands.js';
import { SANDBOX_SEED } from '../../src/sandbox/app.js';
import { ALICE, BOB, IOU_BY_ID, preparedBySandbox, TRANSFER } from './support.js';

const MiB = 1024 * 1024;
const SUBMIT = '/v2/commands/submit-and-wait';
const SUBMIT_FOR_TRANSACTION = '/v2/commands/submit-and-wait-for-transaction';
const EXECUTE = '/v2/interactive-submission/executeAndWait';
const BLOB = 'Y2FudG9u'.repeat(384); // a 3 KB createdEventBlob, as disclosed contracts carry

const current = recordingGatewayPerTest();
afterEach(() => vi.restoreAllMocks());

/** alice (the test token's subject) may create IOUs for herself, never transfer one nor create one owned by BOB. */
const policy = (dryRun = false) => ({
  name: 'alice-ious',
  principals: { subjects: ['alice'] },
  dryRun,
  rules: [
    { name: 'no-transfer', effect: 'deny', choices: ['Transfer'] },
    {
      name: 'not-to-bob',
      effect: 'deny',
      templates: [IOU_BY_ID],
      where: `commands.exists(c, c.createArguments.owner == "${BOB}")`,
    },
    { name: 'create-ious', templates: [IOU_BY_ID], actAs: [ALICE] },
  ],
});

const start = (extra: Record<string, unknown> = {}, dryRun = false) =>
  current.start({ ledgerPolicy: { policies: [policy(dryRun)] }, ...extra });

const create = (owner: string) => ({
  CreateCommand: { templateId: IOU_BY_ID, createArguments: { issuer: ALICE, owner, amount: '10.0' } },
});

/** JsCommands of `command` filled to `size` bytes with disclosed contracts (a workflowId pads the rest). */
function jsCommands(size: number, command: object): string {
  const head = `{"commands":[${JSON.stringify(command)}],"commandId":"big-1","actAs":["${ALICE}"],"userId":"alice","disclosedContracts":[`;
  const contract = `{"templateId":"${IOU_BY_ID}","contractId":"00ab","createdEventBlob":"${BLOB}","synchronizerId":""}`;
  const tail = '],"workflowId":"';
  const end = '"}';
  const count = Math.floor((size - head.length - tail.length - end.length) / (contract.length + 1));
  const contracts = Array.from({ length: count }, () => contract).join(',');
  const body = `${head}${contracts}${tail}${'w'.repeat(size - head.length - contracts.length - tail.length - end.length)}${end}`;
  expect(Buffer.byteLength(body)).toBe(size);
  return body;
}

/** The same wrapped as submit-and-wait-for-transaction's body (`{"commands": JsCommands}`). */
const forTransaction = (size: number, command: object) => `{"commands":${jsCommands(size - 13, command)}}`;

async function post(path: string, body: string): Promise<Response> {
  return fetch(`${current.gw!.url}${path}`, {
    method: 'POST',
    body,
    headers: current.gw!.auth({ 'content-type': 'application/json' }),
  });
}

/** The texts longer than 1 MiB that JSON.parse read on this thread, the event loop's, from now on. */
function parsesOnTheEventLoop(): () => number {
  const parse = vi.spyOn(JSON, 'parse');
  return () => parse.mock.calls.filter(([text]) => typeof text === 'string' && text.length > MiB).length;
}

async function refusal(response: Response, status: number, code: string): Promise<Record<string, unknown>> {
  expect(response.status).toBe(status);
  const body = (await response.json()) as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(JS_CANTON_ERROR_KEYS);
  expect(body.code).toBe(code);
  return body;
}

const preparedTransaction = (command: Submission['commands'][number]) => preparedBySandbox([command]);

const executeBody = (prepared: string, size: number) => {
  const head = `{"preparedTransaction":"${prepared}","userId":"alice","hashingSchemeVersion":"HASHING_SCHEME_VERSION_V2","submissionId":"`;
  return `${head}${'s'.repeat(size - head.length - 2)}"}`;
};

describe("a governed caller's body past 1 MiB", () => {
  it('allowed, reaches the participant byte for byte, its body never parsed on the event loop', async () => {
    await start();
    const parses = parsesOnTheEventLoop();
    const sent: string[] = [];
    for (const [path, body] of [
      [SUBMIT, jsCommands(3 * MiB, create(ALICE))],
      [SUBMIT, jsCommands(Math.floor(7.9 * MiB), create(ALICE))],
      [SUBMIT_FOR_TRANSACTION, forTransaction(3 * MiB, create(ALICE))],
    ] as const) {
      const response = await post(path, body);
      expect(response.status, `${path} ${body.length}`).toBe(200);
      sent.push(body);
    }
    expect(current.upstream!.requests.map((request) => request.body.toString('utf8'))).toEqual(sent);
    expect(parses()).toBe(0);
  });

  it('with a denied choice or denied arguments, is refused as a small one is and never reaches the participant', async () => {
    await start();
    for (const [path, body, rule] of [
      [SUBMIT, jsCommands(3 * MiB, TRANSFER), 'no-transfer'],
      [SUBMIT, jsCommands(3 * MiB, create(BOB)), 'not-to-bob'],
      [SUBMIT_FOR_TRANSACTION, forTransaction(3 * MiB, TRANSFER), 'no-transfer'],
      [SUBMIT, jsCommands(4096, create(BOB)), 'not-to-bob'],
    ] as const) {
      const refused = await refusal(await post(path, body), 403, 'GATEWAY_LEDGER_POLICY_DENIED');
      expect(refused.context, `${path} ${rule}`).toMatchObject({ policy: 'alice-ious', rule });
    }
    expect(current.upstream!.requests).toHaveLength(0);
  });

  it('at execute, is decided on the prepared transaction it carries, decoded in the same worker', async () => {
    await start();
    const transfer = await preparedTransaction({
      kind: 'exercise',
      templateId: IOU_BY_ID,
      contractId: SANDBOX_SEED.initialTransaction.contractId,
      choice: 'Transfer',
      choiceArgument: { newOwner: BOB },
    });
    const refused = await refusal(
      await post(EXECUTE, executeBody(transfer, 3 * MiB)),
      403,
      'GATEWAY_LEDGER_POLICY_DENIED',
    );
    expect(refused.context).toMatchObject({ rule: 'no-transfer' });
    expect(current.upstream!.requests).toHaveLength(0);
    const allowed = executeBody(
      await preparedTransaction({
        kind: 'create',
        templateId: IOU_BY_ID,
        createArguments: { issuer: ALICE, owner: ALICE, currency: 'USD', amount: '1.0', observers: [] },
      }),
      3 * MiB,
    );
    expect((await post(EXECUTE, allowed)).status).toBe(200);
    // At the participant's limit, one long string: the tokenizer's count of it is given back once the
    // body is read, so the worker's own count fits the default budget beside the held bytes.
    const largest = executeBody(
      await preparedTransaction({
        kind: 'create',
        templateId: IOU_BY_ID,
        createArguments: { issuer: ALICE, owner: ALICE, currency: 'USD', amount: '2.0', observers: [] },
      }),
      Math.floor(7.9 * MiB),
    );
    expect((await post(EXECUTE, largest)).status).toBe(200);
    expect(current.upstream!.requests.map((request) => request.body.toString('utf8'))).toEqual([allowed, largest]);
  });

  it('whose tree is too large to build is refused with the 413 the request rules give such a body', async () => {
    await start();
    // 2 MiB of empty objects: a tree of 700,000 objects, on a route read only for its userId.
    const objects = `{"commands":[],"actAs":["${ALICE}"],"userId":"alice","x":[${Array(700_000).fill('{}').join(',')}]}`;
    const tree = await refusal(await post(SUBMIT, objects), 413, 'GATEWAY_REQUEST_TOO_LARGE');
    expect(tree.cause).toMatch(/^The request body would parse to more than 600000 objects and arrays/);
    expect(current.upstream!.requests).toHaveLength(0);
  });

  it('not JSON, or nested too deep, gets the answer a small one gets (the request rules off: the policy reads the body)', async () => {
    await start({ policy: { requestRules: false } });
    const answers = [];
    for (const size of [4096, 3 * MiB]) {
      const cut = await post(SUBMIT, jsCommands(size, create(ALICE)).slice(0, -2));
      const deep = await post(
        SUBMIT,
        `{"commands":[],"x":${'['.repeat(600)}${']'.repeat(600)},"pad":"${'p'.repeat(size)}"}`,
      );
      answers.push({
        cut: [cut.status, (await cut.text()).replace(/ at position \d+.*/, '')],
        deep: [deep.status, ((await deep.json()) as { context: unknown }).context],
      });
    }
    expect(answers[0]!.cut[0]).toBe(400);
    expect(answers[0]!.deep).toEqual([403, { policy: 'alice-ious', rule: 'unreadable' }]);
    expect(answers[1]).toEqual(answers[0]);
    expect(current.upstream!.requests).toHaveLength(0);
  });

  it('under a dry-run policy, one it cannot read is still forwarded byte for byte (its bytes back from the worker)', async () => {
    await start({ policy: { requestRules: false } }, true);
    const deep = `{"commands":[],"x":${'['.repeat(600)}${']'.repeat(600)},"pad":"${'p'.repeat(3 * MiB)}"}`;
    expect((await post(SUBMIT, deep)).status).toBe(200);
    expect(current.upstream!.requests.map((request) => request.body.toString('utf8'))).toEqual([deep]);
  });

  it("under a consumer's budget over an argument, is spent on its arguments, handed back for the budget", async () => {
    const transfers = {
      name: 'transfers',
      operations: ['postV2CommandsSubmit-and-wait'],
      amount: 'commands.filter(c, c.choice == "Transfer").map(c, c.choiceArgument.amount)',
      scale: 2,
      perDay: '100.00',
    };
    // No ledger policy: the document is built for the budget alone, from a body read in the worker.
    await current.start({
      consumers: { list: [{ name: 'alice-wallet', match: { tokens: [{ sub: 'alice' }] }, budgets: [transfers] }] },
    });
    const transfer = (amount: string) => ({
      ExerciseCommand: { ...TRANSFER.ExerciseCommand, choiceArgument: { newOwner: BOB, amount } },
    });
    const parses = parsesOnTheEventLoop();
    const spent = jsCommands(3 * MiB, transfer('60.00'));
    expect((await post(SUBMIT, spent)).status).toBe(200);
    const over = await refusal(
      await post(SUBMIT, jsCommands(3 * MiB, transfer('40.01'))),
      429,
      'GATEWAY_BUDGET_EXHAUSTED',
    );
    expect(over.context).toMatchObject({ budget: 'transfers', amount: '40.01', remaining: '40.00' });
    expect(current.upstream!.requests.map((request) => request.body.toString('utf8'))).toEqual([spent]);
    expect(parses()).toBe(0);
  });

  it('is refused as unavailable (503, retry) when the worker is late', async () => {
    await start({ ledgerPolicy: { policies: [policy()], preparedTransactions: { timeoutMs: 1 } } });
    await refusal(await post(SUBMIT, jsCommands(3 * MiB, create(ALICE))), 503, 'GATEWAY_LEDGER_POLICY_UNAVAILABLE');
    expect(current.upstream!.requests).toHaveLength(0);
  });
});
