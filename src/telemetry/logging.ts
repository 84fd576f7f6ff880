// pino, configured once: JSON lines, tokens never written. The app writes one line per request
// (request-telemetry.ts); this file decides what a line may contain.
import { hostname } from 'node:os';
import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import { withoutFileSecrets } from '../config/file-secrets.js';

/** Keys whose values are credentials wherever they appear (headers, claims, config, errors); any case. */
export const SECRET_KEYS: readonly string[] = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'sec-websocket-protocol',
  'token',
  'accessToken',
  'access_token',
  'idToken',
  'id_token',
  'refreshToken',
  'refresh_token',
  'jwt',
  'password',
  'secret',
  'clientSecret',
  'client_secret',
  'unsafeHmacSecret',
];

export const REDACTED = '[Redacted]';

// A bearer credential inside free text (an error message, a cause): the scheme stays, the secret goes.
// "bearer token" is the gateway's own wording for where a token came from, never a credential.
const BEARER = /\b(Bearer\s+)(?!token(?:\s|$))[^\s",;]+/gi;
const WEBSOCKET_TOKEN = /\b(jwt\.token\.)[^\s",;]+/g;
const JWT = /\beyJ[\w-]{2,}\.[\w-]{2,}\.[\w-]*/g;

/** Removes bearer tokens, JWTs and values read with ${file:...} from a text that is about to be logged. */
export function scrubSecrets(text: string): string {
  const scrubbed = withoutFileSecrets(text);
  if (
    !scrubbed.includes('Bearer') &&
    !scrubbed.includes('bearer') &&
    !scrubbed.includes('jwt.token.') &&
    !scrubbed.includes('eyJ')
  )
    return scrubbed;
  return scrubbed.replace(BEARER, `$1${REDACTED}`).replace(WEBSOCKET_TOKEN, `$1${REDACTED}`).replace(JWT, REDACTED);
}

const SECRET_KEY_NAMES: ReadonlySet<string> = new Set(SECRET_KEYS.map((name) => name.toLowerCase()));

/** Query parameters whose values are credentials (OAuth 2.0's RFC 6750 §2.3 access_token, and the like), any case. */
const SECRET_QUERY_NAMES: ReadonlySet<string> = new Set([
  ...SECRET_KEY_NAMES,
  'api_key',
  'apikey',
  'code',
  'signature',
  'sig',
  'credential',
]);

/**
 * A request target as it may be logged: every JWT-shaped part redacted (a token in a path segment or a
 * query value), and the value of every query parameter named like a credential (`access_token`,
 * `token`, `id_token`, ...). The path's other segments and the other parameters stay.
 */
export function scrubUrl(url: string): string {
  const question = url.indexOf('?');
  if (question === -1) return scrubSecrets(url);
  const query = url
    .slice(question + 1)
    .split('&')
    .map((pair) => {
      const equals = pair.indexOf('=');
      if (equals === -1) return pair;
      let name: string;
      try {
        name = decodeURIComponent(pair.slice(0, equals).replace(/\+/g, ' '));
      } catch {
        name = pair.slice(0, equals);
      }
      return SECRET_QUERY_NAMES.has(name.toLowerCase()) ? `${pair.slice(0, equals)}=${REDACTED}` : pair;
    })
    .join('&');
  return scrubSecrets(`${url.slice(0, question)}?${query}`);
}

/**
 * Redaction walks a logged object (a log line's fields, an audited body) to its full depth, within
 * bounds on the walk's own cost: what lies deeper than MAX_DEPTH, or past MAX_NODES visited, is
 * replaced whole, never written unredacted. A body is nested at most policy.maxBodyDepth (512 by
 * default) and holds well under a million values in its 1 MiB; the recursion stays within the stack.
 */
const MAX_DEPTH = 1_000;
const MAX_NODES = 1_000_000;
export const REDACTED_BEYOND_BOUND = '[Redacted: nested past the redaction bound]';

function isPlainObject(value: object): value is Record<string, unknown> {
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

/**
 * The value with every secret key's value replaced, at any depth of plain objects and arrays.
 * Copies only along the path to a secret; returns the value itself when there is none (the usual
 * case, and cheap: pino's wildcard `redact` paths cost a hundred times more per line). Other
 * objects (errors, requests) are left to their serializers, which pass their output through here.
 */
export function redactSecrets(value: unknown): unknown {
  return redactWithin(value, 0, { visited: 0 });
}

function redactWithin(value: unknown, depth: number, budget: { visited: number }): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (depth > MAX_DEPTH || ++budget.visited > MAX_NODES) return REDACTED_BEYOND_BOUND;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const redacted = redactWithin(value[i], depth + 1, budget);
      if (redacted !== value[i]) (copy ??= value.slice())[i] = redacted;
    }
    return copy ?? value;
  }
  if (!isPlainObject(value)) return value;
  let copy: Record<string, unknown> | undefined;
  for (const name in value) {
    const field = value[name];
    const redacted = SECRET_KEY_NAMES.has(name.toLowerCase())
      ? field === undefined
        ? field
        : REDACTED
      : redactWithin(field, depth + 1, budget);
    if (redacted !== field) (copy ??= { ...value })[name] = redacted;
  }
  return copy ?? value;
}

function serializeError(error: unknown): unknown {
  const serialized = pino.stdSerializers.err(error as Error) as unknown as Record<string, unknown>;
  if (serialized === null || typeof serialized !== 'object') return serialized;
  // A fresh object of pino's (its prototype is not Object's): redacted in place, field by field.
  for (const name of Object.keys(serialized)) {
    const value = serialized[name];
    if (SECRET_KEY_NAMES.has(name.toLowerCase())) serialized[name] = REDACTED;
    else if (typeof value === 'string' && (name === 'message' || name === 'stack'))
      serialized[name] = scrubSecrets(value);
    else serialized[name] = redactSecrets(value);
  }
  return serialized;
}

/** pino's request and response serializers, their headers redacted, the request target scrubbed (scrubUrl). */
function serializeRequest(request: unknown): unknown {
  const serialized = redactSecrets(pino.stdSerializers.req(request as never)) as { url?: unknown };
  if (typeof serialized?.url === 'string') serialized.url = scrubUrl(serialized.url);
  return serialized;
}
const serializeResponse = (response: unknown) => redactSecrets(pino.stdSerializers.res(response as never));

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    serializers: { err: serializeError, error: serializeError, req: serializeRequest, res: serializeResponse },
    formatters: {
      level: (label) => ({ level: label }),
      log: (object) => redactSecrets(object) as Record<string, unknown>,
    },
    timestamp: pino.stdTimeFunctions.isoTime,
    hooks: {
      logMethod(args, method) {
        for (let i = 0; i < args.length; i++) {
          if (typeof args[i] === 'string') args[i] = scrubSecrets(args[i] as string);
        }
        return method.apply(this, args);
      },
    },
  };
}

/**
 * Lines are written to stdout in batches of at least this many bytes (one write per ~100 request
 * lines; smaller batches cost more CPU per call: docs/performance.md).
 */
const WRITE_BATCH_BYTES = 32 * 1024;
/** sonic-boom needs its largest single write (maxWrite, 16 KB by default) above the batch size. */
const WRITE_MAX_BYTES = 4 * WRITE_BATCH_BYTES;
/** ...or after this long, so that a quiet gateway's lines are not held back. */
const WRITE_AT_LEAST_EVERY_MS = 1000;

/**
 * At most this much is held for stdout: a reader that stops (a blocked pipe, a stalled log
 * collector) costs lines, counted in ledger_gateway_log_lines_dropped_total, not unbounded memory.
 */
export const LOG_BUFFER_MAX_BYTES = 16 * 1024 * 1024;
/** At exit, how long writing what is held may wait for a stdout that does not take it. */
const EXIT_FLUSH_MS = 2_000;

let droppedLines = 0;
/** Log lines dropped because the destination held LOG_BUFFER_MAX_BYTES (process-wide). */
export const droppedLogLines = (): number => droppedLines;

let exitDeadline = 0;
let exitWatched = false;

/**
 * Where the process logger writes by default: stdout, asynchronously (lines are buffered and
 * written off the request path, in batches), bounded by `maxBufferBytes`. pino flushes the
 * buffer synchronously when the process exits; a non-blocking stdout that takes nothing then is
 * given up on after EXIT_FLUSH_MS (sonic-boom would otherwise retry for ever).
 */
export function logDestination(fd = 1, maxBufferBytes = LOG_BUFFER_MAX_BYTES): DestinationStream {
  if (!exitWatched) {
    exitWatched = true;
    process.prependListener('exit', () => {
      exitDeadline = Date.now() + EXIT_FLUSH_MS;
    });
  }
  const destination = pino.destination({
    dest: fd,
    sync: false,
    minLength: WRITE_BATCH_BYTES,
    maxWrite: WRITE_MAX_BYTES,
    periodicFlush: WRITE_AT_LEAST_EVERY_MS,
    maxLength: maxBufferBytes,
    retryEAGAIN: () => exitDeadline === 0 || Date.now() < exitDeadline,
  });
  // pino flushes synchronously at exit. On a non-blocking stdout that takes nothing, sonic-boom
  // would retry EAGAIN for ever: past EXIT_FLUSH_MS it gives up, and what stdout did not take is
  // dropped quietly rather than thrown from the exit handler. (A blocking stdout that takes nothing
  // blocks that write itself; the orchestrator's kill after its grace period ends it.)
  const flushSync = destination.flushSync.bind(destination);
  destination.flushSync = () => {
    try {
      flushSync();
    } catch (error) {
      if (exitDeadline === 0) throw error;
    }
  };
  destination.on('drop', (data: string | Buffer) => {
    const text = typeof data === 'string' ? data : data.toString('latin1');
    let lines = 0;
    for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) lines++;
    droppedLines += Math.max(1, lines);
  });
  return destination;
}

/**
 * Resolves once every line logged so far has been written (or after `timeoutMs`). Before the process
 * exits: pino's exit handler writes what is buffered synchronously, but not a batch whose
 * asynchronous write is still under way, which then landed after the lines logged later (or never).
 */
export function flushLog(logger: Logger, timeoutMs = EXIT_FLUSH_MS): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, timeoutMs);
    try {
      logger.flush(() => {
        clearTimeout(timer);
        resolve();
      });
    } catch {
      clearTimeout(timer); // a destroyed destination: nothing more can be written
      resolve();
    }
  });
}

/** The process logger (pino), writing to `destination`: by default logDestination(). */
export function createLogger(level: string, destination: DestinationStream = logDestination()): Logger {
  return pino(loggerOptions(level), destination);
}

/**
 * The fields of the one line every request ends with (request-telemetry.ts writes it). reqId, operation,
 * method, traceId and spanId are the gateway's own values, which never hold a character JSON
 * escapes (a UUID, a catalogue name, an HTTP method token that Node's parser accepted, hex ids):
 * they are written between quotes as they are, without JSON.stringify. errorCode and
 * reason may come from the participant or a client and are escaped.
 * The trace and span ids are written twice: as `trace_id` and `span_id`, the names of the
 * OpenTelemetry log data model's JSON mapping (what collectors and log backends join traces on),
 * and as `traceId` and `spanId`, the names the error bodies (Canton's `traceId`) and existing log
 * queries use.
 */
export interface RequestLine {
  readonly reqId: string;
  readonly operation: string;
  readonly method: string;
  readonly status: number;
  /** As the metric's error_code label: `none` for a success (a 101 included). */
  readonly errorCode: string;
  readonly durationMs: number;
  readonly traceId: string | null;
  readonly spanId: string | null;
  /** Why a stage refused the call, already scrubbed (the exchange's refusalReason). */
  readonly reason?: string;
  /** The access log's fields as JSON text (`,"name":value...`: access-log.ts), when log.access is on. */
  readonly access?: string | undefined;
}

/**
 * `new Date(ms).toISOString()`, for a clock read on every request line: the lines of one second share
 * its first 20 characters (`2026-11-22T12:53:41.`), so within the second only the milliseconds are
 * appended. Date's own formatting was over half the line's cost (a profile of the proxied call).
 */
export function isoTimeClock(): (ms: number) => string {
  let secondStart = Number.NaN;
  let prefix = '';
  return (ms) => {
    const within = ms - secondStart;
    if (within >= 0 && within < 1000 && Number.isInteger(within))
      return `${prefix}${within < 10 ? '00' : within < 100 ? '0' : ''}${within}Z`;
    const iso = new Date(ms).toISOString();
    if (iso.length === 24) {
      secondStart = ms - (((ms % 1000) + 1000) % 1000);
      prefix = iso.slice(0, 20);
    }
    return iso;
  };
}

const quotedOrNull = (value: string | null) => (value === null ? 'null' : `"${value}"`);

/** The text of a microsecond count's fraction of a millisecond: '' for 0, then '.001' … '.999' without trailing zeros. */
const MICROS_TEXT: readonly string[] = Array.from({ length: 1000 }, (_, micros) =>
  micros === 0 ? '' : `.${String(micros).padStart(3, '0').replace(/0+$/, '')}`,
);
/** '0' … '999': statuses and whole milliseconds, looked up rather than converted (V8's number-to-text cache misses here). */
const SMALL_TEXT: readonly string[] = Array.from({ length: 1000 }, (_, n) => String(n));

/** `String(n)` for an integer, from the table below 1000. */
const integerText = (n: number) => SMALL_TEXT[n] ?? String(n);

/**
 * `String(ms)` for a duration in milliseconds, without formatting a double when it is a whole number
 * of microseconds (how durations are rounded): the whole milliseconds, a small integer whose text V8
 * keeps, and a fixed fraction text (a double's shortest round-trip text costs more: docs/performance.md).
 * Below 10^15 microseconds that text has at most 15 significant digits, so the shortest
 * text JavaScript writes for the value is exactly this one (logging.test.ts compares the two).
 */
export function millisText(ms: number): string {
  const micros = Math.round(ms * 1000);
  if (micros / 1000 !== ms || !(micros >= 0 && micros < 1e15)) return String(ms);
  const whole = Math.floor(micros / 1000);
  return `${integerText(whole)}${MICROS_TEXT[micros - whole * 1000]}`;
}
const json = (value: string | null) => (value === null ? 'null' : JSON.stringify(value));

/** Error codes, escaped once each: in practice a small set (the gateway's catalogue, the participant's codes). */
const quotedCodes = new Map<string, string>();
const QUOTED_CODES_MAX = 1024;
function quotedCode(code: string | null): string {
  if (code === null) return 'null';
  let quoted = quotedCodes.get(code);
  if (quoted === undefined) {
    quoted = JSON.stringify(code);
    if (quotedCodes.size < QUOTED_CODES_MAX) quotedCodes.set(code, quoted);
  }
  return quoted;
}

export interface RequestLineWriter {
  (line: RequestLine): void;
  /** Hands the lines still held to the logger's destination and has it write them now (app close; process exit hands them over too). */
  flush(): void;
  /** flush(), and no longer flush at process exit. */
  close(): void;
  /** Writes a JSON object's text (a record of the audit trail's stdout copy) as a line among the request lines. */
  raw(json: string): void;
}

/**
 * Writes the per-request line to the logger's destination, serialized here: the line pino would
 * write for a request's child logger with these fixed fields (level label, ISO time, pid, hostname,
 * reqId, the fields, msg; logging.test.ts compares the two). It is written for every call, and
 * pino's generic path (child bindings, hooks, formatters, a serializer lookup per key) costs more:
 * kept for the CPU it saves against pino's public API, paired in docs/performance.md.
 *
 * The lines are held here and handed to the destination a batch (WRITE_BATCH_BYTES) at a time, or
 * once a second when fewer come: sonic-boom measures the UTF-8 length of what it is given and of
 * the buffer it appends to on every write (a rope, flattened each time), which cost more than the
 * lines themselves when it was given a turn's lines at a time. A line pino writes hands the held
 * request lines over first, so the order of lines is kept. At process exit the held lines are
 * handed over before pino flushes its destination.
 */
export function requestLineWriter(logger: Logger): RequestLineWriter {
  const stream = (logger as unknown as Record<symbol, DestinationStream>)[pino.symbols.streamSym]!;
  const base = `,"pid":${process.pid},"hostname":${JSON.stringify(hostname())}`;
  let pending = '';
  let timer: NodeJS.Timeout | undefined;
  // After close() (shutdown), a line of a call that ends late is handed over at once: no timer and
  // no exit hook is left to write it, and it must not come after the process's last lines.
  let closed = false;
  const isoTime = isoTimeClock();

  const writeToStream = stream.write.bind(stream);
  function handOver(): void {
    if (pending === '') return;
    const lines = pending;
    pending = '';
    writeToStream(lines);
  }
  // pino's own lines (warnings, errors) come after the request lines held before them.
  stream.write = (chunk: string) => {
    handOver();
    return writeToStream(chunk);
  };
  function flush(): void {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    handOver();
    try {
      (stream as { flush?: () => void }).flush?.(); // sonic-boom: write what it holds now, not at its next periodic flush
    } catch {
      // a destroyed destination: nothing can be written any more
    }
  }
  // Before pino's own exit handler (on-exit-leak-free), which flushes the destination synchronously.
  process.prependListener('exit', handOver);

  const write = (line: RequestLine): void => {
    if (!logger.isLevelEnabled('info')) return;
    const time = isoTime(Date.now());
    const traceId = quotedOrNull(line.traceId);
    const spanId = quotedOrNull(line.spanId);
    const reason = line.reason === undefined ? '' : `,"reason":${json(line.reason)}`;
    pending +=
      `{"level":"info","time":"${time}"${base},"reqId":"${line.reqId}","operation":"${line.operation}"` +
      `,"method":"${line.method}","status":${integerText(line.status)},"errorCode":${quotedCode(line.errorCode)}` +
      `,"durationMs":${millisText(line.durationMs)},"traceId":${traceId},"spanId":${spanId}` +
      `,"trace_id":${traceId},"span_id":${spanId}${reason}${line.access ?? ''},"msg":"request"}\n`;
    held();
  };
  function held(): void {
    if (closed || pending.length >= WRITE_BATCH_BYTES) handOver();
    else timer ??= setTimeout(flush, WRITE_AT_LEAST_EVERY_MS).unref();
  }
  return Object.assign(write, {
    flush,
    raw(json: string) {
      pending += `{"level":"info","time":"${isoTime(Date.now())}"${base},"msg":"audit","record":${json}}\n`;
      held();
    },
    close() {
      closed = true;
      flush();
      process.off('exit', handOver);
    },
  });
}
