// WebSocket streams: once the upgrade has passed the same stages as any call (upgrades.ts), the
// connection becomes a byte tunnel to the participant.
//
// A tunnel rather than @fastify/http-proxy's WebSocket support, which terminates the socket and
// opens a new one offering only the first subprotocol; Canton needs both `jwt.token.<JWT>` and
// `daml.ws.auth` (Canton `Endpoints.scala` reads the token from the first). Forwarding the upgrade
// request itself keeps every offered subprotocol, extension and frame exactly as the client sent them.
import { performance } from 'node:perf_hooks';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { UpstreamConfig, WebSocketConfig } from '../config/schema.js';
import type { EndedStream, Exchange, StreamEnd } from '../exchange/exchange.js';
import type { Operation } from '../operations.js';
import { subprotocolElements, WEBSOCKET_TOKEN_PREFIX } from '../exchange/subprotocols.js';
import { traceContextFields } from '../trace-context.js';
import { forwardedFor, upstreamRequestHeaders, withAuthorizationDropped } from './headers.js';
import { upstreamCredentialOf, type UpstreamCredential } from '../exchange/upstream-credential.js';
import { UpgradeCall, type TunnelOutcome, type UpgradeRequest } from './upgrade-call.js';
import { upstreamTlsOptions } from './upstream-pool.js';
import type { Replica, UpstreamReplicas } from './upstream-replicas.js';
import { Errors, GatewayError } from '../errors.js';
import { firstMessageJudgeOf, type FirstMessageJudge } from '../exchange/first-message.js';
import { refusalBody } from '../exchange/refusal.js';
import { closeFrame, FrameBoundaries, NORMAL_CLOSURE, SERVICE_RESTART, textFrame } from './websocket-frames.js';
import { FirstMessageReader } from './websocket-first-message.js';
import {
  forward,
  keepTunnelAlive,
  type TunnelDirection,
  type TunnelKeepAlive,
  type TunnelLegs,
} from './websocket-keepalive.js';

export type { TunnelOutcome } from './upgrade-call.js';

/** What became of an admitted upgrade: its answer (TunnelOutcome), then, once it opened, its stream's end. */
export interface StreamOutcome extends TunnelOutcome {
  /** The tunnel a 101 opened has closed (once, after answered(101)). */
  ended(stream: EndedStream): void;
}

export interface WebSocketTunnelOptions {
  /** A new stream opens on the active replica (its `target`). */
  readonly replicas: UpstreamReplicas;
  readonly upstream: UpstreamConfig;
  readonly websocket: WebSocketConfig;
  readonly isTrustedProxy: (address: string) => boolean;
  /** A tunnel closed, and why (ledger_gateway_websocket_streams_ended_total). */
  readonly onStreamEnded?: (operation: Operation, endedBy: StreamEnd) => void;
  readonly log: { info(object: object, message: string): void };
}

export interface WebSocketTunnels {
  /** Forwards an upgrade every stage admitted to the participant, and tunnels the stream once it agrees. */
  open(exchange: Exchange, socket: Duplex, head: Buffer, outcome: StreamOutcome): void;
  /** Open tunnels, for graceful shutdown. */
  readonly openTunnels: number;
  /** Ends every tunnel (after the drain grace); `shuttingDown`: their 'stream ended' lines name the gateway. */
  closeAll(shuttingDown: boolean): void;
}

/** How long a stream closed with the gateway's close frame may take to hand it over before it is destroyed. */
const FAREWELL_FLUSH_MS = 5_000;

/** Ends a stream with the gateway's close frame; the client's close frame in answer is read and dropped. */
function sendFarewell(socket: Duplex, frame: Buffer): void {
  socket.resume();
  const timer = setTimeout(() => socket.destroy(), FAREWELL_FLUSH_MS).unref();
  socket.once('close', () => clearTimeout(timer));
  socket.end(frame, () => socket.destroy());
}

/**
 * Whether a stream's client keeps within websocket.clientBytesPerSecond, past clientBurstBytes (a token
 * bucket): each call takes the bytes just read and answers false once they pass it. Undefined: no bound.
 */
function clientPace(websocket: WebSocketConfig): ((bytes: number) => boolean) | undefined {
  const { clientBytesPerSecond: rate, clientBurstBytes: burst } = websocket;
  if (rate === 0) return undefined;
  let tokens = burst;
  let last = performance.now();
  return (bytes) => {
    const now = performance.now();
    tokens = Math.min(burst, tokens + ((now - last) * rate) / 1000);
    last = now;
    tokens -= bytes;
    return tokens >= 0;
  };
}

/** The tunnel's keep-alive, or undefined when websocket.keepAliveSeconds is 0. */
function keepAliveOf(seconds: number, legs: TunnelLegs, onSilent: () => void): TunnelKeepAlive | undefined {
  return seconds === 0 ? undefined : keepTunnelAlive(legs, seconds * 1000, onSilent);
}

/** The bytes read from `stream` from now on, after the `first` that came with the upgrade's head. */
function countBytes(stream: Duplex, first: number): () => number {
  let bytes = first;
  stream.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
  });
  return () => bytes;
}

/**
 * The one Sec-WebSocket-Protocol line sent to the participant, or undefined when nothing was offered:
 * every offered element (exchange/subprotocols.ts), in the client's order of preference,
 * joined by "," without spaces. A participant that splits the value on "," without trimming (Canton
 * before digital-asset/canton#613) then reads the same first `jwt.token.` element as one that trims
 * and as the gateway verified; a browser's `daml.ws.auth, jwt.token.X` would hide X from it, or show
 * it a later, unverified token. Nothing is added, dropped or reordered, so whatever the participant
 * answers from the list is one the client offered (RFC 6455 §4.1).
 */
export function forwardedSubprotocols(
  rawHeaders: readonly string[],
  credential?: UpstreamCredential,
): string | undefined {
  const elements: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() !== 'sec-websocket-protocol') continue;
    elements.push(...subprotocolElements(rawHeaders[i + 1] ?? ''));
  }
  if (credential !== undefined) return withBrokeredToken(elements, credential.token());
  return elements.length === 0 ? undefined : elements.join(',');
}

/**
 * The offer with the brokered token where the client's first `jwt.token.` element was (Canton's
 * Endpoints.scala reads the first one) and the client's others left out; nothing else changes, so
 * what the participant answers (`daml.ws.auth`) is still one the client offered. No token: the
 * client's elements are left out, nothing in their place.
 */
function withBrokeredToken(elements: readonly string[], token: string | undefined): string | undefined {
  const first = elements.findIndex((element) => element.startsWith(WEBSOCKET_TOKEN_PREFIX));
  const kept = elements.filter(
    (element, index) => !element.startsWith(WEBSOCKET_TOKEN_PREFIX) || (index === first && token !== undefined),
  );
  if (first !== -1 && token !== undefined) kept[kept.indexOf(elements[first]!)] = `${WEBSOCKET_TOKEN_PREFIX}${token}`;
  return kept.length === 0 ? undefined : kept.join(',');
}

let rewrittenHeaders: ReadonlySet<string> | undefined;
/**
 * Client headers the upgrade does not forward as sent (the gateway sends its own line for each):
 * Sec-WebSocket-Protocol and the headers the OTEL_PROPAGATORS formats read or write.
 */
function rewritten(): ReadonlySet<string> {
  rewrittenHeaders ??= new Set(['sec-websocket-protocol', ...traceContextFields()]);
  return rewrittenHeaders;
}

/** Sends an upgrade every stage admitted to the participant (upgrade-call.ts); `tunnel` takes the connection once it agrees. */
function sendUpgrade(
  options: WebSocketTunnelOptions,
  tls: object,
  exchange: Exchange,
  socket: Duplex,
  head: Buffer,
  outcome: TunnelOutcome,
  tunnel: UpgradeRequest['tunnel'],
): void {
  const request = exchange.raw;
  // Upgrades get no server span: the telemetry stage continued (or started) the trace without one,
  // and the participant is told the gateway's hop in the OTEL_PROPAGATORS formats (src/trace-context.ts).
  // The client's trace headers are replaced by the gateway's hop (its tracestate goes on only with
  // the trace it belongs to).
  const forwarded = forwardedFor(request, options.isTrustedProxy);
  const { timeoutMs, operationTimeoutsMs } = options.upstream;
  const timeout = operationTimeoutsMs[exchange.operation.name] ?? timeoutMs;
  // A brokered credential (consumers/) replaces the client's, in the subprotocol offer as in Authorization.
  const credential = upstreamCredentialOf(request);
  const headers = upstreamRequestHeaders(
    request.rawHeaders,
    forwarded,
    false,
    credential === undefined ? rewritten() : withAuthorizationDropped(rewritten()),
  );
  // A client that authenticated with Authorization (which Canton reads first) gets the token there.
  const token = credential?.token();
  if (token !== undefined && request.headers.authorization !== undefined)
    headers.push('authorization', `Bearer ${token}`);
  const call = new UpgradeCall(options.replicas, performance.now() + timeout, {
    exchange,
    socket,
    head,
    headers,
    upgrade: request.headers.upgrade ?? 'websocket',
    subprotocols: forwardedSubprotocols(request.rawHeaders, credential),
    tls,
    outcome,
    tunnel,
  });
  // With replicas, an upgrade refused before any byte of it was written waits for the next replica
  // that answers (within its own timeout) and is sent there once, as a call is (upstream-call.ts).
  call.start(timeout);
}

/**
 * A client that sends faster than its pace is cut like an idle stream: no frame can be written into
 * one under way. What it sends is the participant's to read; a Canton client sends little.
 */
function watchClientPace(socket: Duplex, head: Buffer, settings: WebSocketConfig, cut: () => void): void {
  const keepsPace = clientPace(settings);
  if (keepsPace === undefined) return;
  keepsPace(head.length); // the bytes that came with the upgrade count (judged with the next)
  socket.on('data', (chunk: Buffer) => {
    if (!keepsPace(chunk.length)) cut();
  });
}

/** How a held first message ends: allowed (its bytes go on, then the stream), or refused with this farewell. */
interface FirstMessageOutcome {
  allowed(held: Buffer): void;
  refused(farewell: Buffer): void;
}

/** Canton's error shape as the stream's one message, then a normal close, as the participant ends a stream it refuses. */
function refusalFarewell(exchange: Exchange, error: GatewayError): Buffer {
  const body = refusalBody(exchange, error);
  return Buffer.concat([textFrame(body), closeFrame(NORMAL_CLOSURE, '')]);
}

/**
 * Holds the client's bytes until its first message is whole and judged (exchange/first-message.ts);
 * nothing reaches the participant before. A client that closes first has nothing judged.
 */
function holdFirstMessage(
  exchange: Exchange,
  socket: Duplex,
  head: Buffer,
  judge: FirstMessageJudge,
  outcome: FirstMessageOutcome,
): TunnelDirection {
  const reader = new FirstMessageReader(judge.maxBytes);
  const allow = () => {
    judge.hold.release();
    outcome.allowed(reader.bytes);
  };
  const refuse = (error: unknown) => {
    judge.hold.release();
    outcome.refused(
      refusalFarewell(
        exchange,
        error instanceof GatewayError
          ? error
          : new GatewayError(Errors.GATEWAY_INTERNAL_ERROR, {
              cause: `An internal error occurred; the gateway log has the details under correlation id ${exchange.id}.`,
            }),
      ),
    );
  };
  const onData = (chunk: Buffer) => {
    const overBudget = judge.hold.take(chunk.length);
    const read = overBudget === undefined ? reader.take(chunk) : undefined;
    if (read?.state === 'more') return;
    stop();
    socket.pause();
    if (read === undefined) return refuse(overBudget);
    if (read.state === 'closed') return allow();
    if (read.state === 'tooLarge')
      return refuse(
        new GatewayError(Errors.GATEWAY_REQUEST_TOO_LARGE, {
          cause: `The stream's first message is larger than ${judge.maxBytes} bytes.`,
        }),
      );
    Promise.resolve()
      .then(() => judge.judge(read.message))
      .then(allow, refuse);
  };
  const stop = () => socket.off('data', onData);
  socket.on('data', onData);
  if (head.length > 0) onData(head);
  return { stop };
}

/** The tunnel's legs; a judged first message's head is held, not yet passed on (upgrade-call.ts). */
function legsOf(
  judge: FirstMessageJudge | undefined,
  client: Duplex,
  head: Buffer,
  participant: Duplex,
  participantHead: Buffer,
): TunnelLegs {
  return { client, participant, clientHead: judge === undefined ? head : Buffer.alloc(0), participantHead };
}

/**
 * The client's bytes to the participant: from now on, or, when a stage judges the first message,
 * once it is allowed (its held bytes first); a refusal ends the stream with its farewell.
 */
function clientToParticipant(
  exchange: Exchange,
  legs: TunnelLegs & { readonly head: Buffer },
  keepAlive: TunnelKeepAlive | undefined,
  judge: FirstMessageJudge | undefined,
  end: (cause: 'refused', farewell: Buffer) => void,
): TunnelDirection {
  const { client, participant } = legs;
  const passOn = () => forward(client, participant, true, keepAlive?.fromClient);
  if (judge === undefined) return passOn();
  let current: TunnelDirection = holdFirstMessage(exchange, client, legs.head, judge, {
    allowed(held) {
      if (client.destroyed || participant.destroyed) return; // the stream ended while it was judged
      const parts = keepAlive === undefined ? [held] : keepAlive.fromClient.pass(held);
      for (const part of parts) participant.write(part);
      current = passOn();
      client.resume();
    },
    refused: (farewell) => end('refused', farewell),
  });
  return { stop: () => current.stop() };
}

export function createWebSocketTunnels(options: WebSocketTunnelOptions): WebSocketTunnels {
  const { replicas } = options;
  const secure = replicas.all.some((replica) => replica.url.protocol === 'https:');
  const tls = secure ? upstreamTlsOptions(options.upstream.tls) : {};
  const { idleTimeoutMs, keepAliveSeconds } = options.websocket;
  const tunnels = new Set<Duplex>();
  // With replicas: each stream's replica, and how to close it with a close frame telling its client to reconnect.
  const onReplica = new Map<Duplex, { readonly replica: Replica; readonly reconnect: () => void }>();
  // Streams closed that way whose client has yet to answer the close frame (bounded by FAREWELL_FLUSH_MS).
  const farewells = new Set<Duplex>();
  replicas.onLeave((replica) => {
    for (const tunnel of [...onReplica.values()]) if (tunnel.replica === replica) tunnel.reconnect();
  });
  /** Set by closeAll() at shutdown: the tunnels it ends were closed by the gateway. */
  let cuttingOff = false;

  function open(exchange: Exchange, socket: Duplex, head: Buffer, outcome: StreamOutcome): void {
    sendUpgrade(options, tls, exchange, socket, head, outcome, (replica, upstreamSocket, upstreamHead) =>
      tunnel(exchange, socket, head, replica, upstreamSocket, upstreamHead, outcome),
    );
  }

  /** The participant agreed (101): the connection becomes a byte tunnel to `replica`. */
  function tunnel(
    exchange: Exchange,
    socket: Duplex,
    head: Buffer,
    replica: Replica,
    upstreamSocket: Duplex,
    upstreamHead: Buffer,
    outcome: StreamOutcome,
  ): void {
    const operation = exchange.operation;
    tunnels.add(socket);
    const opened = performance.now();
    let closed = false;
    // websocket.keepAliveSeconds: pings on both legs, their pongs dropped (websocket-keepalive.ts).
    const judge = firstMessageJudgeOf(exchange.raw);
    const legs = legsOf(judge, socket, head, upstreamSocket, upstreamHead);
    const keepAlive = keepAliveOf(keepAliveSeconds, legs, () => end('keepalive_timeout'));
    const fromClient = countBytes(socket, head.length);
    const fromParticipant = countBytes(upstreamSocket, upstreamHead.length);
    // The stream's own end, on a line of its own under the upgrade's id: how long it lasted, why
    // it ended, and which side closed its connection first (after a WebSocket close handshake
    // usually the participant, as RFC 6455 §7.1.1 has the server close first; `gateway` when the
    // gateway cut it: idle, shutdown or a replica change). The plain request line was written when
    // the tunnel opened; an access line is written now (outcome.ended). `farewell`: a close frame for
    // the client instead of cutting its connection.
    const end = (cause: StreamEnd, farewell?: Buffer) => {
      if (closed) return;
      closed = true;
      const endedBy = cuttingOff ? 'shutdown' : cause;
      const closedFirst = endedBy === 'client' || endedBy === 'participant' ? endedBy : 'gateway';
      const durationMs = Math.round(performance.now() - opened);
      const line = { reqId: exchange.id, operation: operation.name, durationMs, closedFirst, reason: endedBy };
      const closeCode = endedBy === 'refused' ? NORMAL_CLOSURE : SERVICE_RESTART;
      options.log.info(farewell === undefined ? line : { ...line, closeCode }, 'stream ended');
      options.onStreamEnded?.(operation, endedBy);
      outcome.ended({ endedBy, requestBytes: fromClient(), responseBytes: fromParticipant(), replica: replica.label });
      tunnels.delete(socket);
      onReplica.delete(socket);
      keepAlive?.stop();
      upstreamSocket.destroy();
      if (farewell === undefined) {
        socket.destroy();
        return;
      }
      toParticipant.stop();
      farewells.add(socket);
      socket.once('close', () => farewells.delete(socket));
      sendFarewell(socket, farewell);
    };
    const byParticipant = () => end('participant');
    const byClient = () => end('client');
    socket.on('close', byClient);
    watchClientPace(socket, head, options.websocket, () => end('byte_rate'));
    // Every byte either way is read from or written to the client's socket, so its inactivity
    // timer is the tunnel's. A byte tunnel knows no frame boundaries: it closes both connections
    // (the client sees close code 1006) rather than write a close frame into a frame under way.
    if (idleTimeoutMs > 0) (socket as Socket).setTimeout(idleTimeoutMs, () => end('idle_timeout'));
    // From here on, a half-close goes through the tunnel (the caller stops treating it as giving up).
    outcome.answered(101);
    const toParticipant = clientToParticipant(exchange, { ...legs, head }, keepAlive, judge, end);
    if (!replicas.failover) {
      upstreamSocket.on('error', byParticipant).on('close', byParticipant);
      forward(upstreamSocket, socket, true, keepAlive?.fromParticipant);
      return;
    }
    // A replica that goes away (or stops being the active one) is told to the client with close
    // code 1012, between two of the participant's frames, so that it reconnects and resumes from
    // its last offset; one cut inside a frame can only be cut.
    const frames = new FrameBoundaries();
    frames.feed(upstreamHead);
    const reconnect = (cause: 'participant' | 'replica_changed') => {
      toClient.stop();
      const clean = frames.atBoundary && !frames.sawClose && socket.writable;
      end(cause, clean ? closeFrame(SERVICE_RESTART, 'participant replica changed; reconnect') : undefined);
    };
    const lost = () => (frames.sawClose ? end('participant') : reconnect('participant'));
    upstreamSocket.on('data', frames.feed).on('error', lost).on('close', lost);
    upstreamSocket.once('end', () => (frames.sawClose ? socket.end() : reconnect('participant')));
    const toClient = forward(upstreamSocket, socket, false, keepAlive?.fromParticipant);
    onReplica.set(socket, { replica, reconnect: () => reconnect('replica_changed') });
    if (replicas.target !== replica) reconnect('replica_changed'); // calls moved on while it opened
  }

  return {
    open,
    get openTunnels() {
      return tunnels.size;
    },
    closeAll(shuttingDown) {
      cuttingOff = shuttingDown;
      for (const socket of [...tunnels, ...farewells]) socket.destroy();
      tunnels.clear();
      onReplica.clear();
      farewells.clear();
    },
  };
}
