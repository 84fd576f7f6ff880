// The audit stage: every ledger write (operations.ts `writes`) the policy audits gets an intent
// record before it is forwarded and an outcome record after its answer (or its refusal). In the
// durable mode the intent is on disk before the call is sent; when the trail cannot be written, the
// write is refused with 503 GATEWAY_AUDIT_UNAVAILABLE (failMode closed) or forwarded and counted as
// lost (open). Reads pass the stage synchronously with nothing allocated.
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import type { FastifyRequest } from 'fastify';
import { decodeBody } from '../body/charset.js';
import { declaredContentType } from '../body/content-type.js';
import type { BodyBudget } from '../body/budget.js';
import { readRequestBody, type BodyReadLimits } from '../body/read.js';
import type { AuditConfig, AuditLevelName } from '../config/schema.js';
import { CLIENT_CLOSED_STATUS, ErrorCodeLabels, Errors, GatewayError, outcomeCode } from '../errors.js';
import { observeAnswer } from '../exchange/answer-observer.js';
import { callerOf, clientAddress } from '../exchange/caller.js';
import type { CallStage, Exchange, Stage } from '../exchange/exchange.js';
import { traceIdOf } from '../trace-context.js';
import { onResponseClose } from '../exchange/response-close.js';
import { pathOf } from '../operations.js';
import { redactSecrets } from '../telemetry/logging.js';
import type { AuditMetrics } from '../telemetry/metrics.js';
import { serverSpanContextOf } from '../telemetry/server-span.js';
import { digestSigner } from './chain.js';
import { AnswerCapture } from './answer-capture.js';
import { identifyingFields } from './request-fields.js';
import { openTrailWriter, TrailUnavailable, type RecordBody, type TrailWriter } from './trail-writer.js';

export type AuditPolicy = AuditConfig['policy'];

export interface AuditTrailOptions {
  /** How a write's body is read when no request rule read it (policy.maxBodyBytes, policy.bodyReadTimeoutMs). */
  readonly bodyLimits: BodyReadLimits;
  /** The gateway's budget of request bodies held in memory (body/budget.ts). */
  readonly bodyBudget: BodyBudget;
  readonly isTrustedProxy: (address: string) => boolean;
  readonly metrics: AuditMetrics;
  readonly log: { warn(object: object, message: string): void; error(object: object, message: string): void };
  /** The best-effort stdout copy of each record (audit.stdout). */
  readonly echo?: (line: string) => void;
}

export interface AuditTrail {
  /** After authorization: marks an audited write (and watches its end); reads pass untouched. */
  readonly stage: Stage;
  /**
   * The call stage right before cache-or-forward: undefined for a call not audited, else a promise
   * that settles once its intent record is written (durable: synced), or rejects with
   * GATEWAY_AUDIT_UNAVAILABLE (failMode closed) when it cannot be.
   */
  readonly recordIntent: CallStage;
  /** A reload's policy (audit.policy): which writes, at which level. */
  setPolicy(policy: AuditPolicy): void;
  readonly writer: TrailWriter;
  close(): Promise<void>;
}

const kAudit = Symbol('ledger-gateway.audit');

interface AuditState {
  readonly level: Exclude<AuditLevelName, 'none'>;
  readonly started: number;
  readonly intentId: string;
  /** The call's trace (the server span's when tracing runs), read once for both records. */
  readonly traceId: string | null;
  /** unsent: no intent yet; written: on disk; lost: could not be written. */
  intent: 'unsent' | 'written' | 'lost';
  forwarded: boolean;
  request: Record<string, unknown> | undefined;
  body: unknown;
  readonly capture: AnswerCapture;
}

type Audited = { [kAudit]?: AuditState };

/** Operations whose body is a package archive, never parsed. */
const ARCHIVE_UPLOADS: ReadonlySet<string> = new Set(['postV2Dars', 'postV2Packages']);

function hasBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

function auditUnavailable(operation: string, cause: string): GatewayError {
  return new GatewayError(
    Errors.GATEWAY_AUDIT_UNAVAILABLE,
    {
      cause: 'The gateway cannot record this write in its audit trail right now; it was not sent.',
      context: { operation },
    },
    { headers: { 'retry-after': '1' }, reason: `audit: ${cause}` },
  );
}

/** The trail's writer for the audit section, its failures counted and logged. */
async function openAuditWriter(config: AuditConfig, options: AuditTrailOptions): Promise<TrailWriter> {
  const { metrics, log } = options;
  const signer = config.signingKeyFile === undefined ? undefined : digestSigner(await readFile(config.signingKeyFile));
  return openTrailWriter({
    directory: config.directory,
    durable: config.durable,
    maxPendingRecords: config.maxPendingRecords,
    maxBatchRecords: config.maxBatchRecords,
    rotateBytes: config.rotateBytes,
    retainFiles: config.retainFiles,
    retryIntervalMs: config.retryIntervalMs,
    digestIntervalMs: config.digestIntervalMs,
    writeTimeoutMs: config.writeTimeoutMs,
    signer,
    ...(options.echo !== undefined && { echo: options.echo }),
    observe: {
      written: (records, bytes) => metrics.written(records, bytes),
      synced: (seconds) => metrics.synced(seconds),
      failed(error, records) {
        metrics.writeFailed();
        log.error({ err: error.message, records }, 'audit trail cannot be written');
      },
      recovered: (file) => log.warn({ file }, 'audit trail written again, in a new file'),
    },
  });
}

/** Who asked for which write, and (by level) what it said. */
function intentRecord(exchange: Exchange, state: AuditState, isTrustedProxy: (address: string) => boolean) {
  const raw = exchange.raw;
  const principal = exchange.principal;
  const record: RecordBody & Record<string, unknown> = {
    kind: 'intent',
    time: new Date().toISOString(),
    id: state.intentId,
    requestId: exchange.id,
    traceId: state.traceId,
    operation: exchange.operation.name,
    level: state.level,
    clientAddress: clientAddress(raw.socket.remoteAddress ?? '', raw.headers['x-forwarded-for'], isTrustedProxy),
    principal: principal === null ? null : { issuer: principal.issuer ?? null, subject: principal.subject },
    method: raw.method,
    path: pathOf(raw.url ?? ''),
  };
  if (state.level !== 'metadata' && state.request !== undefined) record.request = state.request;
  if (state.level === 'body' && state.body !== undefined) record.body = state.body;
  return record;
}

/** How a write ended: its status and error code (a client that left included) and what its answer named. */
function outcomeRecord(exchange: Exchange, state: AuditState) {
  const response = exchange.lifeline as ServerResponse;
  const clientLeft = !response.writableFinished;
  const status = clientLeft && !response.headersSent ? CLIENT_CLOSED_STATUS : response.statusCode;
  const errorCode = clientLeft
    ? (exchange.errorCode ?? ErrorCodeLabels.clientClosedRequest)
    : status < 400
      ? null
      : outcomeCode(status, exchange.errorCode);
  return {
    kind: 'outcome',
    time: new Date().toISOString(),
    id: randomUUID(),
    intentId: state.intentId,
    requestId: exchange.id,
    traceId: state.traceId,
    operation: exchange.operation.name,
    forwarded: state.forwarded,
    status,
    errorCode,
    durationMs: Math.round((performance.now() - state.started) * 1000) / 1000,
    ...(state.forwarded && state.capture.fields(response.writableFinished)),
  };
}

/**
 * Reads the identifying fields (and, at level body, the body itself) of a write's JSON body into its
 * state: at once when the policy already parsed the body or there is none, else once it is read.
 */
function readAuditedFields(
  request: FastifyRequest,
  state: AuditState,
  options: AuditTrailOptions,
): Promise<void> | undefined {
  if (state.level === 'metadata' || ARCHIVE_UPLOADS.has(request.operation.name)) {
    if (hasBody(request)) state.request = { contentLength: Number(request.headers['content-length'] ?? NaN) || null };
    return undefined;
  }
  if (request.rawBody === undefined && hasBody(request)) {
    // Held until the exchange ends, counted against the gateway's body budget as the policy's are.
    const hold = options.bodyBudget.hold(callerOf(request.principal, request.raw, options.isTrustedProxy));
    onResponseClose(request.lifeline, hold.release);
    return readRequestBody(request.raw, options.bodyLimits, hold).then((bytes) => {
      request.rawBody = bytes;
      noteBodyFields(request, state);
    });
  }
  noteBodyFields(request, state);
  return undefined;
}

/** The body's identifying fields, from the policy's parse when it made one (a rule-checked route). */
function noteBodyFields(request: FastifyRequest, state: AuditState): void {
  const body = request.jsonBody ?? parsedObject(request);
  if (body === undefined) {
    state.request = request.rawBody === undefined || request.rawBody.length === 0 ? {} : { unreadableBody: true };
    return; // an unreadable body: the participant will refuse it; the attempt is still recorded
  }
  state.request = identifyingFields(body);
  if (state.level === 'body') state.body = redactSecrets(body);
}

function parsedObject(request: FastifyRequest): Record<string, unknown> | undefined {
  if (request.rawBody === undefined || request.rawBody.length === 0) return undefined;
  try {
    const text = decodeBody(request.rawBody, declaredContentType(request.raw.rawHeaders)?.parameters.charset);
    const body = JSON.parse(text) as unknown;
    return body !== null && typeof body === 'object' && !Array.isArray(body)
      ? (body as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

export async function createAuditTrail(config: AuditConfig, options: AuditTrailOptions): Promise<AuditTrail> {
  const { metrics } = options;
  const writer = await openAuditWriter(config, options);
  metrics.watchWritable(() => writer.writable);
  let policy = config.policy;
  const failOpen = config.failMode === 'open';

  const levelOf = (operation: string): AuditLevelName => policy.levels[operation] ?? policy.defaultLevel;

  function outcome(exchange: Exchange, state: AuditState): void {
    const record = outcomeRecord(exchange, state);
    // Nobody waits for these: they join the next batch of intents (or are written within 20 ms).
    if (state.intent !== 'written')
      writer.appendLater(
        { ...intentRecord(exchange, state, options.isTrustedProxy), ...(state.intent === 'lost' && { late: true }) },
        () => metrics.lost('intent'),
      );
    writer.appendLater(record, () => metrics.lost('outcome'));
  }

  function recordIntent(request: FastifyRequest, state: AuditState): Promise<void> {
    const reading = readAuditedFields(request, state, options);
    return reading === undefined ? writeIntent(request, state) : reading.then(() => writeIntent(request, state));
  }

  async function writeIntent(request: FastifyRequest, state: AuditState): Promise<void> {
    try {
      await writer.append(intentRecord(request, state, options.isTrustedProxy));
      state.intent = 'written';
    } catch (error) {
      state.intent = 'lost';
      if (!(error instanceof TrailUnavailable)) throw error;
      if (!failOpen) {
        metrics.refused(request.operation.name);
        throw auditUnavailable(request.operation.name, error.message);
      }
      metrics.lost('intent');
    }
    state.forwarded = true;
  }

  return {
    stage(exchange) {
      if (!exchange.operation.writes || exchange.kind !== 'call') return;
      const level = levelOf(exchange.operation.name);
      if (level === 'none') return;
      const state: AuditState = {
        level,
        started: performance.now(),
        intentId: randomUUID(),
        traceId: exchange.traceContext?.traceId ?? serverSpanContextOf(exchange)?.traceId ?? traceIdOf(exchange),
        intent: 'unsent',
        forwarded: false,
        request: undefined,
        body: undefined,
        capture: new AnswerCapture(config.responseCaptureBytes),
      };
      (exchange as Audited)[kAudit] = state;
      observeAnswer(exchange, state.capture);
      onResponseClose(exchange.lifeline, () => outcome(exchange, state));
    },
    recordIntent(call) {
      if (!call.operation.writes) return undefined;
      const state = (call as Audited)[kAudit];
      return state === undefined ? undefined : recordIntent(call, state);
    },
    setPolicy(next) {
      policy = next;
    },
    writer,
    close: () => writer.close(),
  };
}
