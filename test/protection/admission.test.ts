// Admission over the memory store: the process-wide cap, per-caller and per-operation caps, rates,
// idempotent releases, and what a failing shared store does in each fail mode.
import { describe, expect, it } from 'vitest';
import { validateGatewayConfig } from '../../src/config/load.js';
import { Errors, GatewayError } from '../../src/errors.js';
import { createProtection, type Release } from '../../src/protection/admission.js';
import { resolveProtectionConfig } from '../../src/protection/config.js';
import { IDLE_KEYS_MAX, createMemoryStore } from '../../src/protection/memory-store.js';
import { StoreUnavailableError, type LimitStore } from '../../src/protection/store.js';

const resolve = (protection: Record<string, unknown>) =>
  resolveProtectionConfig(validateGatewayConfig({ protection }, 'test').protection);

function refusalOf(action: () => unknown): GatewayError {
  try {
    action();
  } catch (error) {
    if (error instanceof GatewayError) return error;
    throw error;
  }
  throw new Error('admitted');
}

async function asyncRefusalOf(action: () => unknown): Promise<GatewayError> {
  try {
    await action();
  } catch (error) {
    if (error instanceof GatewayError) return error;
    throw error;
  }
  throw new Error('admitted');
}

describe('admission (memory store)', () => {
  it('caps concurrent calls per caller and operation, counting each operation separately', () => {
    const store = createMemoryStore({ maxKeys: 100 });
    const protection = createProtection(
      resolve({ operations: { submitAndWaitForTransaction: { maxInFlightPerPrincipal: 2 } } }),
      store,
    );
    const held = [
      protection.admit('submitAndWaitForTransaction', 'p:alice'),
      protection.admit('submitAndWaitForTransaction', 'p:alice'),
    ] as Release[];
    const refused = refusalOf(() => protection.admit('submitAndWaitForTransaction', 'p:alice'));
    expect(refused.definition).toBe(Errors.GATEWAY_RESOURCE_EXHAUSTED);
    expect(refused.details.context).toEqual({
      operation: 'submitAndWaitForTransaction',
      limit: 'principalConcurrency',
    });
    expect(refused.headers).toEqual({ 'retry-after': '1' });
    expect(() => protection.admit('submitAndWaitForTransaction', 'p:bob')).not.toThrow();
    expect(() => protection.admit('getV2Parties', 'p:alice')).not.toThrow();
    held[0]!();
    held[0]!(); // idempotent: one release frees one slot
    (protection.admit('submitAndWaitForTransaction', 'p:alice') as Release)();
    expect(() => protection.admit('submitAndWaitForTransaction', 'p:alice')).not.toThrow();
    expect(refusalOf(() => protection.admit('submitAndWaitForTransaction', 'p:alice')).details.context?.limit).toBe(
      'principalConcurrency',
    );
  });

  it('caps an operation for all callers together, and the whole process', () => {
    const protection = createProtection(
      resolve({ maxInFlight: 3, operations: { postV2Dars: { maxInFlight: 1 } } }),
      createMemoryStore({ maxKeys: 100 }),
    );
    const dar = protection.admit('postV2Dars', 'p:alice') as Release;
    expect(refusalOf(() => protection.admit('postV2Dars', 'p:bob')).details.context?.limit).toBe(
      'operationConcurrency',
    );
    // Three callers: with the default principalShare, each may hold one of the three slots.
    void protection.admit('getV2Parties', 'p:bob');
    void protection.admit('getV2Parties', 'p:dave');
    expect(protection.inFlight).toBe(3);
    const full = refusalOf(() => protection.admit('getVersion', 'p:carol'));
    expect(full.details.context).toEqual({ operation: 'getVersion', limit: 'gatewayConcurrency' });
    dar();
    expect(protection.inFlight).toBe(2);
    expect(() => protection.admit('getVersion', 'p:carol')).not.toThrow();
  });

  it('one caller holds at most its share of the process-wide cap, calls of every operation together', () => {
    const protection = createProtection(resolve({ maxInFlight: 8, principalShare: 0.25 }), undefined);
    const alice = ['getV2Parties', 'onV2Updates'].map((operation) => protection.admit(operation, 'p:alice') as Release);
    const refused = refusalOf(() => protection.admit('getV2Packages', 'p:alice'));
    expect(refused.definition).toBe(Errors.GATEWAY_RESOURCE_EXHAUSTED);
    expect(refused.details.context).toEqual({ operation: 'getV2Packages', limit: 'gatewayPrincipalConcurrency' });
    expect(refused.headers).toEqual({ 'retry-after': '1' });
    // The others keep the remaining six slots; a's refusal took none of them.
    for (const caller of ['p:bob', 'p:bob', 'a:203.0.113.7', 'a:203.0.113.7', 'p:carol', 'p:carol']) {
      void protection.admit('getV2Parties', caller);
    }
    expect(protection.inFlight).toBe(8);
    const limitOf = (caller: string, operation = 'getV2Parties') =>
      refusalOf(() => protection.admit(operation, caller)).details.context?.limit;
    expect(limitOf('p:dave')).toBe('gatewayConcurrency');
    alice[0]!();
    alice[0]!(); // idempotent: one release gives back one of alice's slots
    expect(() => protection.admit('getV2Packages', 'p:alice')).not.toThrow();
    expect(limitOf('p:alice', 'getV2Packages')).toBe('gatewayConcurrency');
  });

  it('the share is at least one slot, and principalShare 1 (or no process-wide cap) means none', () => {
    expect(resolve({ maxInFlight: 2, principalShare: 0.1 }).maxInFlightPerCaller).toBe(1);
    expect(resolve({}).maxInFlightPerCaller).toBe(256); // the defaults: a quarter of 1,024
    expect(resolve({ principalShare: 1 }).maxInFlightPerCaller).toBeUndefined();
    expect(resolve({ maxInFlight: 0 }).maxInFlightPerCaller).toBeUndefined();
    const unshared = createProtection(resolve({ maxInFlight: 3, principalShare: 1 }), undefined);
    for (let i = 0; i < 3; i++) void unshared.admit('getV2Parties', 'p:alice');
    const limit = refusalOf(() => unshared.admit('getV2Parties', 'p:alice')).details.context?.limit;
    expect(limit).toBe('gatewayConcurrency');
  });

  it('a refused call holds nothing: neither a process slot nor rate budget', () => {
    let now = 0;
    const store = createMemoryStore({ maxKeys: 100, now: () => now });
    const protection = createProtection(
      resolve({ default: { rate: { requests: 1, perSeconds: 2 }, maxInFlightPerPrincipal: 1 } }),
      store,
    );
    const first = protection.admit('getV2Parties', 'p:alice') as Release;
    const rate = refusalOf(() => protection.admit('getV2Parties', 'p:alice'));
    expect(rate.details.context?.limit).toBe('rate');
    expect(rate.headers['retry-after']).toBe('2');
    expect(protection.inFlight).toBe(1);
    now = 2_000;
    expect(refusalOf(() => protection.admit('getV2Parties', 'p:alice')).details.context?.limit).toBe(
      'principalConcurrency',
    );
    first();
    expect(store.heldKeys).toBe(0);
    // The concurrency refusal did not spend the rate budget.
    expect(() => protection.admit('getV2Parties', 'p:alice')).not.toThrow();
  });

  it('keeps a released key at 0 for the next burst, still enforces the limit on it, and sweeps idle keys past the bound', () => {
    const store = createMemoryStore({ maxKeys: 10 });
    const protection = createProtection(resolve({ default: { maxInFlightPerPrincipal: 2 } }), store);
    for (let burst = 0; burst < 3; burst++) {
      const held = [
        protection.admit('getV2Parties', 'p:alice') as Release,
        protection.admit('getV2Parties', 'p:alice') as Release,
      ];
      expect(refusalOf(() => protection.admit('getV2Parties', 'p:alice')).details.context?.limit).toBe(
        'principalConcurrency',
      );
      for (const release of held) release();
      expect(store.heldKeys).toBe(0);
      expect(store.keptKeys).toBe(1); // kept at 0, not deleted and re-added
    }
    for (let caller = 0; caller < IDLE_KEYS_MAX; caller++)
      (protection.admit('getV2Parties', `p:${caller}`) as Release)();
    expect(store.heldKeys).toBe(0);
    expect(store.keptKeys).toBe(0); // the 1,025th idle key swept them all
    const release = protection.admit('getV2Parties', 'p:alice') as Release;
    expect(store.heldKeys).toBe(1);
    release();
  });

  it('Retry-After is whole seconds, at least 1', () => {
    let now = 0;
    const protection = createProtection(
      resolve({ default: { rate: { requests: 10, perSeconds: 1 } } }),
      createMemoryStore({ maxKeys: 10, now: () => now }),
    );
    for (let i = 0; i < 10; i++) void protection.admit('getV2Parties', 'p:alice');
    expect(refusalOf(() => protection.admit('getV2Parties', 'p:alice')).headers['retry-after']).toBe('1');
    now = 50;
    expect(refusalOf(() => protection.admit('getV2Parties', 'p:alice')).headers['retry-after']).toBe('1');
  });

  it('memory stays bounded: the least recently seen caller is forgotten (and starts rested)', () => {
    const protection = createProtection(
      resolve({ default: { rate: { requests: 1, perSeconds: 60 } } }),
      createMemoryStore({ maxKeys: 2, now: () => 0 }),
    );
    void protection.admit('getV2Parties', 'p:a');
    void protection.admit('getV2Parties', 'p:b');
    void protection.admit('getV2Parties', 'p:c');
    expect(() => protection.admit('getV2Parties', 'p:a')).not.toThrow();
    expect(refusalOf(() => protection.admit('getV2Parties', 'p:c')).details.context?.limit).toBe('rate');
  });
});

describe('admission when the shared store fails', () => {
  const failing: LimitStore = {
    admit: () => Promise.reject(new StoreUnavailableError('Redis is reconnecting')),
    ready: () => false,
    close: async () => {},
  };
  const limits = { operations: { submitAndWaitForTransaction: { maxInFlightPerPrincipal: 1 } } };

  it('open: admits, counts every failure, warns at most once per interval with the count', async () => {
    let now = 0;
    const failures: string[] = [];
    const warnings: Array<{ failures: number }> = [];
    const protection = createProtection(resolve({ ...limits, failMode: 'open' }), failing, {
      onStoreFailure: (mode) => failures.push(mode),
      warn: (details) => warnings.push(details),
      warnIntervalMs: 30_000,
      now: () => now,
    });
    for (let i = 0; i < 5; i++) (await protection.admit('submitAndWaitForTransaction', 'p:alice'))();
    now = 30_000;
    const release = await protection.admit('submitAndWaitForTransaction', 'p:alice');
    expect(failures).toEqual(['open', 'open', 'open', 'open', 'open', 'open']);
    expect(warnings.map((w) => w.failures)).toEqual([1, 5]);
    expect(protection.inFlight).toBe(1);
    release();
    expect(protection.inFlight).toBe(0);
    expect(protection.storeReady()).toBe(false);
  });

  it('closed: refuses with 503 GATEWAY_PROTECTION_UNAVAILABLE and Retry-After, holding nothing', async () => {
    const failures: string[] = [];
    const protection = createProtection(resolve({ ...limits, failMode: 'closed' }), failing, {
      onStoreFailure: (mode) => failures.push(mode),
    });
    const refused = await asyncRefusalOf(() => protection.admit('submitAndWaitForTransaction', 'p:alice'));
    expect(refused.definition).toBe(Errors.GATEWAY_PROTECTION_UNAVAILABLE);
    expect(refused.definition.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('1');
    expect(protection.inFlight).toBe(0);
    expect(failures).toEqual(['closed']);
    // An operation without limits never asks the store: admitted at once, synchronously.
    const admitted = protection.admit('getV2Parties', 'p:alice');
    expect(admitted).toBeTypeOf('function');
    expect(protection.inFlight).toBe(1);
    (admitted as () => void)();
    expect(protection.inFlight).toBe(0);
    expect(failures).toEqual(['closed']);
  });
});
