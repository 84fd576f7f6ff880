// The audit stage: every ledger write (operations.ts `writes`) the policy audits gets an intent
// record before it is forwarded and an outcome record after its answer (or its refusal). In the
// durable mode the intent is on disk before the call is sent; when the trail cannot be written, the
// write is refused with 503 GATEWAY_AUDIT_UNAVAILABLE (failMode closed) or forwarded and counted as
// lost (open). A caller's records spend its share of the trail (caller-share.ts). Reads pass the
// stage synchronously with nothing allocated.
import { randomUUID } from 'node:crypto';
import { statfs } from 'node:fs/promises';
import type { FastifyRequest } from 'fastify';
import type { Registry } from 'prom-client';
import { decodeBody } from '../body/charset.js';
import { declaredContentType } from '../body/content-type.js';
import type { BodyBudget } from '../body/budget.js';
import { parseInTurn } from '../body/parse-turns.js';
import { declaresBody, readRequestBody, type BodyReadLimits } from '../body/read.js';
import type { AuditConfig, AuditLevelName } from '../config/schema.js';
import { Errors, GatewayError } from '../errors.js';
import { observeAnswer } from '../exchange/answer-observer.js';
import { observeParsedBody } from '../exchange/body-observer.js';
import { holdBody } from '../exchange/body-hold.js';
import { callerOf } from '../exchange/caller.js';
import type { CallStage, Exchange, Stage } from '../exchange/exchange.js';
import { traceIdOf } from '../trace-context.js';
import { onResponseClose } from '../exchange/response-close.js';
import { createAuditMetrics, type AuditMetrics } from '../telemetry/metrics.js';
import { serverSpanContextOf } from '../telemetry/server-span.js';
import { AnswerCapture } from './answer-capture.js';
import { ARCHIVE_UPLOADS, intentFields, noteBody, outcomeFields, type AuditState } from './audit-records.js';
import { CallerShare } from './caller-share.js';
import { digestSigner } from './chain.js';
import { boundedRecord, type ShortenedReason } from './record-bounds.js';
import {
  LINE_OVERHEAD_BYTES,
  openTrailWriter,
  TrailUnavailable,
  type RecordText,
  type TrailWriter,
} from './trail-writer.js';

export type AuditPolicy = AuditConfig['policy'];

export interface AuditTrailOptions {
  /** How a write's body is read when no request rule read it (limits.bodyBytes, policy.bodyReadTimeoutMs). */
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
   * GATEWAY_AUDIT_UNAVAILABLE (failMode closed) when it cannot be, or GATEWAY_AUDIT_SHARE_EXHAUSTED
   * when its caller is over its share of the trail (failMode closed).
   */
  readonly recordIntent: CallStage;
  /** A reload's policy (audit.policy): which writes, at which level. */
  setPolicy(policy: AuditPolicy): void;
  readonly writer: TrailWriter;
  close(): Promise<void>;
}

const kAudit = Symbol('ledger-gateway.audit');

type Audited = { [kAudit]?: AuditState };

/** What a record takes on disk: its text and its line's chain fields. */
const onDisk = (record: RecordText) => record.bytes + LINE_OVERHEAD_BYTES;

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

function shareExhausted(operation: string, retryAfterSeconds: number): GatewayError {
  return new GatewayError(
    Errors.GATEWAY_AUDIT_SHARE_EXHAUSTED,
    {
      cause: "This caller's writes have added their share of the audit trail for now; it was not sent.",
      context: { operation, limit: 'audit.callerBytesPerMinute' },
    },
    { headers: { 'retry-after': String(retryAfterSeconds) }, reason: 'audit: caller over its share of the trail' },
  );
}

/** The trail's writer for the audit section, its failures counted and logged. */
async function openAuditWriter(config: AuditConfig, options: AuditTrailOptions): Promise<TrailWriter> {
  const { metrics, log } = options;
  const signer = config.signingKeyFile === undefined ? undefined : digestSigner(config.signingKeyFile);
  return openTrailWriter({
    directory: config.directory,
    durable: config.durable,
    maxPendingRecords: config.maxPendingRecords,
    maxPendingBytes: config.maxPendingBytes,
    maxBatchRecords: config.maxBatchRecords,
    rotateBytes: config.rotateBytes,
    retainFiles: config.retainFiles,
    maxTrailBytes: config.maxTrailBytes,
    retryIntervalMs: config.retryIntervalMs,
    digestIntervalMs: config.digestIntervalMs,
    writeTimeoutMs: config.writeTimeoutMs,
    signer,
    ...(options.echo !== undefined && { echo: options.echo }),
    observe: {
      written: (records, bytes) => metrics.written(records, bytes),
      synced: (seconds) => metrics.synced(seconds),
      removed(files, bytes) {
        metrics.filesRemoved(files);
        log.warn({ files, bytes }, 'audit trail files removed by retention (audit.retainFiles, audit.maxTrailBytes)');
      },
      failed(error, records) {
        metrics.writeFailed();
        log.error({ err: error.message, records }, 'audit trail cannot be written');
      },
      recovered: (file) => log.warn({ file }, 'audit trail written again, in a new file'),
    },
  });
}

/** A write's state as the audit stage marks it: nothing read, nothing written yet. */
function newAuditState(
  exchange: Exchange,
  level: Exclude<AuditLevelName, 'none'>,
  responseCaptureBytes: number,
  isTrustedProxy: (address: string) => boolean,
): AuditState {
  return {
    level,
    started: performance.now(),
    intentId: randomUUID(),
    traceId: exchange.traceContext?.traceId ?? serverSpanContextOf(exchange)?.traceId ?? traceIdOf(exchange),
    caller: callerOf(exchange.principal, exchange.raw, isTrustedProxy),
    intent: 'unsent',
    handedOver: false,
    overShare: false,
    request: undefined,
    bodyText: undefined,
    bodyOmittedBytes: undefined,
    capture: new AnswerCapture(responseCaptureBytes),
  };
}

/** The volume holding the trail's directory, for the gauges (undefined when statfs fails). */
async function volumeOf(directory: string): Promise<{ freeBytes: number; sizeBytes: number } | undefined> {
  try {
    const fs = await statfs(directory);
    return { freeBytes: fs.bavail * fs.bsize, sizeBytes: fs.blocks * fs.bsize };
  } catch {
    return undefined;
  }
}

/**
 * Reads the identifying fields (and, at level body, the body itself) of a write's JSON body into its
 * state when no request rule parsed it (noted then by the parsed-body hook): at once when there is
 * none, else once it is read.
 */
function readAuditedFields(
  request: FastifyRequest,
  state: AuditState,
  options: AuditTrailOptions,
  maxRecordBytes: number,
): Promise<void> | undefined {
  if (state.request !== undefined || state.level === 'metadata' || ARCHIVE_UPLOADS.has(request.operation.name))
    return undefined;
  if (request.rawBody === undefined && declaresBody(request.headers)) {
    // Held until the exchange ends, counted against the gateway's body budget as the policy's are.
    const hold = holdBody(options.bodyBudget, request, options.isTrustedProxy);
    return readRequestBody(request.raw, options.bodyLimits, hold).then((bytes) => {
      request.rawBody = bytes;
      return noteParsedObject(request, state, options, maxRecordBytes);
    });
  }
  return noteParsedObject(request, state, options, maxRecordBytes);
}

/** Parses the body's bytes for the record: a large body in a turn of its own (body/parse-turns.ts). */
function noteParsedObject(
  request: FastifyRequest,
  state: AuditState,
  options: AuditTrailOptions,
  maxRecordBytes: number,
): Promise<void> | undefined {
  const bytes = request.rawBody;
  if (bytes === undefined || bytes.length === 0) return undefined;
  const caller = callerOf(request.principal, request.raw, options.isTrustedProxy);
  const noted = parseInTurn(caller, bytes.length, () => {
    let body: unknown;
    try {
      body = JSON.parse(decodeBody(bytes, declaredContentType(request.raw.rawHeaders)?.parameters.charset));
    } catch {
      return; // an unreadable body: the participant will refuse it; the attempt is still recorded
    }
    if (body !== null && typeof body === 'object' && !Array.isArray(body))
      noteBody(state, body as Record<string, unknown>, maxRecordBytes);
  });
  return noted instanceof Promise ? noted : undefined;
}

/**
 * The audit trail of ledger writes when `section` enables it, else undefined: its metrics in
 * `registry`, and its stdout copy (audit.stdout) written the request lines' way (`writeRaw`).
 */
export function startAuditTrail(
  section: AuditConfig,
  bodyLimits: BodyReadLimits,
  surroundings: Pick<AuditTrailOptions, 'bodyBudget' | 'isTrustedProxy' | 'log'> & {
    readonly registry: Registry;
    readonly exemplars: boolean;
    readonly writeRaw: ((line: string) => void) | undefined;
  },
): Promise<AuditTrail> | undefined {
  if (!section.enabled) return undefined;
  const { bodyBudget, isTrustedProxy, log, writeRaw } = surroundings;
  return createAuditTrail(section, {
    bodyLimits,
    bodyBudget,
    isTrustedProxy,
    metrics: createAuditMetrics(surroundings.registry, surroundings.exemplars),
    log,
    ...(section.stdout && writeRaw !== undefined && { echo: writeRaw }),
  });
}

export async function createAuditTrail(config: AuditConfig, options: AuditTrailOptions): Promise<AuditTrail> {
  const { metrics, isTrustedProxy } = options;
  const writer = await openAuditWriter(config, options);
  metrics.watch({
    writable: () => writer.writable,
    pendingBytes: () => writer.pendingBytes,
    trailBytes: () => writer.bytesOnDisk,
    maxTrailBytes: config.maxTrailBytes,
    volume: () => volumeOf(config.directory),
  });
  const share = new CallerShare(config.callerBytesPerMinute);
  let policy = config.policy;
  const failOpen = config.failMode === 'open';
  const { maxRecordBytes } = config;

  const levelOf = (operation: string): AuditLevelName => policy.levels[operation] ?? policy.defaultLevel;

  /** The intent's text within its bounds; `shorten`: its caller is over its share (failMode open). */
  function intentText(exchange: Exchange, state: AuditState, late: boolean, shorten?: ShortenedReason): RecordText {
    const fields = intentFields(exchange, state, isTrustedProxy, late);
    const omittedBody = state.bodyOmittedBytes !== undefined && shorten === undefined;
    const record = boundedRecord(
      omittedBody
        ? { ...fields, shortened: { reason: 'maxRecordBytes', bytes: state.bodyOmittedBytes, omitted: ['body'] } }
        : fields,
      maxRecordBytes,
      state.bodyText,
      shorten,
    );
    const reason = record.shortened ?? (omittedBody ? 'maxRecordBytes' : undefined);
    if (reason !== undefined) metrics.shortened(reason);
    return record;
  }

  function outcome(exchange: Exchange, state: AuditState): void {
    if (state.intent === 'refused') return; // over its caller's share: in the access log, not the trail
    const intent =
      state.intent === 'written'
        ? undefined
        : intentText(exchange, state, state.handedOver, state.overShare ? 'callerShare' : undefined);
    const record = boundedRecord(outcomeFields(exchange, state), maxRecordBytes);
    const bytes = onDisk(record) + (intent === undefined ? 0 : onDisk(intent));
    // A write that was not forwarded is recorded within its caller's share; one forwarded always.
    if (state.handedOver) share.spend(state.caller, bytes);
    else if (!share.take(state.caller, bytes)) {
      metrics.shareExceeded();
      return;
    }
    // Nobody waits for these: they join the next batch of intents (or are written within 20 ms).
    // A late intent that fails is not counted again (its write was counted when it was forwarded).
    if (intent !== undefined) writer.appendLater(intent, () => share.refund(state.caller, onDisk(intent)));
    writer.appendLater(record, () => {
      share.refund(state.caller, onDisk(record));
      if (state.handedOver) metrics.lost('outcome');
    });
  }

  function recordIntent(request: FastifyRequest, state: AuditState): Promise<void> {
    const reading = readAuditedFields(request, state, options, maxRecordBytes);
    return reading === undefined ? writeIntent(request, state) : reading.then(() => writeIntent(request, state));
  }

  async function writeIntent(request: FastifyRequest, state: AuditState): Promise<void> {
    const operation = request.operation.name;
    let record = intentText(request, state, false);
    if (!share.take(state.caller, onDisk(record))) {
      metrics.shareExceeded();
      if (!failOpen) {
        state.intent = 'refused';
        throw shareExhausted(operation, share.retryAfterSeconds(state.caller, onDisk(record)));
      }
      state.overShare = true;
      record = intentText(request, state, false, 'callerShare');
      share.spend(state.caller, onDisk(record));
    }
    try {
      await writer.append(record);
      state.intent = 'written';
    } catch (error) {
      state.intent = 'lost';
      share.refund(state.caller, onDisk(record));
      if (!(error instanceof TrailUnavailable)) throw error;
      if (!failOpen) {
        metrics.refused(operation);
        throw auditUnavailable(operation, error.message);
      }
      metrics.lost('intent'); // once per write: forwarded without its intent on disk
    }
    state.handedOver = true;
  }

  return {
    stage(exchange) {
      if (!exchange.operation.writes || exchange.kind !== 'call') return;
      const level = levelOf(exchange.operation.name);
      if (level === 'none') return;
      const state = newAuditState(exchange, level, config.responseCaptureBytes, isTrustedProxy);
      (exchange as Audited)[kAudit] = state;
      observeAnswer(exchange, state.capture);
      // At level body an excerpt will not do: the body is then read whole from the bytes (readAuditedFields).
      if (level !== 'metadata')
        observeParsedBody(exchange, (body, whole) => {
          if (whole || level !== 'body') noteBody(state, body, maxRecordBytes);
        });
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
