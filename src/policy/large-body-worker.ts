// The worker of the large-body pool (large-body-pool.ts): decodes, parses and judges one rule-checked
// body off the event loop, and sends back only the verdict and a bounded excerpt for the audit trail,
// never the tree (which dies with this call, in this thread's bounded heap), with the bytes it was lent.
import { move, transferableSymbol, valueSymbol } from 'piscina';
import { garbageBound } from '../body/collect.js';
import { bodyExcerpt } from '../body/excerpt.js';
import { decodeBody } from '../body/charset.js';
import { parseJsonObject } from '../body/json.js';
import type { TreeBounds } from '../body/tree-size.js';
import type { Principal } from '../exchange/exchange.js';
import { GatewayError, type ErrorDetails } from '../errors.js';
import { REQUEST_RULES } from './rules/index.js';
import type { Violation } from './violation.js';

export interface LargeBodyTask {
  /** The operation whose rule judges the body (policy/rules/index.ts). */
  readonly operation: string;
  /** The body's bytes, lent to this thread (moved, not copied) and moved back with the outcome. */
  readonly bytes: Uint8Array;
  readonly charset: string | undefined;
  readonly maxDepth: number;
  /** How large the parsed tree may be in this worker's heap (body/tree-size.ts). */
  readonly treeBounds: TreeBounds;
  readonly path: string;
  readonly principal: Principal | null;
}

/** A catalogue error crosses the thread as its code and details: the pool rebuilds it from errors.ts. */
export interface WireError {
  readonly code: string;
  readonly details: ErrorDetails;
  readonly reason?: string;
}

export type LargeBodyVerdict =
  { readonly refused: WireError } | { readonly excerpt: Record<string, unknown>; readonly violation?: WireError };

/** The verdict, and the bytes lent, given back to the exchange that forwards them. */
export type LargeBodyOutcome = LargeBodyVerdict & { readonly bytes: Uint8Array };

function wireViolation(violation: Violation): WireError {
  const details: ErrorDetails = {
    cause: violation.cause,
    context: violation.context ?? {},
    resources: violation.resources ?? [],
    ...(violation.origin !== undefined && { origin: violation.origin }),
  };
  return {
    code: violation.definition.code,
    details,
    ...(violation.reason !== undefined && { reason: violation.reason }),
  };
}

/**
 * The texts and trees judged bodies leave here are collected before they pile up (body/collect.ts):
 * a full collection of this small heap once they pass 8 MiB (after each body of 4 MiB or more).
 */
const garbage = garbageBound(8 * 1024 * 1024);

/** Judges the body, and moves its bytes back with the verdict (piscina's move: no copy either way). */
export default function judgeLargeBody(task: LargeBodyTask): unknown {
  const outcome: LargeBodyOutcome = { ...verdictOf(task), bytes: task.bytes };
  setImmediate(garbage.letGo, task.bytes.byteLength); // its text (outside the heap), once the verdict is on its way
  return move({ [transferableSymbol]: [task.bytes.buffer], [valueSymbol]: outcome });
}

function verdictOf(task: LargeBodyTask): LargeBodyVerdict {
  const rule = REQUEST_RULES.get(task.operation);
  if (rule === undefined) throw new Error(`no request rule for ${task.operation}`);
  try {
    const bytes = Buffer.from(task.bytes.buffer, task.bytes.byteOffset, task.bytes.byteLength);
    const body = parseJsonObject(decodeBody(bytes, task.charset), {
      maxDepth: task.maxDepth,
      exactNumbers: rule.exactNumbers,
      treeBounds: task.treeBounds,
    });
    const excerpt = bodyExcerpt(body.value);
    const violation = rule(body.value, { path: task.path, principal: task.principal, numberText: body.numberText });
    return violation === undefined ? { excerpt } : { excerpt, violation: wireViolation(violation) };
  } catch (error) {
    if (!(error instanceof GatewayError)) throw error;
    return { refused: { code: error.definition.code, details: error.details } };
  }
}
