// A governed caller's body larger than the event loop parses in one go (the request rules' threshold
// for their own worker, handed down by live/generations.ts) is made into its call's decision document
// in the prepared-transaction pool's worker (prepared-pool.ts, body-document-worker.ts): its tree
// counted before it is built, parsed, an execute's prepared transaction decoded, and only the
// document handed back. Parsed here, the worst 8 MiB body held the loop for seconds (body/parse-turns.ts).
import type { BodyHold } from '../body/budget.js';
import type { TreeBounds } from '../body/tree-size.js';
import { Errors, GatewayError, type ErrorDefinition } from '../errors.js';
import type { CallInput } from './build-document.js';
import { deserialize } from 'node:v8';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { BodyDocumentTask, SlicedDocument } from './body-document-worker.js';
import type { DecisionDocument } from './document.js';
import { PreparedDecoderBusy, type PreparedDecoder } from './prepared-pool.js';

export interface LargeBodyReading {
  /** Bodies larger than this are read off the event loop (the request rules' JUDGED_IN_THREAD_BYTES). */
  readonly inThreadBytes: number;
  /** The largest tree a body may parse to (the request rules' worker's): larger is refused (413) before it is built. */
  readonly treeBounds: TreeBounds;
}

/** The worker holds the body's decoded text and its tree, each about its size, as the request rules' worker does. */
const WORKER_HOLDS_PER_BYTE = 2;

const byCode = new Map<string, ErrorDefinition>(
  Object.values(Errors).map((definition) => [definition.code, definition]),
);

/** The bytes as a view of memory of their own, to move: a read body's own (Buffer.concat), else a copy. */
function lendable(bytes: Buffer): Uint8Array {
  const whole = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
  return whole && bytes.buffer instanceof ArrayBuffer ? new Uint8Array(bytes.buffer) : new Uint8Array(bytes);
}

export interface LargeBodyCall {
  readonly input: Omit<CallInput, 'body' | 'prepared'>;
  readonly bytes: Buffer;
  readonly charset: string | undefined;
  readonly maxDepth: number;
  readonly executes: boolean;
  /** Whether a rule or a budget reads the commands' arguments. */
  readonly withArguments: boolean;
  /** Takes the bytes back from the worker, whatever it made of them (a dry run forwards even an unreadable body). */
  readonly bytesBack: (bytes: Buffer) => void;
}

/**
 * The call's document; its bytes, lent to the worker, come back through `bytesBack` (to be forwarded
 * as received). Throws the body's refusal as on the event loop (not JSON, too deep, a prepared
 * transaction unreadable), 413 for a tree too large, or GATEWAY_LEDGER_POLICY_UNAVAILABLE when the
 * pool is full or late (the bytes are then lost with the call, which is refused).
 */
export async function documentOffThread(
  decoder: PreparedDecoder,
  reading: LargeBodyReading,
  call: LargeBodyCall,
  hold: BodyHold,
): Promise<DecisionDocument> {
  // What the worker holds beside the bytes counts against the body budget while it works.
  const beside = WORKER_HOLDS_PER_BYTE * call.bytes.length;
  const refused = hold.takeBeside(beside);
  if (refused !== undefined) throw refused;
  const task: Omit<BodyDocumentTask, 'prepared'> = {
    input: call.input,
    bytes: lendable(call.bytes),
    charset: call.charset,
    maxDepth: call.maxDepth,
    treeBounds: reading.treeBounds,
    withArguments: call.withArguments,
  };
  try {
    const outcome = await decoder.documentOfBody(task, call.executes).catch((error: unknown) => {
      if (!(error instanceof PreparedDecoderBusy)) throw error;
      throw new GatewayError(Errors.GATEWAY_LEDGER_POLICY_UNAVAILABLE, {}, { reason: error.message });
    });
    call.bytesBack(Buffer.from(outcome.bytes.buffer, outcome.bytes.byteOffset, outcome.bytes.byteLength));
    if ('refused' in outcome)
      throw new GatewayError(
        byCode.get(outcome.refused.code) ?? Errors.GATEWAY_INTERNAL_ERROR,
        outcome.refused.details,
      );
    if ('invalidPrepared' in outcome)
      throw new GatewayError(Errors.GATEWAY_PREPARED_TRANSACTION_UNREADABLE, { cause: outcome.invalidPrepared });
    return await assembled(outcome);
  } finally {
    hold.giveBackBeside(beside); // the slices, copied, are the document's now
  }
}

/** The document with its sliced lists filled in, one slice a turn of the event loop, so that other calls go between. */
async function assembled({ document, slices }: SlicedDocument): Promise<DecisionDocument> {
  if (slices.length === 0) return document;
  const lists = { commands: [...document.commands], disclosedContracts: [...document.disclosedContracts] };
  for (const slice of slices) {
    await nextTurn();
    lists[slice.list].push(...(deserialize(slice.bytes) as never[]));
  }
  return { ...document, ...lists };
}
