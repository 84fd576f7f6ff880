// What decoding a prepared transaction yields, the bounds on it and its refusal: the vocabulary the
// pool (on the event loop) shares with its worker, kept apart from the decoder
// (prepared-transaction.ts) so that the event loop never loads the protobuf bindings.
import type { CommandFacts } from './document.js';

export interface PreparedSummary {
  readonly commands: CommandFacts[];
  /** Metadata.submitter_info.act_as: the parties the transaction acts as. */
  readonly actAs: string[];
  readonly commandId: string;
  readonly synchronizerId: string;
  /** Root nodes that are neither a create, an exercise nor a fetch (a query by key, a node id with no node). */
  readonly unreadable: number;
}

/** A prepared transaction the gateway cannot read: refused with a coded error (never a crash). */
export class PreparedTransactionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PreparedTransactionError';
  }
}

/** Bounds on what one transaction may make the gateway hold or walk. */
export interface PreparedLimits {
  /** Deepest nesting of a Daml value (records, lists, variants...) turned into JSON. */
  readonly maxValueDepth: number;
  /** Most root nodes (each becomes a command of the document). */
  readonly maxRoots: number;
  /**
   * Whether the commands' arguments are read: only when a rule reads them (LedgerPolicy.readsArguments),
   * since turning a large transaction's values into JSON, and handing them back from a worker, is most of its cost.
   */
  readonly withArguments: boolean;
}

export const DEFAULT_PREPARED_LIMITS: PreparedLimits = { maxValueDepth: 256, maxRoots: 10_000, withArguments: true };

/** The body's `preparedTransaction` (base64, protobuf's JSON encoding of bytes) as bytes. */
export function preparedTransactionBytes(encoded: unknown): Uint8Array {
  if (typeof encoded !== 'string' || encoded === '' || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(encoded))
    throw new PreparedTransactionError('preparedTransaction is not a base64 string');
  return Buffer.from(encoded, 'base64');
}
