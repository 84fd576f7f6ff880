// The per-address budget alone (unauthenticated-budget.ts): counted by address, a unit given back
// by a token that proved valid, refusals held refusalDelayMs, never more than one per connection.
import type { IncomingMessage } from 'node:http';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { GatewayError } from '../../src/errors.js';
import { createUnauthenticatedBudget } from '../../src/protection/unauthenticated-budget.js';

const rate = { requests: 1, perSeconds: 60, burst: 1, intervalMs: 60_000 };

/** A request as the budget reads it: its socket (the peer address) and headers. */
function requestOn(socket: object): IncomingMessage {
  return { socket, headers: {} } as unknown as IncomingMessage;
}

/** How a spend settled by now: 'admitted', 'refused' or 'pending'. */
async function outcomeOf(spent: void | Promise<void>): Promise<'admitted' | 'refused' | 'pending'> {
  if (spent === undefined) return 'admitted';
  let outcome: 'admitted' | 'refused' | 'pending' = 'pending';
  spent.then(
    () => (outcome = 'admitted'),
    (error: unknown) => {
      expect(error).toBeInstanceOf(GatewayError);
      outcome = 'refused';
    },
  );
  await vi.advanceTimersByTimeAsync(0);
  return outcome;
}

describe('the unauthenticated budget', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('holds one refusal per connection for refusalDelayMs; others on that connection are refused at once', async () => {
    const refusals: string[] = [];
    const { spend } = createUnauthenticatedBudget({
      rate,
      refusalDelayMs: 1_000,
      isTrustedProxy: () => false,
      shared: undefined,
      maxKeys: 100,
      onRefusal: (operation) => refusals.push(operation),
      now: () => 0,
    });
    const first = { remoteAddress: '203.0.113.1' };
    const second = { remoteAddress: '203.0.113.1' };
    expect(await outcomeOf(spend(requestOn(first), 'getV2Parties'))).toBe('admitted');

    const held = spend(requestOn(first), 'getV2Parties');
    expect(await outcomeOf(held)).toBe('pending');
    expect(await outcomeOf(spend(requestOn(first), 'getV2Parties'))).toBe('refused'); // pipelined behind it
    const heldOnSecond = spend(requestOn(second), 'getV2Parties'); // the same address, another connection
    expect(await outcomeOf(heldOnSecond)).toBe('pending');

    await vi.advanceTimersByTimeAsync(999);
    expect(await outcomeOf(held)).toBe('pending');
    await vi.advanceTimersByTimeAsync(1);
    expect(await outcomeOf(held)).toBe('refused');
    expect(await outcomeOf(heldOnSecond)).toBe('refused');
    // Once answered, the connection's next refusal is held again.
    expect(await outcomeOf(spend(requestOn(first), 'getV2Parties'))).toBe('pending');
    expect(refusals).toEqual(['getV2Parties', 'getV2Parties', 'getV2Parties', 'getV2Parties']);
  });

  it('refusalDelayMs 0 answers every refusal at once; other addresses have budgets of their own', async () => {
    const { spend } = createUnauthenticatedBudget({
      rate,
      refusalDelayMs: 0,
      isTrustedProxy: () => false,
      shared: undefined,
      maxKeys: 100,
      now: () => 0,
    });
    const socket = { remoteAddress: '2001:db8:0:1::1' };
    expect(await outcomeOf(spend(requestOn(socket), 'getV2Parties'))).toBe('admitted');
    expect(await outcomeOf(spend(requestOn(socket), 'getV2Parties'))).toBe('refused');
    // The same /64: the same budget; another /64 or an IPv4 address: their own.
    expect(await outcomeOf(spend(requestOn({ remoteAddress: '2001:db8:0:1::2' }), 'getV2Parties'))).toBe('refused');
    expect(await outcomeOf(spend(requestOn({ remoteAddress: '2001:db8:0:2::1' }), 'getV2Parties'))).toBe('admitted');
    expect(await outcomeOf(spend(requestOn({ remoteAddress: '203.0.113.1' }), 'getV2Parties'))).toBe('admitted');
  });

  it('a unit given back (the token proved valid) is spent again; one refund per spent unit', async () => {
    const budget = createUnauthenticatedBudget({
      rate,
      refusalDelayMs: 0,
      isTrustedProxy: () => false,
      shared: undefined,
      maxKeys: 100,
      now: () => 0,
    });
    const socket = { remoteAddress: '203.0.113.1' };
    for (let i = 0; i < 3; i++) {
      const request = requestOn(socket);
      expect(await outcomeOf(budget.spend(request, 'getV2Parties'))).toBe('admitted');
      budget.refund(request);
      budget.refund(request); // the second gives nothing back
    }
    expect(await outcomeOf(budget.spend(requestOn(socket), 'getV2Parties'))).toBe('admitted');
    const refused = requestOn(socket);
    expect(await outcomeOf(budget.spend(refused, 'getV2Parties'))).toBe('refused');
    budget.refund(refused); // a refused call spent nothing: nothing to give back
    expect(await outcomeOf(budget.spend(requestOn(socket), 'getV2Parties'))).toBe('refused');
  });
});
