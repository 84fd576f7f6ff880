// Budgets on the request path: a consumer's budget over the `amount` of its Transfer choices, read
// from the call's decision document, against real gateways in front of a recording participant. The
// call that would pass it is refused with a coded 429 and never reaches the participant; a bad amount
// is a coded 400; a call the ledger policy refuses spends nothing; two replicas sharing a real Redis
// count one budget, and a restart keeps it; a wrong budget stops the start and a reload.
import { describe, expect, it } from 'vitest';
import { startGateway, testConfig, type RunningGateway } from '../helpers/gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { closeAfterEach } from '../helpers/per-test.js';
import { describeNeeding } from '../helpers/tool-groups.js';
import { rawRequest } from '../auth/support/http.js';
import { createTestIssuer, TEST_PARTICIPANT, type TestIssuer } from '../helpers/tokens.js';
import { startRedisServer, type RedisServer } from '../protection/redis-server.js';
import { postJson, type JsonBody } from '../sandbox/helpers.js';
import { ALICE, BOB, IOU_BY_ID } from '../ledger-policy/support.js';
import { buildGateway } from '../../src/app.js';
import { ConfigError } from '../../src/config/schema.js';
import { Registry } from 'prom-client';

const ADMIN_TOKEN = 'admin-token-for-budget-tests';
let upstream: RecordingUpstream | undefined;
const gateways: RunningGateway[] = [];
let redis: RedisServer | undefined;
closeAfterEach(
  () => ({ close: async () => void (await Promise.all(gateways.splice(0).map((gateway) => gateway.close()))) }),
  () => {
    const closing = upstream;
    upstream = undefined;
    return closing;
  },
  () => redis && { close: () => redis!.stop() },
);

/** The sum of `amount` alice's wallet may transfer a UTC day: 100.00. */
const TRANSFERS = {
  name: 'transfers',
  operations: ['submitAndWaitForTransaction', 'postV2CommandsSubmit-and-wait'],
  amount: 'commands.filter(c, c.kind == "ExerciseCommand" && c.choice == "Transfer").map(c, c.choiceArgument.amount)',
  scale: 2,
  perDay: '100.00',
};
const wallet = (budgets: unknown[] = [TRANSFERS]) => ({
  list: [{ name: 'alice-wallet', match: { tokens: [{ sub: 'alice' }] }, budgets }],
});

let issuer: TestIssuer | undefined;
/** A gateway in front of the test's recording participant; the replicas of a test trust one issuer. */
async function replica(consumers: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  upstream ??= await startRecordingUpstream();
  if (gateways.length === 0) issuer = await createTestIssuer();
  const auth = { issuers: [issuer!.issuerConfig], participantId: TEST_PARTICIPANT };
  const gateway = await startGateway(upstream.url, { consumers, auth, admin: { purgeToken: ADMIN_TOKEN }, ...extra });
  gateways.push(gateway);
  return gateway;
}

const transfer = (amount: unknown, newOwner = BOB) => ({
  ExerciseCommand: {
    templateId: IOU_BY_ID,
    contractId: '00abc',
    choice: 'Transfer',
    choiceArgument: { newOwner, amount },
  },
});
const CREATE = { CreateCommand: { templateId: IOU_BY_ID, createArguments: { issuer: ALICE, owner: ALICE } } };
let commandNumber = 0;
/** A submit-and-wait-for-transaction of alice's `commands`. */
async function submit(gateway: RunningGateway, commands: object[]) {
  const token = `Bearer ${await issuer!.mint()}`;
  const body = { commands: { commands, commandId: `c-${++commandNumber}`, actAs: [ALICE], userId: 'alice' } };
  const answer = await postJson(`${gateway.url}/v2/commands/submit-and-wait-for-transaction`, body, {
    authorization: token,
  });
  return { status: answer.status, headers: answer.headers, body: (await answer.json()) as JsonBody };
}

/** The Transfer amounts the participant received, in order. */
const amountsReceived = () =>
  upstream!.requests.flatMap((request) =>
    (
      JSON.parse(request.body.toString()) as { commands: { commands: Array<ReturnType<typeof transfer>> } }
    ).commands.commands
      .filter((command) => 'ExerciseCommand' in command)
      .map((command) => command.ExerciseCommand.choiceArgument.amount),
  );

async function counted(gateway: RunningGateway, name: string, labels: Record<string, string>): Promise<number> {
  const metric = (await gateway.registry.getMetricsAsJSON()).find((m) => m.name === name);
  return ((metric?.values ?? []) as Array<{ value: number; labels: Record<string, string | number> }>)
    .filter((v) => Object.entries(labels).every(([k, l]) => String(v.labels[k]) === l))
    .reduce((sum, v) => sum + v.value, 0);
}

describe('a budget over the amount of a Transfer, in memory', () => {
  it('refuses the call that would pass it with a coded 429, which never reaches the participant; the earlier ones do', async () => {
    const gateway = await replica(wallet());
    const first = await submit(gateway, [transfer('60.00')]);
    expect(first.status).toBe(200);
    expect(first.headers.get('ratelimit-policy')).toBe('"budget.transfers";q=10000;w=86400');
    expect(first.headers.get('ratelimit')).toMatch(/^"budget.transfers";r=4000;t=\d+$/);

    // Two transfers in one call are summed: 40.01 would pass the 40.00 left.
    const refused = await submit(gateway, [transfer('20.00'), transfer('20.01')]);
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({
      code: 'GATEWAY_BUDGET_EXHAUSTED',
      context: { consumer: 'alice-wallet', budget: 'transfers', amount: '40.01', remaining: '40.00' },
    });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(refused.headers.get('ratelimit')).toMatch(/^"budget.transfers";r=4000;t=\d+$/);

    // A call without a Transfer spends nothing; the refused one counted nothing: 40.00 still fits.
    expect((await submit(gateway, [CREATE])).status).toBe(200);
    const last = await submit(gateway, [transfer('40')]);
    expect(last.status).toBe(200);
    expect(last.headers.get('ratelimit')).toMatch(/^"budget.transfers";r=0;t=\d+$/);
    expect((await submit(gateway, [transfer('0.01')])).status).toBe(429);
    expect(amountsReceived()).toEqual(['60.00', '40']);
    expect(upstream!.requests).toHaveLength(3);
    expect(
      await counted(gateway, 'ledger_gateway_consumer_budget_refusals_total', {
        consumer: 'alice-wallet',
        budget: 'transfers',
        reason: 'exhausted',
      }),
    ).toBe(2);
  });

  it('refuses an amount that is not a decimal, has too many places or is negative with a coded 400, counting nothing', async () => {
    const gateway = await replica(wallet());
    for (const [amount, why] of [
      ['ten', /not a decimal/],
      ['1.005', /more than 2 decimal places/],
      ['-5.00', /negative/],
      ['1e3', /not a decimal/],
      [1.5, /not a decimal/],
      [{ value: '1' }, /not a decimal/],
    ] as const) {
      const answer = await submit(gateway, [transfer(amount)]);
      expect(answer.status, JSON.stringify(amount)).toBe(400);
      expect(answer.body).toMatchObject({
        code: 'GATEWAY_BUDGET_AMOUNT_INVALID',
        context: { consumer: 'alice-wallet', budget: 'transfers' },
      });
      expect(answer.body.cause).toMatch(why);
    }
    // A Transfer without an amount: the expression fails on it, and the call is refused (fail closed).
    const missing = await submit(gateway, [
      { ExerciseCommand: { templateId: IOU_BY_ID, contractId: '00abc', choice: 'Transfer', choiceArgument: {} } },
    ]);
    expect(missing.body).toMatchObject({ code: 'GATEWAY_BUDGET_AMOUNT_INVALID' });
    expect(upstream!.requests).toHaveLength(0);
    // Nothing was counted: the whole budget is still there, and the gateway still serves.
    expect((await submit(gateway, [transfer('100.00')])).status).toBe(200);
    expect(await counted(gateway, 'ledger_gateway_consumer_budget_refusals_total', { reason: 'invalid' })).toBe(7);
    const report = await rawRequest(gateway.adminUrl, '/usage', {
      headers: ['authorization', `Bearer ${ADMIN_TOKEN}`],
    });
    expect((report.json() as { rows: unknown[] }).rows).toEqual([
      expect.objectContaining({
        consumer: 'alice-wallet',
        operation: 'submitAndWaitForTransaction',
        calls: 8,
        refused: 7,
      }),
    ]);
  });

  it('spends nothing for a call the ledger policy refuses, and spends on the document it decided on', async () => {
    const ledgerPolicy = {
      policies: [
        {
          name: 'wallet',
          principals: { subjects: ['alice'] },
          rules: [
            {
              name: 'not-to-mallory',
              effect: 'deny',
              choices: ['Transfer'],
              where: 'commands.exists(c, c.choiceArgument.newOwner == "mallory")',
            },
            { name: 'transfers', choices: ['Transfer'] },
          ],
        },
      ],
    };
    const gateway = await replica(wallet(), { ledgerPolicy });
    const denied = await submit(gateway, [transfer('90.00', 'mallory')]);
    expect(denied.status).toBe(403);
    expect(denied.body.code).not.toBe('GATEWAY_BUDGET_EXHAUSTED');
    expect((await submit(gateway, [transfer('90.00')])).status).toBe(200);
    expect((await submit(gateway, [transfer('10.01')])).status).toBe(429);
    expect(amountsReceived()).toEqual(['90.00']);
  });

  it("adds its RateLimit items after the quota's, and a call refused by it counts the quota's call", async () => {
    const consumers = wallet();
    (consumers.list[0] as Record<string, unknown>).quotas = { default: { perDay: 10 } };
    const gateway = await replica(consumers);
    const answer = await submit(gateway, [transfer('99.99')]);
    expect(answer.headers.get('ratelimit-policy')).toBe('"day";q=10;w=86400, "budget.transfers";q=10000;w=86400');
    expect(answer.headers.get('ratelimit')).toMatch(/^"day";r=9;t=\d+, "budget.transfers";r=1;t=\d+$/);
    const refused = await submit(gateway, [transfer('0.02')]);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('ratelimit')).toMatch(/^"day";r=8;t=\d+, "budget.transfers";r=1;t=\d+$/);
  });

  it('applies only to the operations it names and to its consumer', async () => {
    const gateway = await replica(wallet([{ ...TRANSFERS, operations: ['postV2CommandsSubmit-and-wait'] }]));
    expect((await submit(gateway, [transfer('500.00')])).status).toBe(200);
    const other = await replica({
      list: [{ name: 'other', match: { tokens: [{ sub: 'bob' }] }, budgets: [TRANSFERS] }],
    });
    expect((await submit(other, [transfer('500.00')])).status).toBe(200);
  });
});

describe('a wrong budget', () => {
  const wrong = [
    [{ amount: 'commands.map(c, c.choise)' }, /budgets\[0\]\.amount: does not type-check/],
    [{ amount: '1.5' }, /budgets\[0\]\.amount: is of type double/],
    [{ perDay: '100.001' }, /budgets\[0\]\.perDay: more than 2 decimal places/],
    [{ perDay: '0' }, /budgets\[0\]\.perDay: must be above 0/],
    [{ perDay: '99999999999999.00' }, /budgets\[0\]\.perDay: is 9999999999999900 units/],
    [{ operations: ['transferAll'] }, /budgets\[0\]\.operations\[0\]: unknown operation "transferAll"/],
  ] as const;

  it('stops the start with its key path and why', async () => {
    upstream = await startRecordingUpstream();
    const auth = { issuers: [(await createTestIssuer()).issuerConfig], participantId: TEST_PARTICIPANT };
    for (const [change, why] of wrong) {
      const config = testConfig(upstream.url, { auth, consumers: wallet([{ ...TRANSFERS, ...change }]) });
      const started = buildGateway(config, { upstreamUrl: upstream.url, registry: new Registry(), logger: false });
      await expect(started).rejects.toThrow(ConfigError);
      await expect(started).rejects.toThrow(why);
    }
    const twice = testConfig(upstream.url, { auth, consumers: wallet([TRANSFERS, TRANSFERS]) });
    await expect(
      buildGateway(twice, { upstreamUrl: upstream.url, registry: new Registry(), logger: false }),
    ).rejects.toThrow(/budgets\[1\]\.name: "transfers" is also budgets\[0\]\.name/);
  });

  it('is refused by a reload, which keeps the running budget; a sound one applies live', async () => {
    const gateway = await replica(wallet());
    const reload = (budgets: unknown[]) =>
      gateway.gateway.reload(() =>
        testConfig(upstream!.url, {
          auth: gateway.config.auth,
          admin: { purgeToken: ADMIN_TOKEN },
          consumers: wallet(budgets),
        }),
      );
    const refused = await reload([{ ...TRANSFERS, amount: 'commands' }]);
    expect(refused.result).not.toBe('success');
    expect(refused.problems.join('\n')).toMatch(/consumers\.list\[0\]\.budgets\[0\]\.amount: is of type list<Command>/);
    expect((await submit(gateway, [transfer('100.01')])).status).toBe(429);
    expect((await reload([{ ...TRANSFERS, perDay: '200.00' }])).result).toBe('success');
    expect((await submit(gateway, [transfer('100.01')])).status).toBe(200);
  });
});

describeNeeding('redis-server')('a budget shared through Redis', () => {
  it('is one budget for two replicas, and a restart keeps it', async () => {
    redis = await startRedisServer();
    const extra = { protection: { redis: { url: redis.url } } };
    const [first, second] = [await replica(wallet(), extra), await replica(wallet(), extra)];
    // The connections open in the background: a call spending nothing is answered with the budget's fields once counted.
    for (const gateway of [first, second])
      await expect
        .poll(async () => (await submit(gateway, [CREATE])).headers.get('ratelimit'), { timeout: 5_000 })
        .toMatch(/^"budget.transfers";r=10000;/);
    expect((await submit(first, [transfer('30.00')])).status).toBe(200);
    expect((await submit(second, [transfer('30.00')])).status).toBe(200);
    const past = await submit(first, [transfer('40.01')]);
    expect(past.body).toMatchObject({ code: 'GATEWAY_BUDGET_EXHAUSTED', context: { remaining: '40.00' } });

    await first.close();
    gateways.splice(0, 1);
    const restarted = await replica(wallet(), extra);
    await expect
      .poll(async () => (await submit(restarted, [CREATE])).headers.get('ratelimit'), { timeout: 5_000 })
      .toMatch(/^"budget.transfers";r=4000;/);
    expect((await submit(restarted, [transfer('40.00')])).status).toBe(200);
    expect((await submit(second, [transfer('0.01')])).status).toBe(429);
    expect(amountsReceived()).toEqual(['30.00', '30.00', '40.00']);
  });
});
