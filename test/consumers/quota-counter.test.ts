// What the status page reads of quotas (QuotaCounter.used): the calls counted in the day and the
// month, nothing counted by reading; in memory, and from a real Redis where every replica counts.
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryQuotaCounter, createRedisQuotaCounter, type QuotaCounter } from '../../src/consumers/quotas.js';
import { openRedisConnection } from '../../src/protection/redis-connection.js';
import { describeNeeding } from '../helpers/tool-groups.js';
import { startRedisServer, type RedisServer } from '../protection/redis-server.js';

const quota = { perDay: 5, perMonth: 10 };
const JUNE_30 = Date.UTC(2026, 5, 30, 23, 59);
const JULY_1 = Date.UTC(2026, 6, 1, 0, 1);

/** Three calls of one operation and one of another on June 30th, one more on July 1st. */
async function takeCalls(counters: readonly QuotaCounter[]) {
  for (let index = 0; index < 3; index++)
    await counters[index % counters.length]!.take('payments', 'submit', quota, JUNE_30);
  await counters[0]!.take('payments', 'ledgerEnd', quota, JUNE_30);
  await counters[counters.length - 1]!.take('payments', 'submit', quota, JULY_1);
}

describe('the memory quota counter', () => {
  it('tells the calls counted per period, and reading counts nothing', async () => {
    const counter = createMemoryQuotaCounter();
    await takeCalls([counter]);
    // The memory counter keeps the current periods only: June's are gone once July is counted.
    expect(await counter.used('payments', 'submit', JULY_1)).toEqual({ day: 1, month: 1 });
    expect(await counter.used('payments', 'submit', JULY_1)).toEqual({ day: 1, month: 1 });
    expect(await counter.used('someone-else', 'submit', JULY_1)).toEqual({ day: 0, month: 0 });
  });
});

let redis: RedisServer | undefined;
afterEach(async () => {
  await redis?.stop();
  redis = undefined;
});

describeNeeding('redis-server')('the Redis quota counter', () => {
  it("tells the calls every replica counted, each period's own, and reading counts nothing", async () => {
    redis = await startRedisServer();
    const clients = [0, 1].map(() =>
      openRedisConnection({
        url: redis!.url,
        commandTimeoutMs: 1_000,
        connectTimeoutMs: 2_000,
        maxReplyBytes: 1 << 20,
      }),
    );
    try {
      await Promise.all(clients.map((client) => new Promise((resolve) => client.once('ready', resolve))));
      const counters = clients.map((client) => createRedisQuotaCounter(client, 'test:'));
      await takeCalls(counters);
      expect(await counters[1]!.used('payments', 'submit', JUNE_30)).toEqual({ day: 3, month: 3 });
      expect(await counters[0]!.used('payments', 'submit', JULY_1)).toEqual({ day: 1, month: 1 });
      expect(await counters[0]!.used('payments', 'ledgerEnd', JUNE_30)).toEqual({ day: 1, month: 1 });
      expect(await counters[1]!.used('payments', 'submit', JUNE_30)).toEqual({ day: 3, month: 3 });
      expect(await counters[1]!.used('nobody', 'submit', JUNE_30)).toEqual({ day: 0, month: 0 });
    } finally {
      for (const client of clients) client.disconnect();
    }
  });
});
