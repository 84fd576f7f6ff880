// Spending a consumer's budgets on a call (live/ runs it right after the ledger policy admitted the
// call, in the policy's place of the list: generations.ts ledgerStage): the amount of each budget of
// the call's operation read from its decision document, all counted or none, before the call is
// forwarded. The answer carries each budget's RateLimit items beside the quota's
// (draft-ietf-httpapi-ratelimit-headers), in units of 10^-scale.
import type { FastifyRequest } from 'fastify';
import type { ConsumersConfig } from '../config/schema.js';
import { Errors, GatewayError } from '../errors.js';
import { budgetsByOperation, type AmountCompiler } from './budget-config.js';
import { unitsOf, type ArgumentBudget, type BudgetVerdict } from './budgets.js';
import type { ConsumerState } from './state.js';

/** Spends the call's budgets on its decision document (built once, by the ledger policy); undefined: none applies. */
export type BudgetSpend = (call: FastifyRequest, documentOf: () => Promise<object>) => Promise<void> | undefined;

export interface BudgetStageOptions {
  readonly compileAmount: AmountCompiler;
  /** protection.failMode: what a call gets while Redis cannot count its budget. */
  readonly failMode: 'open' | 'closed';
}

interface Spent {
  readonly budget: ArgumentBudget;
  readonly units: bigint;
  readonly verdict: BudgetVerdict;
}

const DAY_SECONDS = 86_400;

/** The RateLimit-Policy and RateLimit items of the budgets spent, after those a stage before set (the quota's). */
function addRateLimitFields(call: FastifyRequest, spent: readonly Spent[]): Record<string, string> {
  const joined = (name: string, items: string[]) => {
    const before = call.lifeline.getHeader(name);
    return [...(typeof before === 'string' && before !== '' ? [before] : []), ...items].join(', ');
  };
  const headers = {
    'ratelimit-policy': joined(
      'ratelimit-policy',
      spent.map(({ budget }) => `"budget.${budget.name}";q=${budget.perDayUnits};w=${DAY_SECONDS}`),
    ),
    ratelimit: joined(
      'ratelimit',
      spent.map(
        ({ budget, verdict }) => `"budget.${budget.name}";r=${verdict.remainingUnits};t=${verdict.resetSeconds}`,
      ),
    ),
  };
  for (const [name, value] of Object.entries(headers)) call.lifeline.setHeader(name, value);
  return headers;
}

/** Each budget's units of the call; a coded 400 for an amount that is not one (nothing counted). */
function unitsOfEach(
  call: FastifyRequest,
  consumer: string,
  budgets: readonly ArgumentBudget[],
  document: object,
  state: ConsumerState,
): bigint[] {
  return budgets.map((budget) => {
    try {
      return unitsOf(budget, document);
    } catch (error) {
      state.metrics.budgetRefusal(consumer, call.operation.name, budget.name, 'invalid');
      const why = String((error as Error).message ?? error)
        .split('\n')[0]!
        .slice(0, 200);
      throw new GatewayError(
        Errors.GATEWAY_BUDGET_AMOUNT_INVALID,
        { cause: `The amount of budget ${budget.name}: ${why}.`, context: { consumer, budget: budget.name } },
        { reason: `budget ${budget.name}: ${why}` },
      );
    }
  });
}

function budgetExhausted(consumer: string, refused: Spent, headers: Record<string, string>): GatewayError {
  const { budget, units, verdict } = refused;
  return new GatewayError(
    Errors.GATEWAY_BUDGET_EXHAUSTED,
    {
      cause: `The call would pass the day's budget ${budget.name} of this consumer.`,
      context: {
        consumer,
        budget: budget.name,
        amount: formatUnits(units, budget.scale),
        remaining: formatUnits(verdict.remainingUnits, budget.scale),
      },
    },
    { headers: { ...headers, 'retry-after': String(verdict.resetSeconds) }, reason: `budget: ${budget.name}` },
  );
}

/** Units of 10^-scale as a decimal. */
export function formatUnits(units: bigint, scale: number): string {
  if (scale === 0) return units.toString();
  const digits = units.toString().padStart(scale + 1, '0');
  return `${digits.slice(0, -scale)}.${digits.slice(-scale)}`;
}

/** The spend of `list`'s budgets, or undefined when no consumer has one (nothing runs per call). */
export function createBudgetSpend(
  list: ConsumersConfig['list'],
  state: ConsumerState,
  options: BudgetStageOptions,
): BudgetSpend | undefined {
  const budgets = budgetsByOperation(list, options.compileAmount);
  if (budgets.size === 0) return undefined;
  let warnedAt = Number.NEGATIVE_INFINITY;
  const unavailable = (error: unknown): undefined => {
    const now = Date.now();
    if (now - warnedAt > 30_000) {
      warnedAt = now;
      state.log.warn(
        { failMode: options.failMode, error: (error as Error).message?.slice(0, 200) },
        'budget store (Redis) unavailable',
      );
    }
    if (options.failMode === 'open') return undefined;
    throw new GatewayError(
      Errors.GATEWAY_PROTECTION_UNAVAILABLE,
      { cause: 'The gateway cannot count budgets right now.' },
      { headers: { 'retry-after': '1' }, reason: 'budget: store unavailable, failing closed' },
    );
  };

  /** Every budget counted, or none: a refusal gives back what the budgets before it counted. */
  async function spendAll(
    call: FastifyRequest,
    consumer: string,
    applying: readonly ArgumentBudget[],
    document: object,
  ) {
    const units = unitsOfEach(call, consumer, applying, document, state);
    const at = Date.now();
    const spent: Spent[] = [];
    for (const [index, budget] of applying.entries()) {
      const refund = () =>
        Promise.allSettled(
          spent.map(async (done) => {
            await state.budgets.refund(consumer, done.budget, done.units, at);
          }),
        );
      let verdict: BudgetVerdict;
      try {
        verdict = await state.budgets.spend(consumer, budget, units[index]!, at);
      } catch (error) {
        if (options.failMode === 'closed') await refund();
        unavailable(error);
        continue;
      }
      const entry = { budget, units: units[index]!, verdict };
      if (!verdict.admitted) {
        await refund();
        state.metrics.budgetRefusal(consumer, call.operation.name, budget.name, 'exhausted');
        throw budgetExhausted(consumer, entry, addRateLimitFields(call, [entry]));
      }
      spent.push(entry);
    }
    addRateLimitFields(call, spent);
  }

  return (call, documentOf) => {
    const consumer = call.principal?.consumer;
    if (consumer === undefined) return undefined;
    const applying = budgets.get(consumer)?.get(call.operation.name);
    if (applying === undefined) return undefined;
    return documentOf().then((document) => spendAll(call, consumer, applying, document));
  };
}
