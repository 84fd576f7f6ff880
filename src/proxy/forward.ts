// Forwarding a plain HTTP call to the participant on a keep-alive undici pool.
//
// Written on undici directly rather than through @fastify/reply-from, because reply-from (checked
// in its 12.x source): refuses to forward a GET body (Canton has GET-with-JSON-body routes in
// its OpenAPI), re-serializes parsed JSON bodies (we must send the client's bytes: an int64 above 2^53 must
// arrive exactly), retries GETs answered 503, turns TLS verification off unless told, and maps a
// refused connection to 500. Here: bytes in = bytes out, no retries of anything non-idempotent,
// TLS always verified, every wait bounded.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { LimitsConfig, UpstreamConfig } from '../config/schema.js';
import type { BodyBudget, BodyHold } from '../body/budget.js';
import { callerOf } from '../exchange/caller.js';
import { onResponseClose } from '../exchange/response-close.js';
import { injectTraceContext, traceContextFields } from '../trace-context.js';
import type { CallContext } from './call-context.js';
import { fetchWhole, type WholeAnswer } from './fetch-whole.js';
import { ForwardedCall } from './forwarded-call.js';
import { forwardedFor, upstreamRequestHeaders, withAuthorizationDropped } from './headers.js';
import { upstreamCredentialOf } from '../exchange/upstream-credential.js';
import { readUpload, tooLarge, UploadStream, type UploadLimits } from './upload-body.js';
import { UploadShares, uploadShareExhausted, uploadsPerCaller } from './upload-shares.js';
import type { UpstreamReplicas } from './upstream-replicas.js';
import { UpstreamSlots } from './upstream-slots.js';

export interface ForwarderOptions {
  /** The participant (its replicas, or the one resolved upstream.url; never "sandbox"). */
  readonly replicas: UpstreamReplicas;
  readonly upstream: UpstreamConfig;
  /** limits.bodyBytes: the largest body forwarded. */
  readonly limits: LimitsConfig;
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
  fetchWhole(request: FastifyRequest, maxBytes: number): Promise<WholeAnswer>;
  /** Calls handed to the upstream pool (at most upstream.connections), and calls waiting for one of its connections. */
  load: () => { inFlight: number; queued: number };
  close(): Promise<void>;
}

function hasBody(headers: FastifyRequest['headers']): boolean {
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** What every call of the forwarder shares (call-context.ts). */
function callContext(options: ForwarderOptions, slots: UpstreamSlots): CallContext {
  const timeouts = options.upstream.operationTimeoutsMs;
  const defaultTimeout = options.upstream.timeoutMs;
  // With tracing on, the undici instrumentation injects the propagators' headers (traceparent,
  // tracestate, baggage by default) for the gateway's client span; propagated without spans, the
  // forwarder does. Either way the client's copies are dropped, so the participant receives exactly
  // one of each.
  const traceHeaders = options.replacesTraceContext || options.propagateTraceContext ? traceContextFields() : undefined;
  const dropped = (drop: ReadonlySet<string> | undefined) =>
    traceHeaders === undefined ? drop : drop === undefined ? traceHeaders : new Set([...drop, ...traceHeaders]);
  return {
    replicas: options.replicas,
    slots,
    timeoutOf: (request) => timeouts[request.operation.name] ?? defaultTimeout,
    headersFor(request, drop) {
      const forwarded = forwardedFor(request.raw, options.isTrustedProxy);
      // A brokered credential (consumers/) replaces the client's: its Authorization never goes on.
      const credential = upstreamCredentialOf(request.raw);
      const headers = upstreamRequestHeaders(
        request.raw.rawHeaders,
        forwarded,
        options.replacesTraceContext,
        credential === undefined ? dropped(drop) : withAuthorizationDropped(dropped(drop)),
      );
      const token = credential?.token();
      if (token !== undefined) headers.push('authorization', `Bearer ${token}`);
      if (options.propagateTraceContext && request.traceContext !== undefined) {
        injectTraceContext(request.traceContext, headers);
      }
      return headers;
    },
    ...(options.onUpstreamTiming !== undefined && { onUpstreamTiming: options.onUpstreamTiming }),
  };
}

export function createForwarder(options: ForwarderOptions): Forwarder {
  const { upstream } = options;
  const bodyLimit = options.limits.bodyBytes;
  const uploadLimits: UploadLimits = {
    maxBytes: bodyLimit,
    bufferBytes: upstream.bufferBodyBytes,
    windowMs: upstream.bodyIdleTimeoutMs,
    minBytesPerSecond: upstream.bodyMinBytesPerSecond,
  };
  const uploadShares = new UploadShares(uploadsPerCaller(upstream.connections, upstream.uploadShare));
  // Every call waits for a slot (upstream-slots.ts) at most until its deadline: upstream.timeoutMs
  // (or its operation's), which also bounds the answer's head.
  const slots = new UpstreamSlots(upstream.connections);
  const context = callContext(options, slots);

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
    onResponseClose(reply.raw, hold.release);
    return hold;
  }

  /** A body larger than the buffer, streamed upstream as it arrives: on its caller's share while it lasts. */
  function streamedUpload(request: FastifyRequest, prefix: readonly Buffer[]): UploadStream {
    const caller = callerOf(request.principal, request.raw, options.isTrustedProxy);
    if (!uploadShares.tryHold(caller)) throw uploadShareExhausted(request.operation.name, uploadShares.perCaller);
    const upload = new UploadStream(uploadLimits, prefix);
    upload.once('close', () => uploadShares.release(caller)); // sent whole, failed, or dropped (see ForwardedCall)
    request.raw.pipe(upload);
    return upload;
  }

  /** Sends one call and answers it (forwarded-call.ts): `body` is read whole already; `upload` streams as it arrives. */
  function send(
    request: FastifyRequest,
    reply: FastifyReply,
    body: Buffer | undefined,
    upload: UploadStream | undefined,
  ): Promise<void> {
    return new Promise<void>((resolve, reject) =>
      new ForwardedCall(context, request, reply, body, upload, resolve, reject).begin(),
    );
  }

  return {
    forward,
    fetchWhole: (request, maxBytes) => fetchWhole(context, request, maxBytes),
    load: () => ({ inFlight: slots.inFlight, queued: slots.queued }),
    // Called once the API listener is closed, before the replicas' pools are destroyed (which
    // aborts what still runs upstream: nobody is left to answer it).
    close: async () => {
      // Calls still waiting for a connection will not get one: answered now, not left pending.
      slots.close();
    },
  };
}
