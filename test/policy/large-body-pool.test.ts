// The large-body pool on its own (src/policy/large-body-pool.ts): real worker threads of the built
// worker (dist/, built by the test setup), its bounded queue, its timeout and its heap bound.
import { afterEach, describe, expect, it } from 'vitest';
import { GatewayError } from '../../src/errors.js';
import { createLargeBodyPool, LARGE_BODY_POOL, type LargeBodyPool } from '../../src/policy/large-body-pool.js';

const pools: LargeBodyPool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((pool) => pool.close()));
});

function pool(options: Partial<typeof LARGE_BODY_POOL> = {}): LargeBodyPool {
  const made = createLargeBodyPool({ ...LARGE_BODY_POOL, ...options });
  pools.push(made);
  return made;
}

const task = {
  operation: 'submitAndWaitForTransaction',
  charset: undefined,
  maxDepth: 512,
  path: '/v2/commands/submit-and-wait-for-transaction',
  principal: { subject: 'alice', issuer: undefined, claims: {} },
};

const submission = (userId: string, extra = '') =>
  Buffer.from(
    `{"commands":{"commands":[{"CreateCommand":{"templateId":"#app:Iou:Iou","createArguments":{"n":1}}}],"commandId":"c1","actAs":["Alice::1220"],"userId":"${userId}"${extra}}}`,
  );

async function refusalOf(judged: Promise<unknown>): Promise<GatewayError> {
  const error = await judged.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(GatewayError);
  return error as GatewayError;
}

describe('the large-body pool', () => {
  it("judges a body with its operation's rule and sends back the verdict and a bounded excerpt, never the tree", async () => {
    const judges = pool();
    const long = 'x'.repeat(100_000);
    const accepted = await judges.judge(task, submission('alice', `,"workflowId":"${long}"`));
    expect(accepted.violation).toBeUndefined();
    expect(accepted.excerpt).toMatchObject({ commands: { commandId: 'c1', userId: 'alice', actAs: ['Alice::1220'] } });
    const kept = (accepted.excerpt.commands as Record<string, string>).workflowId!;
    expect(kept.length).toBe(513); // cut one past what the audit trail records, as the tokenizer's excerpt is
    const refused = await judges.judge(task, submission('bob'));
    expect(refused.violation?.definition.code).toBe('PERMISSION_DENIED');
    expect(refused.violation?.reason).toBe("commands.userId names another user than the token's subject");
  });

  it('refuses at once, as unavailable, a body that finds the workers busy and the queue full', async () => {
    const judges = pool({ maxQueue: 0 });
    const first = judges.judge(task, submission('alice'));
    const busy = await refusalOf(judges.judge(task, submission('alice')));
    expect(busy.definition.code).toBe('GATEWAY_RULE_CHECK_UNAVAILABLE');
    expect(busy.headers['retry-after']).toBe('1');
    expect((await first).violation).toBeUndefined();
  });

  it('refuses, as unavailable, a body not judged within the timeout (the worker is cut off), and carries on', async () => {
    const judges = pool({ timeoutMs: 1 });
    const late = await refusalOf(judges.judge(task, submission('alice')));
    expect(late.definition.code).toBe('GATEWAY_RULE_CHECK_UNAVAILABLE');
    expect(late.message).toMatch(/not judged within 1 ms|waited 1 ms/);
  });

  it('refuses a body whose tree passes the heap bound as too large (its worker dies), and serves the next body', async () => {
    // The tree bounds lifted: only the worker's 16 MiB heap stands between this tree and the process.
    const judges = pool({ heapMb: 16, treeBounds: { containers: 1e9, values: 1e9, keysOfOneObject: 1e9 } });
    const objects = Buffer.from(`{"commands":{"x":[${Array(1_500_000).fill('{}').join(',')}]}}`);
    const tooLarge = await refusalOf(judges.judge(task, objects));
    expect(tooLarge.definition.code).toBe('GATEWAY_REQUEST_TOO_LARGE');
    expect(tooLarge.message).toMatch(/needs more memory to parse than a rule-check worker has \(16 MiB\)/);
    expect((await judges.judge(task, submission('alice'))).violation).toBeUndefined();
  }, 60_000);
});
