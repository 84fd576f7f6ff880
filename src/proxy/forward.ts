// Forwarding a plain HTTP call to the participant on a keep-alive undici pool.
//
// Written on undici directly rather than through @fastify/reply-from, because reply-from (checked
// in its 12.x source): refuses to forward a GET body (Canton has GET-with-JSON-body routes, FACTS.md
// §7), re-serializes parsed JSON bodies (we must send the client's bytes: an int64 above 2^53 must
// arrive exactly), retries GETs answered 503, turns TLS verification off unless told, and maps a
// refused connection to 500. Here: bytes in = bytes out, no retries of anything non-idempotent,
// TLS always verified, every wait bounded.
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks'; // a module binding: no global lookup per call
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Pool, type Dispatcher } from 'undici';
import type { GatewayConfig } from '../config/schema.js';
import { closingConnection, Errors, GatewayError } from '../errors.js';
import { onResponseClose } from '../response-close.js';
import { gatewayHeaders, writeAnswerHead } from './answer.js';
import { clientResponseHeaders, forwardedFor, upstreamRequestHeaders } from './headers.js';
import { ErrorCodeLabels } from '../telemetry/metrics.js';
import { injectTraceContext, traceContextFields } from '../telemetry/trace-context.js';
import { ERROR_BODY_CAPTURE_BYTES, upstreamErrorCode } from './upstream-error-code.js';
import { upstreamFailure } from './upstream-failure.js';

/** Marks the readiness probe's calls in the participant's logs. */
export const READINESS_USER_AGENT = 'ledger-gateway-readiness';

export interface ForwarderOptions {
  /** The resolved participant base URL (never "sandbox"). */
  readonly upstreamUrl: string;
  readonly config: GatewayConfig;
  /** True when the tracing instrumentation injects the gateway's own traceparent upstream. */
  readonly replacesTraceContext: boolean;
  /**
   * Set when trace context is propagated without spans (telemetry/trace-context.ts): the request's
   * `traceContext` is injected in the OTEL_PROPAGATORS formats, instead of the client's headers of those formats.
   */
  readonly propagateTraceContext?: boolean;
  /** Whether answers carry the headers set on the reply (CORS configured; see answer.ts gatewayHeaders). */
  readonly replyHeaders?: boolean;
  /** Whether a connection's peer is a configured trusted proxy (its X-Forwarded-* are kept). */
  readonly isTrustedProxy: (address: string) => boolean;
  /** Called with the upstream part of each call, for the upstream latency histogram. */
  readonly onUpstreamTiming?: (request: FastifyRequest, seconds: number) => void;
}

export interface Forwarder {
  /** Settles once the answer is under way; throws at once for a declared body over the limit. */
  forward(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /** The same call as forward(), answered whole into memory (bounded): for the version cache. */
  fetchWhole(request: FastifyRequest, maxBytes: number): Promise<{ statusCode: number; headers: Record<string, string | string[]>; body: Buffer }>;
  /** GET /v2/version with a short bound: does the participant answer at all? */
  probe(timeoutMs: number): Promise<boolean>;
  /** Calls handed to the upstream pool (at most upstream.connections), and calls waiting for one of its connections. */
  load(): { inFlight: number; queued: number };
  close(): Promise<void>;
}

export function upstreamTlsOptions(config: GatewayConfig['upstream']['tls']) {
  return {
    rejectUnauthorized: true,
    ...(config.caFile !== undefined && { ca: readFileSync(config.caFile) }),
    ...(config.certFile !== undefined && { cert: readFileSync(config.certFile) }),
    ...(config.keyFile !== undefined && { key: readFileSync(config.keyFile) }),
    ...(config.serverName !== undefined && { servername: config.serverName }),
  };
}

/** Counts streamed body bytes and fails the stream once they exceed the limit. */
class BodyLimit extends Transform {
  private seen = 0;
  constructor(private readonly limit: number) {
    super();
  }
  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.seen += chunk.length;
    if (this.seen > this.limit) callback(tooLarge(this.limit));
    else callback(null, chunk);
  }
}

export function tooLarge(limit: number): GatewayError {
  return new GatewayError(Errors.GATEWAY_REQUEST_TOO_LARGE, { cause: `The request body is larger than ${limit} bytes.` });
}

/** A connection that was lost before the participant answered anything. */
const CONNECTION_LOST: ReadonlySet<string> = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE', 'UND_ERR_CLOSED']);

/** The reason a call is aborted when its client has left (never seen by anyone). */
const CLIENT_LEFT = Object.assign(new Error('the client left'), { code: 'CLIENT_LEFT' });
/** The reason a call is aborted when its answer cannot be passed on (already refused). */
const ANSWER_REFUSED = Object.assign(new Error('the answer cannot be passed on'), { code: 'BAD_ANSWER' });
/** The reason a call is aborted when its client stopped reading the answer for the call's timeout. */
const CLIENT_STALLED = Object.assign(new Error('the client stopped reading'), { code: 'CLIENT_STALLED' });

/** How often calls waiting for a free upstream connection are checked against their deadline. */
const QUEUE_SWEEP_MS = 100;

/** A call waiting for one of the pool's connections (every one busy). */
interface QueuedCall {
  readonly deadline: number;
  /** A connection is free: hand the call to the pool. */
  start(): void;
  /** Its deadline passed first: answer 503. */
  expire(): void;
}

/** What is left of a call's timeout (at least 1 ms). */
function remaining(started: number, timeout: number): number {
  return Math.max(1, Math.ceil(started + timeout - performance.now()));
}

function queueTimeout(connections: number, timeout: number): GatewayError {
  return new GatewayError(Errors.GATEWAY_UPSTREAM_UNAVAILABLE, { cause: 'No connection to the participant became free in time.' }, { reason: `QUEUE_TIMEOUT: every one of the ${connections} upstream connections stayed busy for ${timeout} ms` });
}


/** Keeps an error body's first bytes (the answer itself passes on unchanged). */
function keep(capture: { chunks: Buffer[]; size: number; truncated: boolean }, chunk: Buffer): void {
  const room = ERROR_BODY_CAPTURE_BYTES - capture.size;
  if (room <= 0) {
    capture.truncated = true;
    return;
  }
  capture.chunks.push(chunk.length <= room ? chunk : chunk.subarray(0, room));
  capture.size += Math.min(chunk.length, room);
  if (chunk.length > room) capture.truncated = true;
}

/**
 * Not sent with a version fetch: a body (never replayed), and the caller's Accept-Encoding (the
 * fetch asks for identity), so that the answer cached for every caller is one any caller can read.
 */
const VERSION_FETCH_DROPPED: ReadonlySet<string> = new Set(['content-length', 'content-type', 'accept-encoding']);

function hasBody(headers: FastifyRequest['headers']): boolean {
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

export function createForwarder(options: ForwarderOptions): Forwarder {
  const { config, upstreamUrl } = options;
  const base = new URL(upstreamUrl);
  const basePath = base.pathname.replace(/\/+$/, '');
  const pool = new Pool(base.origin, {
    connections: config.upstream.connections,
    pipelining: 1,
    keepAliveTimeout: config.upstream.keepAliveTimeoutMs,
    keepAliveMaxTimeout: config.upstream.keepAliveTimeoutMs,
    headersTimeout: config.upstream.timeoutMs,
    bodyTimeout: config.upstream.timeoutMs,
    connect: { timeout: config.upstream.connectTimeoutMs, ...upstreamTlsOptions(config.upstream.tls) },
  });
  // The readiness probe's own connection: on the traffic pool it queued behind busy connections, and
  // a saturated but healthy participant read as unready.
  const probeClient = new Pool(base.origin, {
    connections: 1,
    pipelining: 1,
    keepAliveTimeout: config.upstream.keepAliveTimeoutMs,
    keepAliveMaxTimeout: config.upstream.keepAliveTimeoutMs,
    connect: { timeout: config.upstream.connectTimeoutMs, ...upstreamTlsOptions(config.upstream.tls) },
  });
  const bodyLimit = config.limits.bodyBytes;
  const replyHeaders = options.replyHeaders ?? false;
  const timeouts = config.upstream.operationTimeoutsMs;
  const defaultTimeout = config.upstream.timeoutMs;

  // With tracing on, the undici instrumentation injects the propagators' headers (traceparent,
  // tracestate, baggage by default) for the gateway's client span; propagated without spans, the
  // forwarder does. Either way the client's copies are dropped, so the participant receives exactly
  // one of each.
  const traceHeaders = options.replacesTraceContext || options.propagateTraceContext ? traceContextFields() : undefined;
  // The pool is handed at most as many calls as it has connections; the others wait here, oldest
  // first, each until its deadline (upstream.timeoutMs, which also bounds the answer's head). In
  // undici's own queue no timeout runs (headersTimeout starts once a call is written) and a call
  // cannot be taken back before it starts: one answered 503 there kept its request and reply
  // (about 10 KB) until a connection freed.
  let dispatched = 0;
  const connections = config.upstream.connections;
  const queue = new Set<QueuedCall>(); // insertion order: a FIFO that can drop any entry
  /** A call handed to the pool has ended: the oldest waiting calls take the free connections. */
  let pumping = false;
  const pump = () => {
    pumping = false;
    const now = performance.now();
    for (const call of queue) {
      if (dispatched >= connections) return;
      queue.delete(call);
      // Past its deadline but not yet swept: answered 503 as promised, never sent.
      if (call.deadline <= now) {
        call.expire();
        continue;
      }
      dispatched++;
      call.start();
    }
  };
  const release = () => {
    dispatched--;
    // After undici's callback has returned (no dispatch from inside it), and only when calls wait.
    if (queue.size !== 0 && !pumping) {
      pumping = true;
      queueMicrotask(pump);
    }
  };
  const sweeper = setInterval(() => {
    if (queue.size === 0) return;
    const now = performance.now();
    for (const call of queue) {
      if (call.deadline > now) continue;
      queue.delete(call);
      call.expire();
    }
  }, QUEUE_SWEEP_MS);
  sweeper.unref();

  const dropped = (drop: ReadonlySet<string> | undefined) => (traceHeaders === undefined ? drop : drop === undefined ? traceHeaders : new Set([...drop, ...traceHeaders]));

  /**
   * One upstream call. A keep-alive connection the participant closed just as it was reused fails
   * before any answer; a bodiless GET or HEAD is then sent once more on a fresh connection (safe:
   * idempotent, and nothing was answered). Anything else is never retried: a submit that may have
   * reached the participant must not be sent twice.
   */
  async function requestOnce(idempotent: boolean, dispatch: Parameters<Pool['request']>[0]): ReturnType<Pool['request']> {
    try {
      return await pool.request(dispatch);
    } catch (error) {
      if (!idempotent || !CONNECTION_LOST.has((error as { code?: string }).code ?? '') || (dispatch.signal as AbortSignal | undefined)?.aborted) throw error;
      return pool.request(dispatch);
    }
  }

  function headersFor(request: FastifyRequest, drop?: ReadonlySet<string>): string[] {
    const forwarded = forwardedFor(request.raw, options.isTrustedProxy);
    const headers = upstreamRequestHeaders(request.raw.rawHeaders, forwarded, options.replacesTraceContext, dropped(drop));
    if (options.propagateTraceContext && request.traceContext !== undefined) {
      injectTraceContext(request.traceContext, headers);
    }
    return headers;
  }

  async function fetchWhole(request: FastifyRequest, maxBytes: number) {
    const timeout = timeouts[request.operation.name] ?? defaultTimeout;
    const started = performance.now();
    if (dispatched < connections) dispatched++;
    else await new Promise<void>((resolve, reject) => queue.add({ deadline: started + timeout, start: resolve, expire: () => reject(queueTimeout(connections, timeout)) }));
    try {
      return await fetchOnce(request, maxBytes, timeout, started);
    } finally {
      release();
    }
  }

  async function fetchOnce(request: FastifyRequest, maxBytes: number, timeout: number, started: number) {
    let response: Awaited<ReturnType<Pool['request']>>;
    try {
      response = await requestOnce(true, {
        path: basePath + request.raw.url!,
        method: 'GET',
        // identity: without any Accept-Encoding a server may choose any encoding (RFC 9110 §12.5.3).
        headers: [...headersFor(request, VERSION_FETCH_DROPPED), 'accept-encoding', 'identity'],
        headersTimeout: remaining(started, timeout), // a wait for a connection counts against it
        bodyTimeout: timeout,
      });
    } catch (error) {
      throw upstreamFailure(error);
    }
    options.onUpstreamTiming?.(request, (performance.now() - started) / 1000);
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of response.body) {
        size += (chunk as Buffer).length;
        if (size > maxBytes) {
          response.body.destroy();
          throw Object.assign(new Error('upstream answer too large to cache'), { code: 'ANSWER_TOO_LARGE' });
        }
        chunks.push(chunk as Buffer);
      }
    } catch (error) {
      throw upstreamFailure(error);
    }
    return { statusCode: response.statusCode, headers: clientResponseHeaders(response.headers), body: Buffer.concat(chunks, size) };
  }

  /**
   * Forwards one call and answers it from the participant's answer. Dispatched with an undici
   * handler rather than pool.request(): the answer's chunks go to the client's socket as they
   * arrive, with no Readable stream and pipe between the two (13% less CPU per proxied call,
   * measured). Resolves (with nothing: resolving with the reply, a thenable, costs Fastify another
   * turn) once the answer head is written (the reply is hijacked then) or the client has left;
   * rejects with the gateway's coded error when there is no answer to give. A body over the limit
   * throws at once (Fastify's handler turns either into the error answer). Not an async function:
   * one returning this promise would make a second promise that adopts it, two more microtasks a call.
   */
  function forward(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const raw = request.raw;
    let body: Buffer | Readable | undefined = request.rawBody;
    if (body === undefined && hasBody(raw.headers)) {
      const declared = raw.headers['content-length'];
      if (declared !== undefined && Number(declared) > bodyLimit) throw tooLarge(bodyLimit);
      // A declared length is enforced by Node's parser; a chunked body is counted as it streams.
      body = declared !== undefined ? raw : raw.pipe(new BodyLimit(bodyLimit));
    }
    // The client's body streams upstream as it arrives (not read whole by a rule-checked route).
    const streamed = body !== undefined && body !== request.rawBody;
    const timeout = timeouts[request.operation.name] ?? defaultTimeout;
    const dispatch: Dispatcher.DispatchOptions = {
      path: basePath + raw.url!,
      method: raw.method as Dispatcher.HttpMethod,
      headers: headersFor(request),
      body: body ?? null,
      headersTimeout: timeout,
      bodyTimeout: timeout,
    };
    // A keep-alive connection the participant closed just as it was reused fails before any
    // answer: a bodiless GET or HEAD is then sent once more (see requestOnce).
    let retries = body === undefined && (raw.method === 'GET' || raw.method === 'HEAD') ? 1 : 0;
    const res = reply.raw;
    const started = performance.now();

    return new Promise<void>((resolve, reject) => {
      let controller: Dispatcher.DispatchController | undefined;
      let clientLeft = false;
      let answering = false;
      let queued: QueuedCall | undefined;
      let ended = false; // handed to the pool and ended there: its connection is released
      let stalled = false;
      let stallTimer: NodeJS.Timeout | undefined;
      // The error body's first bytes, for the error code (4xx/5xx answers only).
      let capture: { chunks: Buffer[]; size: number; truncated: boolean; contentType: string | undefined } | undefined;

      // A client that goes away cancels the upstream call, before or during the answer (a submit
      // still in flight is the participant's to finish; we stop waiting for it).
      onResponseClose(res, () => {
        if (stallTimer !== undefined) clearTimeout(stallTimer);
        if (res.writableFinished) return;
        clientLeft = true;
        if (queued !== undefined) { // never handed to the pool: nothing to cancel there
          queue.delete(queued);
          queued = undefined;
          resolve();
          return;
        }
        controller?.abort(CLIENT_LEFT);
      });
      const resume = () => {
        if (stallTimer !== undefined) {
          clearTimeout(stallTimer);
          stallTimer = undefined;
        }
        controller?.resume();
      };
      const fail = (error: GatewayError) => reject(streamed && !raw.complete ? closingConnection(error) : error);
      /** The call has ended in the pool (answered, failed, aborted): its connection goes to the next. */
      const end = () => {
        if (ended) return;
        ended = true;
        release();
      };

      const handler: Dispatcher.DispatchHandler = {
        onRequestStart(current) {
          controller = current;
          if (clientLeft) current.abort(CLIENT_LEFT);
        },
        onResponseStart(current, statusCode, headers) {
          if (statusCode < 200) return; // informational (103 Early Hints): the final answer follows
          options.onUpstreamTiming?.(request, (performance.now() - started) / 1000);
          if (statusCode > 599) {
            current.abort(ANSWER_REFUSED);
            fail(upstreamFailure(Object.assign(new Error(`upstream answered status ${statusCode}`), { code: 'BAD_STATUS' })));
            return;
          }
          try {
            // The participant's headers win over the gateway's own on a clash.
            const head = clientResponseHeaders(headers, gatewayHeaders(request, reply, replyHeaders));
            // Answered before the client finished sending its body (a refusal of an upload, say):
            // the rest of it would be read as the connection's next request (RFC 9112 §9.3).
            if (streamed && !raw.complete) head.connection = 'close';
            writeAnswerHead(reply, statusCode, head);
          } catch (error) {
            current.abort(ANSWER_REFUSED);
            fail(upstreamFailure(Object.assign(new Error(`the participant's answer head cannot be sent on: ${(error as Error).message}`), { code: 'BAD_HEADERS' })));
            return;
          }
          answering = true;
          if (statusCode >= 400) {
            const contentType = headers['content-type'];
            capture = { chunks: [], size: 0, truncated: false, contentType: typeof contentType === 'string' ? contentType : undefined };
          }
          resolve();
        },
        onResponseData(current, chunk) {
          if (!answering) return;
          if (capture !== undefined) keep(capture, chunk);
          if (!res.write(chunk)) {
            current.pause();
            res.once('drain', resume);
            // A client that stops reading would hold the participant's connection (paused) for as
            // long as it liked: after the call's timeout without progress, the answer is ended.
            // (Not while the answer waits behind an earlier one on a pipelined connection: it has
            // no socket yet, and its wait is that answer's, which has its own timer.)
            if (res.socket !== null) stallTimer ??= setTimeout(() => {
              stallTimer = undefined;
              stalled = true;
              request.errorCode = ErrorCodeLabels.clientStalled;
              controller?.abort(CLIENT_STALLED);
              res.destroy();
            }, timeout);
          }
        },
        onResponseEnd() {
          end();
          if (!answering) return;
          if (capture !== undefined) request.errorCode = upstreamErrorCode(capture.contentType, Buffer.concat(capture.chunks, capture.size), capture.truncated);
          res.end();
        },
        onResponseError(_current, error) {
          if (answering) {
            end();
            if (!clientLeft && !stalled) request.errorCode = ErrorCodeLabels.upstreamAnswerBroken; // counted as such, not as the client leaving
            res.destroy(); // the answer broke off: the client sees the connection end, not a complete answer
            return;
          }
          if (!clientLeft && error !== ANSWER_REFUSED && retries > 0 && CONNECTION_LOST.has((error as { code?: string }).code ?? '')) {
            retries--;
            controller = undefined;
            pool.dispatch(dispatch, handler); // on the same slot
            return;
          }
          end();
          if (error === ANSWER_REFUSED) return; // already answered
          if (clientLeft) {
            resolve(); // nobody to answer
            return;
          }
          fail(upstreamFailure(error));
        },
      };
      if (clientLeft) { // gone already (during an asynchronous stage): nothing to send or queue
        resolve();
        return;
      }
      if (dispatched < connections) {
        dispatched++;
        pool.dispatch(dispatch, handler);
        return;
      }
      // Every connection is busy: the call waits for one, at most until its deadline.
      queue.add(queued = {
        deadline: started + timeout,
        start: () => {
          queued = undefined;
          dispatch.headersTimeout = remaining(started, timeout); // the wait counts against it
          pool.dispatch(dispatch, handler);
        },
        expire: () => {
          queued = undefined;
          fail(queueTimeout(connections, timeout));
        },
      });
    });
  }

  async function probe(timeoutMs: number): Promise<boolean> {
    try {
      const { statusCode, body } = await probeClient.request({
        path: `${basePath}/v2/version`,
        method: 'GET',
        headers: { 'user-agent': READINESS_USER_AGENT },
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        signal: AbortSignal.timeout(timeoutMs),
      });
      await body.dump();
      return statusCode < 500;
    } catch {
      return false;
    }
  }

  return {
    forward,
    fetchWhole,
    probe,
    load: () => ({ inFlight: dispatched, queued: queue.size }),
    // Called once the API listener is closed: what is still running upstream has nobody to answer
    // (a version refresh, a call whose client was cut at the end of the grace), so it is aborted,
    // not waited for; shutdown stays within shutdown.graceMs.
    close: async () => {
      clearInterval(sweeper);
      // Calls still waiting for a connection will not get one: answered now, not left pending.
      for (const call of queue) call.expire();
      queue.clear();
      await Promise.all([pool.destroy(), probeClient.destroy()]);
    },
  };
}
