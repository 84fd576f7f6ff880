// A WebSocket upgrade sent to the participant: an upstream call (upstream-call.ts) on node:http, a
// fresh connection each (agent: false), until the participant agrees (101: the connection becomes a
// tunnel, websocket.ts) or refuses (its answer passes on whole, its error code read as a call's).
import { firstMessageJudgeOf } from '../exchange/first-message.js';
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { GatewayError } from '../errors.js';
import type { Exchange } from '../exchange/exchange.js';
import { endUpgradeAnswer } from '../exchange/refusal.js';
import { injectTraceContext } from '../trace-context.js';
import { ErrorBodyCapture, UpstreamCall } from './upstream-call.js';
import { upstreamFailure } from './upstream-failure.js';
import type { Replica, UpstreamReplicas } from './upstream-replicas.js';

/** What became of an admitted upgrade at the participant. */
export interface TunnelOutcome {
  /**
   * The participant answered: 101 once the tunnel is open, else its refusal, passed on whole (its
   * error code set on exchange.errorCode).
   */
  answered(status: number): void;
  /** The participant gave no answer (unreachable, timed out): the gateway's coded refusal is the client's. */
  failed(error: GatewayError): void;
}

/** Where and how the upgrade is sent, and who takes the connection once the participant agrees. */
export interface UpgradeRequest {
  readonly exchange: Exchange;
  /** The client's connection. */
  readonly socket: Duplex;
  /** What the client sent after the upgrade's head (the first frames), for the participant. */
  readonly head: Buffer;
  /** The client's headers as forwarded (the gateway's own lines for Host, Connection, Upgrade are added per replica). */
  readonly headers: readonly string[];
  readonly upgrade: string;
  /** The one Sec-WebSocket-Protocol line, if anything was offered. */
  readonly subprotocols: string | undefined;
  /** upstream.tls, for replicas on https. */
  readonly tls: object;
  readonly outcome: TunnelOutcome;
  /** The participant agreed: the connection becomes a tunnel to `replica`. */
  tunnel(replica: Replica, upstreamSocket: Duplex, upstreamHead: Buffer): void;
}

/** Headers the gateway frames itself when it passes the participant's answer to an upgrade on. */
const REFRAMED = new Set(['transfer-encoding', 'connection', 'keep-alive']);

/**
 * The participant's answer head, passed on as sent but for its framing when it refused the upgrade:
 * Node has already de-chunked that body, so it goes on close-delimited (`Connection: close`).
 */
export function statusLine(response: http.IncomingMessage, refused: boolean, traceresponse: string): string {
  const head = [`HTTP/1.1 ${response.statusCode} ${response.statusMessage ?? ''}`];
  for (let i = 0; i < response.rawHeaders.length; i += 2) {
    const name = response.rawHeaders[i]!;
    if (refused && REFRAMED.has(name.toLowerCase())) continue;
    head.push(`${name}: ${response.rawHeaders[i + 1]}`);
  }
  if (refused) head.push('Connection: close');
  head.push(`traceresponse: ${traceresponse}`);
  return `${head.join('\r\n')}\r\n\r\n`;
}

export class UpgradeCall extends UpstreamCall {
  constructor(
    replicas: UpstreamReplicas,
    deadline: number,
    private readonly upgrade: UpgradeRequest,
  ) {
    super(replicas, deadline);
  }

  /**
   * Sends the upgrade to the active replica; `idleMs` bounds connecting and the participant's answer
   * (idle time on the socket), and is cleared once the tunnel is open, where a stream may be quiet for long.
   */
  start(idleMs: number): void {
    this.to('connecting');
    this.send(idleMs);
  }

  private send(idleMs: number): void {
    const { exchange, socket } = this.upgrade;
    const upstream = this.request(idleMs);
    // Node holds the request back until its connection is open (over TLS, until the handshake is
    // done): before that, nothing of it reached the replica. The socket comes fresh (agent: false).
    const secure = this.replica.url.protocol === 'https:';
    upstream.once('socket', (connection: Socket) =>
      connection.once(secure ? 'secureConnect' : 'connect', () => {
        if (this.state === 'connecting') this.to('writing');
      }),
    );
    const onClientGone = () => upstream.destroy();
    socket.once('close', onClientGone);
    upstream.once('timeout', () =>
      upstream.destroy(Object.assign(new Error('upgrade timed out'), { code: 'UND_ERR_HEADERS_TIMEOUT' })),
    );
    upstream.on('error', (error) => {
      socket.off('close', onClientGone);
      this.failed(error);
    });
    upstream.once('response', (response) => {
      socket.off('close', onClientGone);
      this.to('streaming');
      this.passRefusal(response, exchange.traceresponse!);
    });
    upstream.once('upgrade', (response, upstreamSocket, upstreamHead) => {
      socket.off('close', onClientGone);
      upstream.setTimeout(0);
      upstreamSocket.setTimeout(0);
      this.to('streaming');
      this.to('done'); // the connection is the tunnel's from here
      if (socket.destroyed) {
        upstreamSocket.destroy();
        return;
      }
      socket.write(statusLine(response, false, exchange.traceresponse!));
      if (upstreamHead.length > 0) socket.write(upstreamHead);
      // A stream whose first message is judged keeps the client's first bytes until then (websocket.ts).
      if (this.upgrade.head.length > 0 && firstMessageJudgeOf(exchange.raw) === undefined)
        upstreamSocket.write(this.upgrade.head);
      this.upgrade.tunnel(this.replica, upstreamSocket, upstreamHead);
    });
    upstream.end();
  }

  private request(idleMs: number): http.ClientRequest {
    const { exchange, upgrade, subprotocols } = this.upgrade;
    const base = this.replica.url;
    const transport = base.protocol === 'https:' ? https : http;
    // An array of headers makes Node send them as given, without a Host of its own.
    const headers = [...this.upgrade.headers, 'Host', base.host, 'Connection', 'Upgrade', 'Upgrade', upgrade];
    if (exchange.traceContext !== undefined) injectTraceContext(exchange.traceContext, headers);
    if (subprotocols !== undefined) headers.push('Sec-WebSocket-Protocol', subprotocols);
    return transport.request({
      protocol: base.protocol,
      hostname: base.hostname,
      port: base.port,
      path: this.replica.basePath + (exchange.raw.url ?? '/'),
      method: 'GET',
      headers,
      agent: false,
      timeout: idleMs,
      ...(transport === https && this.upgrade.tls),
    });
  }

  /** No answer, or the participant's refusal cut off: refused before it was written, it may fail over. */
  private failed(error: Error): void {
    const { socket, outcome } = this.upgrade;
    // Once the participant's refusal is under way, a failure cuts it off: no second answer after it.
    if (this.state === 'streaming') {
      this.to('failed');
      socket.destroy();
      return;
    }
    if (socket.destroyed) {
      if (!this.ended) this.to('done'); // its client left: nobody to answer
      return;
    }
    const nextReplica = this.failOver((error as { code?: string }).code ?? '');
    if (nextReplica === undefined) {
      if (!this.ended) this.to('failed');
      outcome.failed(upstreamFailure(error));
      return;
    }
    void nextReplica.then((next) => {
      if (socket.destroyed) {
        this.to('done'); // its client left while it waited
        return;
      }
      if (next === undefined) {
        this.to('failed');
        outcome.failed(upstreamFailure(error));
        return;
      }
      this.moveTo(next);
      this.send(Math.max(1, this.deadline - performance.now()));
    });
  }

  /** The participant refused the upgrade: its answer goes back whole, still bounded by the timeout. */
  private passRefusal(response: http.IncomingMessage, traceresponse: string): void {
    const { exchange, socket, outcome } = this.upgrade;
    socket.write(statusLine(response, true, traceresponse));
    // Its error code, read from the first bytes of its body as for a plain call (the body passes on whole).
    const status = response.statusCode ?? 502;
    const capture = ErrorBodyCapture.of(status, response.headers['content-type']);
    if (capture !== undefined) response.on('data', (chunk: Buffer) => capture.keep(chunk));
    response.once('close', () => {
      if (this.state === 'streaming') this.to('done');
      exchange.errorCode = capture === undefined ? null : capture.code();
      outcome.answered(status);
    });
    response.on('error', () => socket.destroy());
    response.pipe(socket, { end: false });
    response.once('end', () => endUpgradeAnswer(socket));
  }
}
