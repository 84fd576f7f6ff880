// Forwarding a plain HTTP call to the participant on a keep-alive undici pool.
//
// Written on undici directly rather than through @fastify/reply-from, because reply-from (checked
// in its 12.x source): refuses to forward a GET body (Canton has GET-with-JSON-body routes in
// its OpenAPI), re-serializes parsed JSON bodies (we must send the client's bytes: an int64 above 2^53 must
// arrive exactly), retries GETs answered 503, turns TLS verification off unless told, and maps a
// refused connection to 500. Here: bytes in = bytes out, no retries of anything non-idempotent,
// TLS always verified, every wait bounded.
import { performance } from 'node:perf_hooks'; // a module binding: no global lookup per call
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Dispatcher, Pool } from 'undici';
import type { GatewayConfig } from '../config/schema.js';
import { closingConnection, Errors, GatewayError } from '../errors.js';
import type { BodyBudget, BodyHold } from '../body/budget.js';
import { callerOf } from '../exchange/caller.js';
import { onResponseClose } from '../exchange/response-close.js';
import { combinedVary, gatewayHeaders, writeAnswerHead } from '../exchange/answer.js';
import { clientResponseHeaders, forwardedFor, upstreamRequestHeaders } from './headers.js';
import { ErrorCodeLabels } from '../error-codes.js';
import { injectTraceContext, traceContextFields } from '../trace-context.js';
import { readUpload, tooLarge, UploadStream, type UploadLimits } from './upload-body.js';
import { UploadShares, uploadShareExhausted, uploadsPerCaller } from './upload-shares.js';
import { ERROR_BODY_CAPTURE_BYTES, upstreamErrorCode } from './upstream-error-code.js';
import { upstreamFailure } from './upstream-failure.js';
import { CONNECT_FAILURES, type Replica, type UpstreamReplicas } from './upstream-replicas.js';
import { UpstreamSlots, type SlotWaiter } from './upstream-slots.js';

// Kept here for the modules that import them from the forwarder.
export { tooLarge } from './upload-body.js';
export { upstreamTlsOptions } from './upstream-pool.js';
export { READINESS_USER_AGENT } from './upstream-probe.js';

export interface ForwarderOptions {
  /** The participant (its replicas, or the one resolved upstream.url; never "sandbox"). */
  readonly replicas: UpstreamReplicas;
  readonly config: GatewayConfig;
  /** True when the tracing instrumentation injects the gateway's own traceparent upstream. */
  readonly replacesTraceContext: boolean;
  /**
   * Set when trace context is propagated without spans (src/trace-context.ts): the request's
   * `traceContext` is injected in the OTEL_PROPAGATORS formats, instead of the client's headers of those formats.
   */
  readonly propagateTraceContext?: boolean;
  /** Whether a connection's peer is a configured trusted proxy (its X-Forwarded-* are kept). */
  readonly isTrustedProxy: (address: string) => boolean;
  /** The process's budget of bodies held in memory (limits.bufferedBodyBytes), shared with the policy stage. */
  readonly bodyBudget: BodyBudget;
  /** Called with the upstream part of each call, for the upstream latency histogram. */
  readonly onUpstreamTiming?: (request: FastifyRequest, seconds: number) => void;
}

export interface Forwarder {
  /**
   * Settles once the answer is under way; throws at once for a declared body over the limit or a
   * streamed upload over its caller's share.
   */
  forward(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /** The same call as forward(), answered whole into memory (bounded): for the version cache. */
  fetchWhole(
    request: FastifyRequest,
    maxBytes: number,
  ): Promise<{ statusCode: number; headers: Record<string, string | string[]>; body: Buffer }>;
  /** Calls handed to the upstream pool (at most upstream.connections), and calls waiting for one of its connections. */
  load: () => { inFlight: number; queued: number };
  close(): Promise<void>;
}

/** A connection that was lost before the participant answered anything. */
const CONNECTION_LOST: ReadonlySet<string> = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE', 'UND_ERR_CLOSED']);

/** The reason a call is aborted when its client has left (never seen by anyone). */
const CLIENT_LEFT = Object.assign(new Error('the client left'), { code: 'CLIENT_LEFT' });
/** The reason a call is aborted when its answer cannot be passed on (already refused). */
const ANSWER_REFUSED = Object.assign(new Error('the answer cannot be passed on'), { code: 'BAD_ANSWER' });
/** The reason a call is aborted when its client stopped reading the answer for the call's timeout. */
const CLIENT_STALLED = Object.assign(new Error('the client stopped reading'), { code: 'CLIENT_STALLED' });

/** What is left of a call's timeout (at least 1 ms). */
function remaining(started: number, timeout: number): number {
  return Math.max(1, Math.ceil(started + timeout - performance.now()));
}

function queueTimeout(connections: number, timeout: number): GatewayError {
  return new GatewayError(
    Errors.GATEWAY_UPSTREAM_UNAVAILABLE,
    { cause: 'No connection to the participant became free in time.' },
    { reason: `QUEUE_TIMEOUT: every one of the ${connections} upstream connections stayed busy for ${timeout} ms` },
  );
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
  const { config, replicas } = options;
  const bodyLimit = config.limits.bodyBytes;
  const timeouts = config.upstream.operationTimeoutsMs;
  const defaultTimeout = config.upstream.timeoutMs;
  const uploadLimits: UploadLimits = {
    maxBytes: bodyLimit,
    bufferBytes: config.upstream.bufferBodyBytes,
    windowMs: config.upstream.bodyIdleTimeoutMs,
    minBytesPerSecond: config.upstream.bodyMinBytesPerSecond,
  };
  const uploadShares = new UploadShares(uploadsPerCaller(config.upstream.connections, config.upstream.uploadShare));

  // With tracing on, the undici instrumentation injects the propagators' headers (traceparent,
  // tracestate, baggage by default) for the gateway's client span; propagated without spans, the
  // forwarder does. Either way the client's copies are dropped, so the participant receives exactly
  // one of each.
  const traceHeaders = options.replacesTraceContext || options.propagateTraceContext ? traceContextFields() : undefined;
  // Every call waits for a slot (upstream-slots.ts) at most until its deadline: upstream.timeoutMs
  // (or its operation's), which also bounds the answer's head.
  const slots = new UpstreamSlots(config.upstream.connections);

  const dropped = (drop: ReadonlySet<string> | undefined) =>
    traceHeaders === undefined ? drop : drop === undefined ? traceHeaders : new Set([...drop, ...traceHeaders]);

  /**
   * One upstream call. A keep-alive connection the participant closed just as it was reused fails
   * before any answer; a bodiless GET or HEAD is then sent once more on a fresh connection (safe:
   * idempotent, and nothing was answered). Anything else is never retried: a submit that may have
   * reached the participant must not be sent twice.
   */
  async function requestOnce(
    pool: Pool,
    idempotent: boolean,
    dispatch: Parameters<Pool['request']>[0],
  ): ReturnType<Pool['request']> {
    try {
      return await pool.request(dispatch);
    } catch (error) {
      if (
        !idempotent ||
        !CONNECTION_LOST.has((error as { code?: string }).code ?? '') ||
        (dispatch.signal as AbortSignal | undefined)?.aborted
      )
        throw error;
      return pool.request(dispatch);
    }
  }

  function headersFor(request: FastifyRequest, drop?: ReadonlySet<string>): string[] {
    const forwarded = forwardedFor(request.raw, options.isTrustedProxy);
    const headers = upstreamRequestHeaders(
      request.raw.rawHeaders,
      forwarded,
      options.replacesTraceContext,
      dropped(drop),
    );
    if (options.propagateTraceContext && request.traceContext !== undefined) {
      injectTraceContext(request.traceContext, headers);
    }
    return headers;
  }

  async function fetchWhole(request: FastifyRequest, maxBytes: number) {
    const timeout = timeouts[request.operation.name] ?? defaultTimeout;
    const started = performance.now();
    if (!slots.tryTake()) {
      await new Promise<void>((resolve, reject) =>
        slots.wait({
          deadline: started + timeout,
          start: resolve,
          expire: () => reject(queueTimeout(slots.size, timeout)),
        }),
      );
    }
    try {
      return await fetchOnce(request, maxBytes, timeout, started);
    } finally {
      slots.release();
    }
  }

  async function fetchOnce(request: FastifyRequest, maxBytes: number, timeout: number, started: number) {
    // identity: without any Accept-Encoding a server may choose any encoding (RFC 9110 §12.5.3).
    const headers = [...headersFor(request, VERSION_FETCH_DROPPED), 'accept-encoding', 'identity'];
    const fetchFrom = (replica: Replica) =>
      requestOnce(replica.pool, true, {
        path: replica.basePath + request.raw.url!,
        method: 'GET',
        headers,
        headersTimeout: remaining(started, timeout), // a wait for a connection counts against it
        bodyTimeout: timeout,
      });
    let response: Awaited<ReturnType<Pool['request']>>;
    const replica = replicas.target;
    try {
      response = await fetchFrom(replica);
    } catch (error) {
      const code = (error as { code?: string }).code ?? '';
      if (!replicas.failover || !CONNECT_FAILURES.has(code)) throw upstreamFailure(error);
      // A GET: sent again to the next replica that answers, whatever reached the one that failed.
      const next = await replicas.failedToConnect(replica, code, started + timeout);
      if (next === undefined) throw upstreamFailure(error);
      try {
        response = await fetchFrom(next);
      } catch (again) {
        throw upstreamFailure(again);
      }
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
    return {
      statusCode: response.statusCode,
      headers: clientResponseHeaders(response.headers),
      body: Buffer.concat(chunks, size),
    };
  }

  /**
   * Forwards one call and answers it from the participant's answer. A body that fits
   * upstream.bufferBodyBytes is read whole first, so that a call holds no upstream connection while
   * its client is still sending; a larger one streams, on its caller's share of the pool. A declared
   * body over the limit, or a streamed upload over the caller's share, throws at once (Fastify's
   * handler turns either into the error answer). Not an async function: one returning the promise
   * would make a second promise that adopts it, two more microtasks a call.
   */
  function forward(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const raw = request.raw;
    if (request.rawBody !== undefined || !hasBody(raw.headers)) return send(request, reply, request.rawBody, undefined);
    const declared = raw.headers['content-length'];
    if (declared !== undefined && Number(declared) > bodyLimit) throw tooLarge(bodyLimit);
    // A declared length is enforced by Node's parser; a chunked body is counted as it arrives.
    if (declared !== undefined && Number(declared) > uploadLimits.bufferBytes) {
      return send(request, reply, undefined, streamedUpload(request, []));
    }
    return readUpload(raw, uploadLimits, bodyHold(request, reply)).then((read) => {
      if (read === undefined) return undefined; // the client left while sending it: nobody to answer
      if (Buffer.isBuffer(read)) return send(request, reply, read, undefined);
      return send(request, reply, undefined, streamedUpload(request, read.prefix));
    });
  }

  /** A body read whole is held against the process's body budget until its exchange ends. */
  function bodyHold(request: FastifyRequest, reply: FastifyReply): BodyHold {
    const hold = options.bodyBudget.hold(callerOf(request.principal, request.raw, options.isTrustedProxy));
    reply.raw.once('close', hold.release);
    return hold;
  }

  /** A body larger than the buffer, streamed upstream as it arrives: on its caller's share while it lasts. */
  function streamedUpload(request: FastifyRequest, prefix: readonly Buffer[]): UploadStream {
    const caller = callerOf(request.principal, request.raw, options.isTrustedProxy);
    if (!uploadShares.tryHold(caller)) throw uploadShareExhausted(request.operation.name, uploadShares.perCaller);
    const upload = new UploadStream(uploadLimits, prefix);
    upload.once('close', () => uploadShares.release(caller)); // sent whole, failed, or dropped (see send)
    request.raw.pipe(upload);
    return upload;
  }

  /**
   * Sends one call and answers it. Dispatched with an undici handler rather than pool.request():
   * the answer's chunks go to the client's socket as they arrive, with no Readable stream and pipe
   * between the two (13% less CPU per proxied call, measured). Resolves (with nothing: resolving
   * with the reply, a thenable, costs Fastify another turn) once the answer head is written (the
   * reply is hijacked then) or the client has left; rejects with the gateway's coded error when
   * there is no answer to give. `body` is read whole already; `upload` streams as it arrives.
   */
  function send(
    request: FastifyRequest,
    reply: FastifyReply,
    body: Buffer | undefined,
    upload: UploadStream | undefined,
  ): Promise<void> {
    const raw = request.raw;
    // The client's body streams upstream as it arrives.
    const streamed = upload !== undefined;
    const timeout = timeouts[request.operation.name] ?? defaultTimeout;
    let replica = replicas.target;
    const dispatch: Dispatcher.DispatchOptions = {
      path: replica.basePath + raw.url!,
      method: raw.method as Dispatcher.HttpMethod,
      headers: headersFor(request),
      body: body ?? upload ?? null,
      headersTimeout: timeout,
      bodyTimeout: timeout,
    };
    // A keep-alive connection the participant closed just as it was reused fails before any
    // answer: a bodiless GET or HEAD is then sent once more (see requestOnce).
    const retriesPerReplica = dispatch.body === null && (raw.method === 'GET' || raw.method === 'HEAD') ? 1 : 0;
    let retries = retriesPerReplica;
    let failedOver = false; // sent to a second replica once, never more
    const res = reply.raw;
    const started = performance.now();

    return new Promise<void>((resolve, reject) => {
      let controller: Dispatcher.DispatchController | undefined;
      let clientLeft = false;
      let answering = false;
      let queued: SlotWaiter | undefined;
      let ended = false; // handed to the pool and ended there: its connection is released
      let awaitingReplica = false; // refused by its replica before it was written; waiting for the next
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
        if (awaitingReplica) {
          // between two replicas: in neither pool, nothing to cancel
          awaitingReplica = false;
          end();
          resolve();
          return;
        }
        if (queued !== undefined) {
          // never handed to the pool: nothing to cancel there
          slots.cancel(queued);
          queued = undefined;
          upload?.destroy();
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
        upload?.destroy(); // what the participant did not read of it is not sent: the answer closes the connection
        slots.release();
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
            fail(
              upstreamFailure(
                Object.assign(new Error(`upstream answered status ${statusCode}`), { code: 'BAD_STATUS' }),
              ),
            );
            return;
          }
          try {
            // The participant's headers win over the gateway's own on a clash, but for Vary, which joins both.
            const own = gatewayHeaders(request, reply);
            const ownVary = own.vary;
            const head = clientResponseHeaders(headers, own);
            if (typeof ownVary === 'string' && headers.vary !== undefined)
              head.vary = combinedVary(headers.vary, ownVary);
            // Answered before the client finished sending its body (a refusal of an upload, say):
            // the rest of it would be read as the connection's next request (RFC 9112 §9.3).
            if (streamed && !raw.complete) head.connection = 'close';
            writeAnswerHead(reply, statusCode, head);
          } catch (error) {
            current.abort(ANSWER_REFUSED);
            fail(
              upstreamFailure(
                Object.assign(
                  new Error(`the participant's answer head cannot be sent on: ${(error as Error).message}`),
                  { code: 'BAD_HEADERS' },
                ),
              ),
            );
            return;
          }
          answering = true;
          if (statusCode >= 400) {
            const contentType = headers['content-type'];
            capture = {
              chunks: [],
              size: 0,
              truncated: false,
              contentType: typeof contentType === 'string' ? contentType : undefined,
            };
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
            if (res.socket !== null)
              stallTimer ??= setTimeout(() => {
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
          if (capture !== undefined)
            request.errorCode = upstreamErrorCode(
              capture.contentType,
              Buffer.concat(capture.chunks, capture.size),
              capture.truncated,
            );
          res.end();
        },
        onResponseError(_current, error) {
          if (answering) {
            end();
            if (!clientLeft && !stalled) request.errorCode = ErrorCodeLabels.upstreamAnswerBroken; // counted as such, not as the client leaving
            res.destroy(); // the answer broke off: the client sees the connection end, not a complete answer
            return;
          }
          const code = (error as { code?: string }).code ?? '';
          // Refused (or cut) before it reached a socket, nothing of it written: with replicas, it waits
          // for the next replica that answers, within its own timeout, and is sent there once.
          if (
            replicas.failover &&
            controller === undefined &&
            !failedOver &&
            !clientLeft &&
            CONNECT_FAILURES.has(code)
          ) {
            failedOver = true;
            awaitingReplica = true;
            void replicas.failedToConnect(replica, code, started + timeout).then((next) => {
              if (!awaitingReplica) return; // its client left meanwhile
              awaitingReplica = false;
              if (next === undefined) {
                end();
                fail(upstreamFailure(error));
                return;
              }
              replica = next;
              retries = retriesPerReplica;
              dispatch.path = next.basePath + raw.url!;
              dispatch.headersTimeout = remaining(started, timeout);
              next.pool.dispatch(dispatch, handler); // on the same slot
            });
            return;
          }
          if (!clientLeft && error !== ANSWER_REFUSED && retries > 0 && CONNECTION_LOST.has(code)) {
            retries--;
            controller = undefined;
            replica.pool.dispatch(dispatch, handler); // on the same slot
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
      if (clientLeft) {
        // gone already (during an asynchronous stage): nothing to send or queue
        upload?.destroy();
        resolve();
        return;
      }
      if (slots.tryTake()) {
        upload?.watchPace(); // from when the participant can read it
        replica.pool.dispatch(dispatch, handler);
        return;
      }
      // Every connection is busy: the call waits for one, at most until its deadline.
      slots.wait(
        (queued = {
          deadline: started + timeout,
          start: () => {
            queued = undefined;
            dispatch.headersTimeout = remaining(started, timeout); // the wait counts against it
            upload?.watchPace();
            replica.pool.dispatch(dispatch, handler);
          },
          expire: () => {
            queued = undefined;
            upload?.destroy();
            fail(queueTimeout(slots.size, timeout));
          },
        }),
      );
      // A streamed body that fails while it waits (over the limit) is answered at once; once the
      // call is in the pool, undici reads its failure and aborts the call.
      upload?.once('error', (error) => {
        if (queued === undefined) return;
        slots.cancel(queued);
        queued = undefined;
        fail(upstreamFailure(error));
      });
    });
  }

  return {
    forward,
    fetchWhole,
    load: () => ({ inFlight: slots.inFlight, queued: slots.queued }),
    // Called once the API listener is closed, before the replicas' pools are destroyed (which
    // aborts what still runs upstream: nobody is left to answer it).
    close: async () => {
      // Calls still waiting for a connection will not get one: answered now, not left pending.
      slots.close();
    },
  };
}
