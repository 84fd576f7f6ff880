// One request's walk through the gateway: what it carries from stage to stage, for a plain call and
// a WebSocket upgrade alike, and the Stage that reads and sets it. A call's exchange is its
// FastifyRequest (the fields below are request decorators, so a call allocates nothing more); an
// upgrade's is a small object of the same shape (upgrades.ts).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Operation } from '../operations.js';
import type { TraceContext } from '../trace-context.js';

/** Who called: set by the authentication stage from verified claims, never from a header. */
export interface Principal {
  /** The token's `sub`: the Ledger API user id. */
  readonly subject: string;
  readonly issuer: string | undefined;
  /** The verified claims, for per-operation authorization rules. */
  readonly claims: Readonly<Record<string, unknown>>;
  /**
   * The consumer the call belongs to (consumers/: by its gateway key, token claims or client
   * certificate); undefined when no consumer claims it, or none is configured.
   */
  readonly consumer?: string;
}

/** A plain HTTP call, or a WebSocket upgrade (which becomes a tunnel once every stage admitted it). */
export type ExchangeKind = 'call' | 'upgrade';

/** What ends an exchange's life when it closes: a call's response, an upgrade's (and its tunnel's) client socket. */
export type Lifeline = ServerResponse | Duplex;

/**
 * Why a WebSocket stream's tunnel closed: a side closed its connection (`client`, `participant`), or
 * the gateway cut it after websocket.idleTimeoutMs without a byte either way (`idle_timeout`), because
 * its client sent faster than websocket.clientBytesPerSecond allows (`byte_rate`), because a side sent
 * nothing for websocket.keepAliveSeconds after a keep-alive ping (`keepalive_timeout`), at shutdown, or
 * because calls moved from its participant replica to another (`replica_changed`,
 * proxy/upstream-replicas.ts). The ended_by label of ledger_gateway_websocket_streams_ended_total.
 */
export type StreamEnd =
  | 'client'
  | 'participant'
  | 'idle_timeout'
  | 'byte_rate'
  | 'keepalive_timeout'
  | 'shutdown'
  | 'replica_changed'
  /** The stream's first message was refused (exchange/first-message.ts: the ledger policy). */
  | 'refused';

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
 * The ledger policy's decision on a call of a caller a policy names (ledger-policy/ notes it): what the
 * access log, the decision metric and the audit record say of it. `dryRun`: a dry-run policy's, never enforced.
 * `breakGlass`: a break-glass entry (its name in `policy`) let the call through whatever the policies say.
 */
export interface LedgerDecisionNote {
  readonly decision: 'allow' | 'deny' | 'breakGlass';
  readonly policy: string;
  readonly rule: string;
  readonly mode: 'enforce' | 'dryRun';
}

/**
 * An exchange also carries the configuration generation it runs under, pinned by its first stage:
 * that field and its type are live/'s (live/generations.ts `PinnedExchange`), which the rooms below
 * it never read.
 */
export interface Exchange {
  readonly kind: ExchangeKind;
  /** The correlation id: x-request-id, the error body's correlationId, the request line's reqId. */
  readonly id: string;
  readonly raw: IncomingMessage;
  readonly lifeline: Lifeline;
  /** Set by the request context stage; UNKNOWN_OPERATION's placeholder until then. */
  operation: Operation;
  principal: Principal | null;
  /** Error code of the answer for metrics and logs: the gateway's own or the participant's. */
  errorCode: string | null;
  /**
   * Why a stage refused the exchange (a GatewayError's reason, set with its code by refusal.ts), or
   * what a stage that only judges (a dry run) would have refused it for: its log line's `reason`,
   * never a label.
   */
  refusalReason: string | undefined;
  /** The trace context when propagated by hand (tracing on, nothing exported; every upgrade): the telemetry stage's. */
  traceContext: TraceContext | undefined;
  /** The `traceresponse` header for the client, when tracing runs; set by the telemetry stage. */
  traceresponse: string | undefined;
  /**
   * A call's answer's Content-Length, noted as its head is written (answer.ts writeAnswerHead for the
   * answers the gateway writes itself, server/calls.ts for Fastify's): Node's response keeps no
   * readable copy of a head written whole. The access log's responseBytes.
   */
  answerContentLength: string | number | undefined;
  /** The ledger policy's decision, when a policy names the caller (a call's own stage: never an upgrade yet). */
  ledgerDecision: LedgerDecisionNote | undefined;
}

/**
 * One step of the walk: answers synchronously (undefined: go on; a throw: refuse) or with a promise
 * when it has to wait (a token not yet verified, a shared limit store). A refusal is a GatewayError.
 * `E`: what the stage reads of the exchange (live/'s stages read its pinned generation too).
 */
export type Stage<E extends Exchange = Exchange> = (exchange: E) => void | Promise<void>;

/** What the telemetry stage tells the consumers' usage (consumers/usage.ts) of each exchange. */
export interface ConsumerObserver {
  /** A finished exchange's outcome, as the telemetry stage counts it once (its status and code); a stream's at its 101. */
  finished(exchange: Exchange, status: number, code: string, seconds: number): void;
  /** A WebSocket stream whose tunnel closed: the bytes it carried each way. */
  streamEnded(exchange: Exchange, stream: EndedStream): void;
}

/**
 * One step of a call's own list, run once the exchange stages admitted it (server/calls.ts runs the
 * list app.ts declares: the IdP change watch, the request rules, the audit intent, cache-or-forward).
 * It reads the call (its principal and operation, the body a stage before it read: rawBody)
 * and answers as a Stage does: undefined to go on, a promise while it waits (a body being read, a
 * record being written), a throw to refuse (a GatewayError, whose reason then travels on the call).
 * A stage that only judges (a dry run) sets `call.refusalReason` and goes on. The list's last stage
 * answers the call on `reply`.
 */
export type CallStage = (call: FastifyRequest, reply: FastifyReply) => void | Promise<void>;

declare module 'fastify' {
  interface FastifyRequest {
    // The Exchange's fields, as request decorators (app.ts declares them).
    readonly kind: 'call';
    lifeline: ServerResponse;
    operation: Operation;
    principal: Principal | null;
    errorCode: string | null;
    refusalReason: string | undefined;
    traceContext: TraceContext | undefined;
    traceresponse: string | undefined;
    answerContentLength: string | number | undefined;
    ledgerDecision: LedgerDecisionNote | undefined;
    /** The body bytes, when a stage had to read them (rule-checked routes); forwarded as is. */
    rawBody: Buffer | undefined;
    /**
     * The request rules' parse of a small body (body/parse-turns.ts PARSED_AT_ONCE_BYTES), kept only
     * for the ledger policy's stage, which takes it (parsed once) and drops it before the call goes on.
     */
    parsedBody: Record<string, unknown> | undefined;
    /**
     * Set when a stage put headers on the reply that every answer carries (CORS: server/calls.ts): the
     * answers the gateway writes itself then copy the reply's headers (answer.ts).
     */
    replyHeaders: boolean;
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
