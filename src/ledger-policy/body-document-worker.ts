// In the prepared-transaction pool's worker (prepared-worker.ts exports it): a governed caller's large
// body made into its call's decision document off the event loop (large-body-document.ts asks for it).
// The tree is counted before it is built (body/tree-size.ts), then parsed, an execute's prepared
// transaction decoded, and the document built by the same decisionDocument as on the event loop, every
// part read (plainDocument); only the document goes back (its commands' arguments only when something
// reads them), with the bytes lent.
// Its long lists go back in slices, each copied onto the event loop in a turn of its own: copied in
// one piece, 100,000 commands held the loop up to 1.4 s (docs/performance.md).
import { serialize } from 'node:v8';
import { move, transferableSymbol, valueSymbol } from 'piscina';
import { decodeBody } from '../body/charset.js';
import { parseJsonObject } from '../body/json.js';
import type { TreeBounds } from '../body/tree-size.js';
import { GatewayError, type ErrorDetails } from '../errors.js';
import { decisionDocument, plainDocument, type CallInput } from './build-document.js';
import type { DecisionDocument, TemplateRef } from './document.js';
import { PreparedTransactionError, preparedTransactionBytes, type PreparedLimits } from './prepared-summary.js';
import { summarizePreparedTransaction } from './prepared-transaction.js';

export interface BodyDocumentTask {
  /** The call as the document reads it, without its body (plain data, copied to the worker). */
  readonly input: Omit<CallInput, 'body' | 'prepared'>;
  /** The body's bytes, lent to this thread (moved, not copied) and moved back with the outcome. */
  readonly bytes: Uint8Array;
  readonly charset: string | undefined;
  readonly maxDepth: number;
  /** How large the parsed tree may be (past it: 413 before it is built), as the request rules' worker's. */
  readonly treeBounds: TreeBounds;
  /** Set for an execute: its preparedTransaction is decoded with these bounds. */
  readonly prepared: PreparedLimits | undefined;
  /** Whether the commands' arguments go back (a rule or a budget reads them): handing them back costs the event loop. */
  readonly withArguments: boolean;
}

/** A catalogue error crosses the thread as its code and details: the pool's caller rebuilds it from errors.ts. */
export interface BodyRefusal {
  readonly code: string;
  readonly details: ErrorDetails;
}

/** A document's lists that grow with the body, each handed back in slices past SLICE_ITEMS items. */
export type SlicedList = 'commands' | 'disclosedContracts';
const SLICED: readonly SlicedList[] = ['commands', 'disclosedContracts'];
/** Items of one slice: copying a slice of commands back costs the event loop a few milliseconds. */
export const SLICE_ITEMS = 2_000;

/** The document, its sliced lists left empty and sent beside as serialized slices (node:v8), in order. */
export interface SlicedDocument {
  readonly document: DecisionDocument;
  readonly slices: ReadonlyArray<{ readonly list: SlicedList; readonly bytes: Uint8Array }>;
}

type Verdict = SlicedDocument | { readonly refused: BodyRefusal } | { readonly invalidPrepared: string };

export type BodyDocumentOutcome = Verdict & { readonly bytes: Uint8Array };

/** The document without the commands' arguments, read by nothing this call runs. */
function withoutArguments(document: DecisionDocument): DecisionDocument {
  return {
    ...document,
    commands: document.commands.map((command) => ({
      ...command,
      createArguments: null,
      choiceArgument: null,
      contractKey: null,
    })),
  };
}

function documentOf(task: BodyDocumentTask): Verdict {
  let body: unknown;
  try {
    const bytes = Buffer.from(task.bytes.buffer, task.bytes.byteOffset, task.bytes.byteLength);
    body = parseJsonObject(decodeBody(bytes, task.charset), {
      maxDepth: task.maxDepth,
      exactNumbers: [],
      treeBounds: task.treeBounds,
    }).value;
  } catch (error) {
    if (!(error instanceof GatewayError)) throw error;
    return { refused: { code: error.definition.code, details: error.details } };
  }
  let prepared;
  if (task.prepared !== undefined) {
    try {
      const encoded = (body as { preparedTransaction?: unknown }).preparedTransaction;
      prepared = summarizePreparedTransaction(preparedTransactionBytes(encoded), task.prepared);
    } catch (error) {
      if (!(error instanceof PreparedTransactionError)) throw error;
      return { invalidPrepared: error.message };
    }
  }
  const document = plainDocument(
    decisionDocument({ ...task.input, body, ...(prepared === undefined ? {} : { prepared }) }),
  );
  return sliced(sharingTemplates(task.withArguments ? document : withoutArguments(document)));
}

/**
 * The document with one TemplateRef per template named (a large body names few templates many times):
 * copied back, a shared object is one object, and the copy on the event loop that much smaller.
 */
function sharingTemplates(document: DecisionDocument): DecisionDocument {
  const refs = new Map<string, TemplateRef>();
  const shared = (ref: TemplateRef | undefined) => {
    if (ref === undefined) return undefined;
    const known = refs.get(ref.templateId);
    if (known !== undefined && known.packageName === ref.packageName && known.packageId === ref.packageId) return known;
    refs.set(ref.templateId, ref);
    return ref;
  };
  return {
    ...document,
    commands: document.commands.map((command) => ({ ...command, template: shared(command.template) })),
    disclosedContracts: document.disclosedContracts.map((contract) => ({
      ...contract,
      template: shared(contract.template),
    })),
  };
}

function sliced(document: DecisionDocument): SlicedDocument {
  const slices: Array<SlicedDocument['slices'][number]> = [];
  const emptied: Record<string, never[]> = {};
  for (const list of SLICED) {
    const items: readonly unknown[] = document[list];
    if (items.length <= SLICE_ITEMS) continue;
    emptied[list] = [];
    for (let at = 0; at < items.length; at += SLICE_ITEMS)
      slices.push({ list, bytes: new Uint8Array(serialize(items.slice(at, at + SLICE_ITEMS))) });
  }
  return { document: { ...document, ...emptied }, slices };
}

/** The document (or the body's refusal), and the bytes moved back (piscina's move: no copy either way). */
export function documentOfBody(task: BodyDocumentTask): unknown {
  const outcome: BodyDocumentOutcome = { ...documentOf(task), bytes: task.bytes };
  const slices = 'slices' in outcome ? outcome.slices.map((slice) => slice.bytes.buffer) : [];
  return move({ [transferableSymbol]: [task.bytes.buffer, ...slices], [valueSymbol]: outcome });
}
