// One request's walk through the gateway: what it carries from stage to stage, for a plain call and
// a WebSocket upgrade alike, and the Stage that reads and sets it. A call's exchange is its
// FastifyRequest (the fields below are request decorators, so a call allocates nothing more); an
// upgrade's is a small object of the same shape (upgrades.ts).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Duplex } from 'node:stream';
import type { Operation } from '../operations.js';
import type { TraceContext } from '../trace-context.js';

/** Who called: set by the authentication stage from verified claims, never from a header. */
export interface Principal {
  /** The token's `sub`: the Ledger API user id. */
  readonly subject: string;
  readonly issuer: string | undefined;
  /** The verified claims, for per-operation authorization rules. */
  readonly claims: Readonly<Record<string, unknown>>;
}

/** A plain HTTP call, or a WebSocket upgrade (which becomes a tunnel once every stage admitted it). */
export type ExchangeKind = 'call' | 'upgrade';

/** What ends an exchange's life when it closes: a call's response, an upgrade's (and its tunnel's) client socket. */
export type Lifeline = ServerResponse | Duplex;

/**
 * Why a WebSocket stream's tunnel closed: a side closed its connection (`client`, `participant`), or
 * the gateway cut it after websocket.idleTimeoutMs without a byte either way (`idle_timeout`), or
 * because a side sent nothing for websocket.keepAliveSeconds after a keep-alive ping (`keepalive_timeout`), at
 * shutdown, or because calls moved from its participant replica to another (`replica_changed`,
 * proxy/upstream-replicas.ts). The ended_by label of ledger_gateway_websocket_streams_ended_total.
 */
export type StreamEnd =
  'client' | 'participant' | 'idle_timeout' | 'keepalive_timeout' | 'shutdown' | 'replica_changed';

/** A WebSocket stream whose tunnel closed: why, and the bytes it carried each way (not the HTTP heads of its upgrade and 101). */
export interface EndedStream {
  readonly endedBy: StreamEnd;
  /** From the client to the participant. */
  readonly requestBytes: number;
  /** From the participant to the client. */
  readonly responseBytes: number;
  /** The participant replica the stream ran on (its label). */
  readonly replica: string;
}

/**
 * The stages that follow the configuration: built whole from one config and swapped whole on a
 * reload (live/generations.ts). An exchange pins the current one when it enters, and finishes under it.
 */
export interface Generation {
  /** The effective config's fingerprint (a hash): which config an exchange ran under. */
  readonly fingerprint: string;
  readonly authenticate: Stage;
  readonly protect: Stage;
  readonly authorize: Stage;
  /** A call's request rules (a promise only on the rule-checked routes). */
  enforceRequestRules(request: FastifyRequest, reply: FastifyReply): Promise<void> | undefined;
  /**
   * CORS, when configured (policy/cors.ts): adds its headers to a call's reply, or answers a
   * preflight (true). Answers the gateway writes itself copy the reply's headers only then.
   */
  readonly cors: ((request: FastifyRequest, reply: FastifyReply) => boolean) | undefined;
  /** How long a GET /v2/version answer is served from memory (0: not cached), and served stale on an upstream failure. */
  readonly versionCache: { readonly ttlSeconds: number; readonly staleIfErrorSeconds: number };
}

export interface Exchange {
  readonly kind: ExchangeKind;
  /** Pinned by the first stage: the configuration this exchange runs under to its end. */
  generation: Generation;
  /** The correlation id: x-request-id, the error body's correlationId, the request line's reqId. */
  readonly id: string;
  readonly raw: IncomingMessage;
  readonly lifeline: Lifeline;
  /** Set by the request context stage; UNKNOWN_OPERATION's placeholder until then. */
  operation: Operation;
  principal: Principal | null;
  /** Error code of the answer for metrics and logs: the gateway's own or the participant's. */
  errorCode: string | null;
  /** The trace context when propagated by hand (tracing on, nothing exported; every upgrade): the telemetry stage's. */
  traceContext: TraceContext | undefined;
  /** The `traceresponse` header for the client, when tracing runs; set by the telemetry stage. */
  traceresponse: string | undefined;
}

/**
 * One step of the walk: answers synchronously (undefined: go on; a throw: refuse) or with a promise
 * when it has to wait (a token not yet verified, a shared limit store). A refusal is a GatewayError.
 */
export type Stage = (exchange: Exchange) => void | Promise<void>;

declare module 'fastify' {
  interface FastifyRequest {
    // The Exchange's fields, as request decorators (app.ts declares them).
    readonly kind: 'call';
    generation: Generation;
    lifeline: ServerResponse;
    operation: Operation;
    principal: Principal | null;
    errorCode: string | null;
    traceContext: TraceContext | undefined;
    traceresponse: string | undefined;
    /** The body bytes, when a stage had to read them (rule-checked routes); forwarded as is. */
    rawBody: Buffer | undefined;
    /** The body as a JSON object, when a stage parsed it (a rule-checked route): read, never changed. */
    jsonBody: Record<string, unknown> | undefined;
  }
  interface FastifyInstance {
    /**
     * True once shutdown has begun: every answer finished from then on, including those of calls
     * that were already in flight, says `Connection: close`, so no client sends another request on
     * a connection of a gateway that is about to exit.
     */
    draining: boolean;
  }
}
