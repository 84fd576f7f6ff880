// POST /v2/updates/update-by-offset (Canton `UpdateServiceRequestValidator.scala`, `ApiUpdateService.scala`).
// The offset is read int64-exact, so an unknown offset beyond 2^53 is named digit for digit in UPDATE_NOT_FOUND.

import type { FastifyInstance } from 'fastify';
import { bodyObject, fieldPath, optionalObject, relaxedInt64 } from './decode.js';
import { missingField, SandboxError } from './errors.js';
import { jsonBodyOf } from './http-conventions.js';
import type { JsonObject } from './json.js';
import type { SandboxState, StoredTransaction } from './state.js';
import { parseEventFormat, parseTransactionFormat, renderTransaction, type TransactionFormat } from './transactions.js';

/** UpdateFormat -> the transaction format it asks for (undefined: transactions not requested). */
export function parseUpdateFormat(updateFormat: JsonObject, path: string): TransactionFormat | undefined {
  const transactions = optionalObject(updateFormat, 'includeTransactions', path);
  const format =
    transactions === undefined
      ? undefined
      : parseTransactionFormat(transactions, fieldPath(path, 'includeTransactions'));
  const reassignments = optionalObject(updateFormat, 'includeReassignments', path);
  if (reassignments !== undefined) parseEventFormat(reassignments, fieldPath(path, 'includeReassignments'));
  return format;
}

export function nonPositiveOffset(offset: bigint, fieldName: string): SandboxError {
  return new SandboxError(
    'NON_POSITIVE_OFFSET',
    `Offset ${offset} in ${fieldName} is not a positive integer: the offset has to be a positive integer (>0)`,
  );
}

function updateNotFound(offset: bigint): SandboxError {
  return new SandboxError('UPDATE_NOT_FOUND', 'Update not found, or not visible.', {
    resources: [['OFFSET', offset.toString()]],
  });
}

export function transactionAt(state: SandboxState, offset: bigint): StoredTransaction | undefined {
  return offset <= BigInt(Number.MAX_SAFE_INTEGER) ? state.transactionsByOffset.get(Number(offset)) : undefined;
}

export function updateByOffset(state: SandboxState, body: JsonObject): JsonObject {
  const offset = relaxedInt64(body, 'offset', '');
  if (offset <= 0n) throw nonPositiveOffset(offset, 'offset');
  const updateFormat = optionalObject(body, 'updateFormat', '');
  if (updateFormat === undefined) throw missingField('update_format');
  const format = parseUpdateFormat(updateFormat, 'updateFormat');
  const transaction = transactionAt(state, offset);
  if (transaction === undefined || format === undefined) throw updateNotFound(offset);
  const rendered = renderVisible(transaction, format);
  if (rendered === undefined) throw updateNotFound(offset);
  return { update: { Transaction: { value: rendered } } };
}

/** The rendered transaction, or undefined when the format filters out every event. */
export function renderVisible(transaction: StoredTransaction, format: TransactionFormat): JsonObject | undefined {
  const rendered = renderTransaction(transaction, format);
  return rendered.visibleEvents === 0 ? undefined : rendered.transaction;
}

export function registerUpdateRoutes(app: FastifyInstance, state: SandboxState): void {
  app.post('/v2/updates/update-by-offset', async (request) => updateByOffset(state, bodyObject(jsonBodyOf(request))));
}
