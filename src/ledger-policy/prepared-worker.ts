// The worker of the prepared-transaction pool (prepared-pool.ts): decodes one transaction off the
// event loop. Only this thread loads the protobuf bindings (through prepared-transaction.ts).
import { preparedTransactionBytes, type PreparedLimits, type PreparedSummary } from './prepared-summary.js';
import { summarizePreparedTransaction } from './prepared-transaction.js';

export { documentOfBody } from './body-document-worker.js';

export interface PreparedTask {
  readonly encoded: string;
  readonly limits: PreparedLimits;
}

/** A PreparedTransactionError crosses the thread as its message: the pool rebuilds it. */
export type PreparedOutcome = { readonly summary: PreparedSummary } | { readonly invalid: string };

export default function decodePreparedTransaction(task: PreparedTask): PreparedOutcome {
  try {
    return { summary: summarizePreparedTransaction(preparedTransactionBytes(task.encoded), task.limits) };
  } catch (error) {
    return { invalid: (error as Error).message };
  }
}
