// The ledger policy on the request path (a call's own stage): a gateway in front of the sandbox, a
// caller a policy names. Allowed calls reach the participant as sent; refused ones never do, on every
// command submission route, at prepare, and at each execute route, where the prepared transaction is
// decoded in the worker pool (a transaction prepared elsewhere that exercises a denied choice is
// refused there); a dry-run policy counts and logs what it would refuse and refuses nothing.
import { describe, expect, it } from 'vitest';
import { BodyBudget } from '../../src/body/budget.js';
import { streamedBodyLimits } from '../../src/body/read.js';
import { createLedgerPolicyStage, startLedgerPolicyRuntime } from '../../src/ledger-policy/stage.js';
import { LARGE_BODY_POOL } from '../../src/policy/large-body-pool.js';
import { startGateway, testConfig, type RunningGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { postJson, readJson, startSandbox, unsignedJwt, type RunningSandbox } from '../sandbox/helpers.js';
import { ALICE, BOB, decisions, IOU_BY_ID, IOU_BY_NAME, TRANSFER } from './support.js';

const current = perTest();

const iou = { issuer: ALICE, owner: BOB, currency: 'USD', amount: '10.0', observers: [] };
const CREATE = { CreateCommand: { templateId: IOU_BY_ID, createArguments: iou } };

/** alice (the test token's subject) may create IOUs by package name, never transfer one. */
const policies = (dryRun = false) => [
  {
    name: 'alice-ious',
    principals: { subjects: ['alice'] },
    dryRun,
    rules: [
      { name: 'no-transfer', effect: 'deny', choices: ['Transfer'] },
      { name: 'create-ious', templates: [IOU_BY_NAME], commandKinds: ['CreateCommand'], actAs: [ALICE] },
    ],
  },
];

const jsCommands = (commands: object[], id: string, userId = 'alice') => ({
  commands,
  commandId: id,
  actAs: [ALICE],
  userId,
});
/** Each command submission route with its body for `commands`. */
const SUBMISSIONS: ReadonlyArray<[path: string, body: (commands: object[], id: string) => object]> = [
  ['/v2/commands/submit-and-wait', jsCommands],
  ['/v2/commands/submit-and-wait-for-transaction', (commands, id) => ({ commands: jsCommands(commands, id) })],
  ['/v2/commands/submit-and-wait-for-transaction-tree', jsCommands],
  ['/v2/commands/async/submit', jsCommands],
];
const EXECUTES = ['execute', 'executeAndWait', 'executeAndWaitForTransaction'].map(
  (route) => `/v2/interactive-submission/${route}`,
);

async function start(dryRun = false): Promise<{ sandbox: RunningSandbox; gw: RunningGateway }> {
  const sandbox = await startSandbox();
  current.upstream = sandbox;
  const gw = await startGateway(sandbox.url, { ledgerPolicy: { policies: policies(dryRun) } });
  current.gw = gw;
  return { sandbox, gw };
}

/** The decisions counted with these labels, over every other label's values. */
/** A refusal in Canton's error shape: its status, code and context. */
async function refusal(
  response: Response,
): Promise<{ status: number; code: unknown; context: Record<string, unknown> }> {
  const body = (await response.json()) as { code: unknown; context: Record<string, unknown> };
  return { status: response.status, code: body.code, context: body.context };
}

const reached = (sandbox: RunningSandbox, path: string) =>
  sandbox.app.sandbox.receivedRequests.filter((request) => request.url.startsWith(path)).length;

/** A transaction prepared at the participant itself, not through the gateway. */
async function preparedElsewhere(sandbox: RunningSandbox, commands: object[]): Promise<string> {
  const answer = await postJson(`${sandbox.url}/v2/interactive-submission/prepare`, jsCommands(commands, 'p'), {
    authorization: `Bearer ${unsignedJwt({ sub: 'alice' })}`,
  });
  expect(answer.status).toBe(200);
  return ((await readJson(answer)) as { preparedTransaction: string }).preparedTransaction;
}

const executeBody = (preparedTransaction: string) => ({
  preparedTransaction,
  partySignatures: {
    signatures: [
      {
        party: ALICE,
        signatures: [
          {
            format: 'SIGNATURE_FORMAT_RAW',
            signature: 'AA==',
            signedBy: 'k',
            signingAlgorithmSpec: 'SIGNING_ALGORITHM_SPEC_ED25519',
          },
        ],
      },
    ],
  },
  submissionId: `s-${Math.random()}`,
  hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2',
  userId: 'alice',
});

describe('the ledger policy on the request path', () => {
  it('refuses a denied command on every submission route before the participant sees it, and passes an allowed one unchanged', async () => {
    const { sandbox, gw } = await start();
    for (const [path, body] of SUBMISSIONS) {
      const refused = await postJson(`${gw.url}${path}`, body([TRANSFER], `t-${path}`), gw.auth());
      const error = await refusal(refused);
      expect(error).toMatchObject({ status: 403, code: 'GATEWAY_LEDGER_POLICY_DENIED' });
      expect(error.context).toMatchObject({ policy: 'alice-ious', rule: 'no-transfer' });
      expect(JSON.stringify(error)).not.toContain('Transfer'); // the rule's conditions are never shown
      expect(reached(sandbox, path)).toBe(0);
    }
    const sent = JSON.stringify(jsCommands([CREATE], 'create-1'));
    const allowed = await fetch(`${gw.url}/v2/commands/submit-and-wait`, {
      method: 'POST',
      headers: { ...gw.auth(), 'content-type': 'application/json' },
      body: sent,
    });
    expect(allowed.status).toBe(200);
    const received = sandbox.app.sandbox.receivedRequests.filter((r) => r.url === '/v2/commands/submit-and-wait');
    expect(received.map((r) => r.body)).toEqual([sent]);
    expect(await decisions(gw, { rule: 'no-transfer', decision: 'deny', mode: 'enforce' })).toBe(4);
    expect(
      await decisions(gw, {
        operation: 'postV2CommandsSubmit-and-wait',
        rule: 'create-ious',
        decision: 'allow',
      }),
    ).toBe(1);
  });

  it('holds prepare to the rules on its commands', async () => {
    const { sandbox, gw } = await start();
    const path = '/v2/interactive-submission/prepare';
    const refused = await postJson(`${gw.url}${path}`, jsCommands([TRANSFER], 'p-1'), gw.auth());
    expect(await refusal(refused)).toMatchObject({ status: 403, code: 'GATEWAY_LEDGER_POLICY_DENIED' });
    expect(reached(sandbox, path)).toBe(0);
    const allowed = await postJson(`${gw.url}${path}`, jsCommands([CREATE], 'p-2'), gw.auth());
    expect(allowed.status).toBe(200);
    expect(reached(sandbox, path)).toBe(1);
  });

  it('refuses at each execute route a transaction prepared elsewhere that exercises a denied choice, and executes an allowed one', async () => {
    const { sandbox, gw } = await start();
    const transfer = await preparedElsewhere(sandbox, [TRANSFER]);
    const before = sandbox.app.sandbox.state.ledgerEnd;
    for (const path of EXECUTES) {
      const refused = await postJson(`${gw.url}${path}`, executeBody(transfer), gw.auth());
      const error = await refusal(refused);
      expect(error).toMatchObject({ status: 403, code: 'GATEWAY_LEDGER_POLICY_DENIED' });
      expect(error.context).toMatchObject({ rule: 'no-transfer' });
      expect(reached(sandbox, path)).toBe(0);
    }
    expect(sandbox.app.sandbox.state.ledgerEnd).toBe(before);

    const create = await preparedElsewhere(sandbox, [CREATE]);
    const executed = await postJson(
      `${gw.url}/v2/interactive-submission/executeAndWait`,
      executeBody(create),
      gw.auth(),
    );
    expect(executed.status).toBe(200);
    expect(sandbox.app.sandbox.state.ledgerEnd).toBe(before + 1);

    const garbage = await postJson(
      `${gw.url}/v2/interactive-submission/execute`,
      executeBody(Buffer.from('not a prepared transaction').toString('base64')),
      gw.auth(),
    );
    expect(await refusal(garbage)).toMatchObject({ status: 400, code: 'GATEWAY_PREPARED_TRANSACTION_UNREADABLE' });
  });

  it('leaves a caller no policy names to the other rules', async () => {
    const { sandbox, gw } = await start();
    const bob = await gw.issuer.mint({ sub: 'bob' });
    const answer = await postJson(`${gw.url}/v2/commands/submit-and-wait`, jsCommands([TRANSFER], 'bob-1', 'bob'), {
      authorization: `Bearer ${bob}`,
    });
    expect(answer.status).not.toBe(403);
    expect(reached(sandbox, '/v2/commands/submit-and-wait')).toBe(1);
    expect(await decisions(gw)).toBe(0);
  });

  it("governs the calls of the consumer a policy names (consumers.list), whoever's token they carry, and no other's", async () => {
    const sandbox = await startSandbox();
    current.upstream = sandbox;
    const gw = await startGateway(sandbox.url, {
      consumers: { list: [{ name: 'bob-app', match: { tokens: [{ sub: 'bob' }] } }] },
      ledgerPolicy: {
        policies: [
          {
            name: 'bob-app-no-creates',
            principals: { consumers: ['bob-app'] },
            rules: [{ name: 'no-creates', effect: 'deny', commandKinds: ['CreateCommand'] }],
          },
        ],
      },
    });
    current.gw = gw;
    const path = '/v2/commands/submit-and-wait';
    const bob = await gw.issuer.mint({ sub: 'bob' });
    const refused = await postJson(`${gw.url}${path}`, jsCommands([CREATE], 'bob-app-1', 'bob'), {
      authorization: `Bearer ${bob}`,
    });
    expect(await refusal(refused)).toMatchObject({ status: 403, code: 'GATEWAY_LEDGER_POLICY_DENIED' });
    const alice = await postJson(`${gw.url}${path}`, jsCommands([CREATE], 'alice-1'), gw.auth());
    expect(alice.status).toBe(200);
    expect(reached(sandbox, path)).toBe(1);
    expect(await decisions(gw, { policy: 'bob-app-no-creates', rule: 'no-creates', decision: 'deny' })).toBe(1);
  });
});

describe('the ledger policy stage of a configuration', () => {
  /** The stage of a configuration with these policies (its runtime closed after). */
  async function stageWith(list: object[]) {
    const config = testConfig('http://127.0.0.1:9', { ledgerPolicy: { policies: list } });
    const runtime = startLedgerPolicyRuntime(config.ledgerPolicy, 'http://127.0.0.1:9');
    try {
      return createLedgerPolicyStage(
        config.ledgerPolicy,
        {
          limits: streamedBodyLimits(config.policy, config.limits),
          maxDepth: config.policy.maxBodyDepth,
          large: { inThreadBytes: 1_048_576, treeBounds: LARGE_BODY_POOL.treeBounds },
          budgetsReadDocuments: false,
        },
        { runtime, bodyBudget: new BodyBudget(config.limits), isTrustedProxy: () => false, observe: () => undefined },
      );
    } finally {
      await runtime.close();
    }
  }

  it('is no call stage at all when no policy is configured (a call pays one branch), its documents still built', async () => {
    const none = await stageWith([]);
    expect(none.active).toBe(false);
    expect(none.decide).toBeUndefined();
    expect(typeof none.documentOf).toBe('function'); // what a consumer's budgets read
    const some = await stageWith(policies());
    expect(some.active).toBe(true);
    expect(typeof some.decide).toBe('function');
  });
});
