// Budgets over a command argument (phase 2 wires them to the ledger policy's decision document):
// how much of a quantity a consumer may move in a UTC day, e.g. the sum of `amount` over its
// transfers. A budget reads the call's parsed document through a measure (a pure function from the
// document to a decimal), and the counter spends it exactly: a call that would pass the budget is
// refused and counts nothing. Amounts are kept as integers of the budget's smallest unit (10^-scale),
// never as binary floating point; in Redis they stay exact up to 2^53 units a day (Lua's numbers).
import type { RedisClient } from './key-redis.js';
import { periodsAt } from './quotas.js';

/** What a budget reads from a call: its parsed document to the amount it spends (a decimal), or undefined for none. */
export type BudgetMeasure = (document: Readonly<Record<string, unknown>>) => string | number | undefined;

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

/** The units a call spends of `budget`: its measure over the document; throws for an amount that is not a decimal. */
export function unitsOf(budget: ArgumentBudget, document: Readonly<Record<string, unknown>>): bigint {
  const amount = budget.measure(document);
  if (amount === undefined) return 0n;
  const units = decimalUnits(amount, budget.scale);
  if (units < 0n) throw new RangeError('a negative amount');
  return units;
}

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
      const key = `${consumer} ${budget.name}`;
      const before = spent.get(key) ?? 0n;
      if (before + units > budget.perDayUnits) return verdict(false, before, budget, at);
      spent.set(key, before + units);
      return verdict(true, before + units, budget, at);
    },
  };
}

// KEYS: the day's spending; ARGV: the units of this call, the budget, the key's lifetime in seconds.
// Returns {1, spent} when counted, {0, spent} when the call would pass the budget.
const SPEND = `
local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
local units = tonumber(ARGV[1])
if spent + units > tonumber(ARGV[2]) then return {0, tostring(spent)} end
spent = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return {1, tostring(spent)}
`;

type SpendingClient = RedisClient & {
  ledgerGatewayBudgetSpend(keys: number, ...args: string[]): Promise<[number, string]>;
};

/** Spending shared by every replica (and kept across restarts) in protection.redis. */
export function createRedisBudgetCounter(client: RedisClient, prefix: string): BudgetCounter {
  client.defineCommand('ledgerGatewayBudgetSpend', { lua: SPEND });
  const spending = client as SpendingClient;
  return {
    async spend(consumer, budget, units, at) {
      const { day } = periodsAt(at);
      const [counted, spent] = await spending.ledgerGatewayBudgetSpend(
        1,
        `${prefix}budget:{${consumer}:${budget.name}}:${day.id}`,
        units.toString(),
        budget.perDayUnits.toString(),
        String(Math.ceil((day.end - at) / 1000) + 86_400),
      );
      return verdict(counted === 1, BigInt(spent), budget, at);
    },
  };
}
