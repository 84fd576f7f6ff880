// Budgets over a command argument: amounts read exactly (decimal text, never binary floating point),
// the call that would pass the budget refused and not counted; exact across two counters sharing a
// real Redis.
import { afterEach, describe, expect, it } from 'vitest';
import {
  createMemoryBudgetCounter,
  createRedisBudgetCounter,
  decimalUnits,
  unitsOf,
  type ArgumentBudget,
  type BudgetCounter,
} from '../../src/consumers/budgets.js';
import { MAX_BUDGET_UNITS } from '../../src/consumers/budget-config.js';
import { openRedisConnection } from '../../src/protection/redis-connection.js';
import { describeNeeding } from '../helpers/tool-groups.js';
import { startRedisServer, type RedisServer } from '../protection/redis-server.js';

/** The sum of `amount` a consumer may transfer a day: 100.00, in cents. */
const transfers: ArgumentBudget = {
  name: 'transfer-amount',
  scale: 2,
  perDayUnits: 10_000n,
  measure: (document) => (document as { arguments?: { amount?: string } }).arguments?.amount,
};
const transfer = (amount: string) => ({ arguments: { amount } });

describe('amounts', () => {
  it('reads decimals exactly, refuses more places than the scale, negatives and non-numbers', () => {
    expect(decimalUnits('0.1', 10)).toBe(1_000_000_000n);
    expect(decimalUnits('99999999999999999999.99', 2)).toBe(BigInt('9999999999999999999999'));
    expect(decimalUnits('12.50', 1)).toBe(125n);
    expect(() => decimalUnits('1.005', 2)).toThrow(/decimal places/);
    expect(() => decimalUnits('1e3', 2)).toThrow(/not a decimal/);
    expect(() => unitsOf(transfers, transfer('-5'))).toThrow(/negative/);
    expect(unitsOf(transfers, {})).toBe(0n);
  });

  it('sums a list of amounts, each read exactly, and refuses a list with one bad amount', () => {
    const each: ArgumentBudget = { ...transfers, measure: (document) => (document as { amounts: string[] }).amounts };
    expect(unitsOf(each, { amounts: ['0.10', '0.20', '7'] })).toBe(730n);
    expect(unitsOf(each, { amounts: [] })).toBe(0n);
    expect(() => unitsOf(each, { amounts: ['1.00', '-0.01'] })).toThrow(/negative/);
    expect(() => unitsOf(each, { amounts: ['1.00', null] })).toThrow(/not a decimal/);
  });
});

async function spendAll(counters: BudgetCounter[], amounts: string[]) {
  const outcomes = [];
  for (const [index, amount] of amounts.entries()) {
    const counter = counters[index % counters.length]!;
    outcomes.push(
      (await counter.spend('payments', transfers, unitsOf(transfers, transfer(amount)), Date.now())).admitted,
    );
  }
  return outcomes;
}

describe('the memory counter', () => {
  it("refuses the transfer that would pass the day's budget and counts nothing for it", async () => {
    const counter = createMemoryBudgetCounter();
    expect(await spendAll([counter], ['60.00', '40.01', '40.00', '0.01'])).toEqual([true, false, true, false]);
  });

  it('gives back a refund, and counts a budget of another scale on its own', async () => {
    const counter = createMemoryBudgetCounter();
    const at = Date.now();
    expect((await counter.spend('payments', transfers, 10_000n, at)).admitted).toBe(true);
    await counter.refund('payments', transfers, 2_500n, at);
    expect((await counter.spend('payments', transfers, 2_500n, at)).remainingUnits).toBe(0n);
    const inMills = { ...transfers, scale: 3, perDayUnits: 100_000n };
    expect((await counter.spend('payments', inMills, 1n, at)).remainingUnits).toBe(99_999n);
  });
});

let redis: RedisServer | undefined;
afterEach(async () => {
  await redis?.stop();
  redis = undefined;
});

describeNeeding('redis-server')('the Redis counter', () => {
  it('is exact across two replicas', async () => {
    redis = await startRedisServer();
    const clients = [0, 1].map(() =>
      openRedisConnection({
        url: redis!.url,
        commandTimeoutMs: 1_000,
        connectTimeoutMs: 2_000,
        maxReplyBytes: 1024 * 1024,
      }),
    );
    try {
      await Promise.all(clients.map((client) => new Promise((resolve) => client.once('ready', resolve))));
      const counters = clients.map((client) => createRedisBudgetCounter(client, 'test:'));
      expect(await spendAll(counters, ['60.00', '40.01', '40.00', '0.01'])).toEqual([true, false, true, false]);
      // 40 concurrent transfers of 2.50 against what is left of a fresh consumer's 100.00: exactly 40 pass.
      const fresh = await Promise.all(
        Array.from({ length: 41 }, (_, index) =>
          Promise.resolve(counters[index % 2]!.spend('fresh', transfers, 250n, Date.now())),
        ),
      );
      expect(fresh.filter((answer) => answer.admitted)).toHaveLength(40);
      // The largest budget a configuration may hold (budget-config.ts MAX_BUDGET_UNITS) is counted to the unit.
      const largest = { ...transfers, perDayUnits: MAX_BUDGET_UNITS };
      const spendLargest = (units: bigint) => Promise.resolve(counters[1]!.spend('large', largest, units, Date.now()));
      expect(await spendLargest(MAX_BUDGET_UNITS - 1n)).toMatchObject({ admitted: true, remainingUnits: 1n });
      expect(await spendLargest(2n)).toMatchObject({ admitted: false, spentUnits: MAX_BUDGET_UNITS - 1n });
      expect(await spendLargest(1n)).toMatchObject({
        admitted: true,
        spentUnits: MAX_BUDGET_UNITS,
        remainingUnits: 0n,
      });
      expect((await spendLargest(10n ** 40n)).admitted).toBe(false);
      // A refund on one replica is seen by the other.
      await counters[0]!.refund('fresh', transfers, 500n, Date.now());
      expect((await counters[1]!.spend('fresh', transfers, 500n, Date.now())).remainingUnits).toBe(0n);
    } finally {
      for (const client of clients) client.disconnect();
    }
  });
});
