// What an audited write's two records say: the intent (who asked for which write, from where, and
// by level what it said) and the outcome (whether it was sent, how it ended, what the participant's
// answer named), each within its bounds in bytes (record-bounds.ts).
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { FastifyRequest } from 'fastify';
import type { AuditLevelName } from '../config/schema.js';
import { CLIENT_CLOSED_STATUS, ErrorCodeLabels, outcomeCode } from '../errors.js';
import { clientAddress } from '../exchange/caller.js';
import type { Exchange } from '../exchange/exchange.js';
import { pathOf } from '../operations.js';
import { redactSecrets } from '../telemetry/logging.js';
import type { AnswerCapture } from './answer-capture.js';
import type { RecordFields } from './chain-writer.js';
import { Cuts } from './record-bounds.js';
import { identifyingFields } from './request-fields.js';

/** How far an audited write got, and what its intent will say: one per write, on its exchange. */
export interface AuditState {
  readonly level: Exclude<AuditLevelName, 'none'>;
  readonly started: number;
  readonly intentId: string;
  /** The call's trace (the server span's when tracing runs), read once for both records. */
  readonly traceId: string | null;
  /** Whose share of the trail its records spend (exchange/caller.ts). */
  caller: string;
  /** unsent: no intent yet; written: on disk; lost: could not be written; refused: over its caller's share (failMode closed). */
  intent: 'unsent' | 'written' | 'lost' | 'refused';
  /** Handed to the forwarder: from here the participant may receive it. */
  handedOver: boolean;
  /** Over its caller's share in failMode open: its records keep only their ids. */
  overShare: boolean;
  /** The identifying fields (level request and body), read when the body was parsed. */
  request: Record<string, unknown> | undefined;
  /** Level body: the body, secret-named keys redacted, as JSON within audit.maxRecordBytes. */
  bodyText: string | undefined;
  /** Level body: the body's size when it was over audit.maxRecordBytes (not kept). */
  bodyOmittedBytes: number | undefined;
  readonly capture: AnswerCapture;
}

/** Operations whose body is a package archive, never parsed. */
export const ARCHIVE_UPLOADS: ReadonlySet<string> = new Set(['postV2Dars', 'postV2Packages']);

export function hasBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * Notes what the intent will say of a parsed body, at once (nothing of the body is kept but its
 * fields, and at level body its redacted JSON when it fits a record).
 */
export function noteBody(state: AuditState, body: Record<string, unknown>, maxRecordBytes: number): void {
  if (state.request !== undefined || state.level === 'metadata') return;
  state.request = identifyingFields(body);
  if (state.level !== 'body') return;
  const text = JSON.stringify(redactSecrets(body));
  const bytes = Buffer.byteLength(text);
  if (bytes <= maxRecordBytes) state.bodyText = text;
  else state.bodyOmittedBytes = bytes;
}

/** What the intent says of a body it read no fields from: an upload's length, or that it was unreadable. */
export function unreadFields(request: FastifyRequest, state: AuditState): Record<string, unknown> | undefined {
  if (state.level === 'metadata') return undefined;
  if (ARCHIVE_UPLOADS.has(request.operation.name))
    return hasBody(request) ? { contentLength: Number(request.headers['content-length'] ?? NaN) || null } : undefined;
  if (request.rawBody !== undefined) return request.rawBody.length === 0 ? {} : { unreadableBody: true };
  return hasBody(request) ? { unreadableBody: true } : {};
}

/** Who asked for which write, and (by level) what it said; `late`: written after it was forwarded. */
export function intentFields(
  exchange: Exchange,
  state: AuditState,
  isTrustedProxy: (address: string) => boolean,
  late: boolean,
): RecordFields {
  const raw = exchange.raw;
  const principal = exchange.principal;
  const cuts = new Cuts();
  const record: Record<string, unknown> = {
    kind: 'intent',
    time: new Date().toISOString(),
    id: state.intentId,
    requestId: exchange.id,
    traceId: state.traceId,
    operation: exchange.operation.name,
    level: state.level,
    clientAddress: clientAddress(raw.socket.remoteAddress ?? '', raw.headers['x-forwarded-for'], isTrustedProxy),
    principal:
      principal === null
        ? null
        : {
            issuer: principal.issuer === undefined ? null : cuts.text('principal', principal.issuer),
            subject: cuts.text('principal', principal.subject),
          },
    consumer: principal?.consumer ?? null, // a configured name (at most 63 characters): nothing to cut
    method: raw.method,
    path: cuts.text('path', pathOf(raw.url ?? '')),
  };
  // The ledger policy's decision, when a policy names the caller (its names come from the configuration).
  if (exchange.ledgerDecision !== undefined) record.ledgerPolicy = exchange.ledgerDecision;
  const request =
    state.level === 'metadata' ? undefined : (state.request ?? unreadFields(exchange as FastifyRequest, state));
  if (request !== undefined) record.request = request;
  if (late) record.late = true;
  return cuts.into(record) as RecordFields;
}

/** Why a write was not sent to the participant, when it was not. */
function notSentReason(state: AuditState, clientLeft: boolean): string {
  if (!state.handedOver) return 'refused';
  return clientLeft ? 'client left' : 'participant unreachable';
}

/** How a write ended: whether it was sent, its status and error code (a client that left included) and what its answer named. */
export function outcomeFields(exchange: Exchange, state: AuditState): RecordFields {
  const response = exchange.lifeline as ServerResponse;
  const clientLeft = !response.writableFinished;
  const status = clientLeft && !response.headersSent ? CLIENT_CLOSED_STATUS : response.statusCode;
  const errorCode = clientLeft
    ? (exchange.errorCode ?? ErrorCodeLabels.clientClosedRequest)
    : status < 400
      ? null
      : outcomeCode(status, exchange.errorCode);
  const forwarded = state.capture.wasSent;
  return {
    kind: 'outcome',
    time: new Date().toISOString(),
    id: randomUUID(),
    intentId: state.intentId,
    requestId: exchange.id,
    traceId: state.traceId,
    operation: exchange.operation.name,
    forwarded,
    ...(!forwarded && { reason: notSentReason(state, clientLeft && !response.headersSent) }),
    status,
    errorCode,
    durationMs: Math.round((performance.now() - state.started) * 1000) / 1000,
    ...(forwarded && state.capture.fields(response.writableFinished)),
  };
}
