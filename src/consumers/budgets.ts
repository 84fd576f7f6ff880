// Budgets over a command argument: how much of a quantity a consumer may move in a UTC day, e.g. the
// sum of `amount` over its transfers. A budget reads the call's ledger-policy decision document
// through a measure (its CEL amount expression: ledger-policy/cel.ts compileBudgetAmount), and the counter
// spends it exactly: a call that would pass the budget is refused and counts nothing. Amounts are
// kept as integers of the budget's smallest unit (10^-scale), never as binary floating point; in
// Redis they stay exact up to budget-config.ts MAX_BUDGET_UNITS a day.
import type { RedisClient } from './key-redis.js';
import { periodsAt } from './periods.js';

/** What a budget reads from a call: its document to the amount it spends (a decimal, or a list of them summed), or undefined for none. */
export type BudgetMeasure = (document: object) => string | number | readonly (string | number)[] | undefined;

export interface ArgumentBudget {
  /** Names the budget in its counts and refusals. */
  readonly name: string;
  /** Decimal places kept: an amount with more is refused (Daml's Numeric 10 has ten). */
  readonly scale: number;
  /** Units of 10^-scale a consumer may spend per UTC day. */
  readonly perDayUnits: bigint;
  readonly measure: BudgetMeasure;
}

export interface BudgetVerdict {
  /** False: the call would pass the budget; nothing was counted. */
  readonly admitted: boolean;
  /** Units spent today, this call included when admitted. */
  readonly spentUnits: bigint;
  readonly remainingUnits: bigint;
  readonly resetSeconds: number;
}

export interface BudgetCounter {
  spend(consumer: string, budget: ArgumentBudget, units: bigint, at: number): BudgetVerdict | Promise<BudgetVerdict>;
  /** Gives back what `spend` counted at `at` (a later budget of the same call refused it). */
  refund(consumer: string, budget: ArgumentBudget, units: bigint, at: number): void | Promise<void>;
}

const DECIMAL = /^(-?)(\d{1,30})(?:\.(\d{1,40}))?$/;

/** A decimal (text as Daml writes a Numeric, or a safe integer) in units of 10^-scale; throws for anything else. */
export function decimalUnits(value: string | number, scale: number): bigint {
  const text = typeof value === 'number' && Number.isSafeInteger(value) ? String(value) : value;
  const match = typeof text === 'string' ? DECIMAL.exec(text) : null;
  if (match === null) throw new RangeError('not a decimal number');
  const [, sign, whole, fraction = ''] = match;
  const digits = fraction.replace(/0+$/, '');
  if (digits.length > scale) throw new RangeError(`more than ${scale} decimal places`);
  const units = BigInt(whole!) * 10n ** BigInt(scale) + BigInt(digits.padEnd(scale, '0') || '0');
  return sign === '-' ? -units : units;
}

function amountUnits(amount: unknown, scale: number): bigint {
  if (typeof amount !== 'string' && typeof amount !== 'number') throw new RangeError('not a decimal number');
  const units = decimalUnits(amount, scale);
  if (units < 0n) throw new RangeError('a negative amount');
  return units;
}

/** The units a call spends of `budget`: its measure over the document (a list summed); throws for an amount that is not a decimal. */
export function unitsOf(budget: ArgumentBudget, document: object): bigint {
  const amount = budget.measure(document);
  if (amount === undefined) return 0n;
  if (!Array.isArray(amount)) return amountUnits(amount, budget.scale);
  let units = 0n;
  for (const each of amount as readonly unknown[]) units += amountUnits(each, budget.scale);
  return units;
}

/** A budget's count of a consumer: a change of scale counts afresh (units of another size). */
const countKey = (consumer: string, budget: ArgumentBudget) => `${consumer}:${budget.name}:${budget.scale}`;

function verdict(admitted: boolean, spent: bigint, budget: ArgumentBudget, at: number): BudgetVerdict {
  const remaining = budget.perDayUnits - spent;
  return {
    admitted,
    spentUnits: spent,
    remainingUnits: remaining < 0n ? 0n : remaining,
    resetSeconds: Math.max(1, Math.ceil((periodsAt(at).day.end - at) / 1000)),
  };
}

/** This replica's spending: today's, the older days dropped as the day turns. */
export function createMemoryBudgetCounter(): BudgetCounter {
  let dayId = '';
  let spent = new Map<string, bigint>();
  return {
    spend(consumer, budget, units, at) {
      const { day } = periodsAt(at);
      if (day.id !== dayId) {
        dayId = day.id;
        spent = new Map<string, bigint>();
      }
      const key = countKey(consumer, budget);
      const before = spent.get(key) ?? 0n;
      if (before + units > budget.perDayUnits) return verdict(false, before, budget, at);
      spent.set(key, before + units);
      return verdict(true, before + units, budget, at);
    },
    refund(consumer, budget, units, at) {
      if (periodsAt(at).day.id !== dayId) return;
      const key = countKey(consumer, budget);
      spent.set(key, (spent.get(key) ?? 0n) - units);
    },
  };
}

// KEYS: the day's spending; ARGV: the units of this call, the budget, the key's lifetime in seconds.
// Returns {1, spent} when counted, {0, spent} when the call would pass the budget. The spending goes
// back as Redis keeps it, a decimal string: Lua's tostring writes 14 digits (1e+15 for 999999999999999).
const SPEND = `
local kept = redis.call('GET', KEYS[1]) or '0'
if tonumber(kept) + tonumber(ARGV[1]) > tonumber(ARGV[2]) then return {0, kept} end
redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return {1, redis.call('GET', KEYS[1])}
`;

type SpendingClient = RedisClient & {
  ledgerGatewayBudgetSpend(keys: number, ...args: string[]): Promise<[number, string]>;
};

/** Spending shared by every replica (and kept across restarts) in protection.redis. */
export function createRedisBudgetCounter(client: RedisClient, prefix: string): BudgetCounter {
  client.defineCommand('ledgerGatewayBudgetSpend', { lua: SPEND });
  const spending = client as SpendingClient;
  // One key per consumer, budget and day, in a hash slot of its own (a Cluster runs a script on one slot).
  const keyOf = (consumer: string, budget: ArgumentBudget, at: number) =>
    `${prefix}budget:{${countKey(consumer, budget)}}:${periodsAt(at).day.id}`;
  return {
    async spend(consumer, budget, units, at) {
      const { day } = periodsAt(at);
      const [counted, spent] = await spending.ledgerGatewayBudgetSpend(
        1,
        keyOf(consumer, budget, at),
        units.toString(),
        budget.perDayUnits.toString(),
        String(Math.ceil((day.end - at) / 1000) + 86_400),
      );
      return verdict(counted === 1, BigInt(spent), budget, at);
    },
    async refund(consumer, budget, units, at) {
      await client.decrby(keyOf(consumer, budget, at), units.toString());
    },
  };
}
