// A consumer's budgets (consumers.list[].budgets) as the budget stage reads them: each amount
// expression compiled (by the ledger policy's CEL environment, passed in: this room does not know
// the decision document), its per-day amount in units of 10^-scale, and the budgets of each operation
// looked up once. What the schema cannot say is refused at load with its path.
import type { ConsumerConfig, ConsumersConfig } from '../config/schema.js';
import { OPERATION_NAMES } from '../operations.js';
import { decimalUnits, type ArgumentBudget, type BudgetMeasure } from './budgets.js';

/** Compiles a budget's amount expression: its measure, or why it cannot be one. */
export type AmountCompiler = (expression: string) => BudgetMeasure | { readonly problem: string };

/**
 * The most units a day's budget may hold: RateLimit's quota is a Structured Field integer (at most
 * 15 digits, RFC 9651 section 3.3.1), and Redis's Lua counts exactly below 2^53.
 */
export const MAX_BUDGET_UNITS = 999_999_999_999_999n;

type BudgetConfig = ConsumerConfig['budgets'][number];

function perDayProblem(budget: BudgetConfig): string | undefined {
  let units: bigint;
  try {
    units = decimalUnits(budget.perDay, budget.scale);
  } catch (error) {
    return (error as Error).message;
  }
  if (units <= 0n) return 'must be above 0';
  if (units > MAX_BUDGET_UNITS) return `is ${units} units of 10^-${budget.scale}; at most ${MAX_BUDGET_UNITS}`;
  return undefined;
}

function oneBudgetProblems(budget: BudgetConfig, at: string, compile: AmountCompiler): string[] {
  const problems: string[] = [];
  budget.operations.forEach((operation, index) => {
    if (!OPERATION_NAMES.includes(operation))
      problems.push(`${at}.operations[${index}]: unknown operation "${operation}"`);
  });
  const compiled = compile(budget.amount);
  if (typeof compiled !== 'function') problems.push(`${at}.amount: ${compiled.problem}`);
  const perDay = perDayProblem(budget);
  if (perDay !== undefined) problems.push(`${at}.perDay: ${perDay}`);
  return problems;
}

/** Every problem of the consumers' budgets, each with its path. */
export function budgetProblems(list: ConsumersConfig['list'], compile: AmountCompiler): string[] {
  const problems: string[] = [];
  list.forEach((consumer, index) => {
    const named = new Map<string, number>();
    consumer.budgets.forEach((budget, budgetIndex) => {
      const at = `consumers.list[${index}].budgets[${budgetIndex}]`;
      const earlier = named.get(budget.name);
      if (earlier !== undefined) problems.push(`${at}.name: "${budget.name}" is also budgets[${earlier}].name`);
      else named.set(budget.name, budgetIndex);
      problems.push(...oneBudgetProblems(budget, at, compile));
    });
  });
  return problems;
}

/** Budgets by consumer, then by operation (a sound section: budgetProblems found nothing). */
export function budgetsByOperation(
  list: ConsumersConfig['list'],
  compile: AmountCompiler,
): ReadonlyMap<string, ReadonlyMap<string, readonly ArgumentBudget[]>> {
  const byConsumer = new Map<string, Map<string, ArgumentBudget[]>>();
  for (const consumer of list) {
    if (consumer.budgets.length === 0) continue;
    const byOperation = new Map<string, ArgumentBudget[]>();
    for (const budget of consumer.budgets) {
      const resolved: ArgumentBudget = {
        name: budget.name,
        scale: budget.scale,
        perDayUnits: decimalUnits(budget.perDay, budget.scale),
        measure: compile(budget.amount) as BudgetMeasure,
      };
      for (const operation of new Set(budget.operations))
        byOperation.set(operation, [...(byOperation.get(operation) ?? []), resolved]);
    }
    byConsumer.set(consumer.name, byOperation);
  }
  return byConsumer;
}
