// WebSocket streams: the upgrade passes the same stages as any call (operation, authentication,
// authorization), then the connection becomes a byte tunnel to the participant.
//
// A tunnel rather than @fastify/http-proxy's WebSocket support, which terminates the socket and
// opens a new one offering only the first subprotocol; Canton needs both `jwt.token.<JWT>` and
// `daml.ws.auth` (FACTS.md §4.1). Forwarding the upgrade request itself keeps every offered
// subprotocol, extension and frame exactly as the client sent them.
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import type { GatewayConfig } from '../config/schema.js';
import { Errors, GatewayError, renderCantonError } from '../errors.js';
import { matchWebSocketOperation, pathOf, UNKNOWN_OPERATION, type Operation } from '../operations.js';
import { requestTargetProblem } from '../request-context.js';
import { forwardedFor, upstreamRequestHeaders } from './headers.js';
import { upstreamFailure } from './upstream-failure.js';
import { upstreamTlsOptions } from './forward.js';

export interface UpgradeOutcome {
  readonly operation: Operation;
  /** 101 when tunnelled, else the status answered. */
  readonly status: number;
  readonly errorCode: string | null;
  readonly durationSeconds: number;
}

export interface WebSocketProxyOptions {
  readonly upstreamUrl: string;
  readonly config: GatewayConfig;
  readonly isTrustedProxy: (address: string) => boolean;
  /** The gateway's stages for an upgrade: throws a GatewayError to refuse it. */
  readonly admit: (request: http.IncomingMessage, operation: Operation) => Promise<void>;
  readonly correlationId: () => string;
  readonly traceIdOf: (request: http.IncomingMessage) => string | null;
  readonly onOutcome?: (outcome: UpgradeOutcome) => void;
  readonly log: { warn(object: object, message: string): void; info(object: object, message: string): void };
}

export interface WebSocketProxy {
  /** The 'upgrade' listener for the API server. */
  handleUpgrade(request: http.IncomingMessage, socket: Duplex, head: Buffer): void;
  /** Open tunnels, for graceful shutdown. */
  readonly openTunnels: number;
  /** End every open tunnel (after the drain grace). */
  closeAll(): void;
}

function writeRefusal(socket: Duplex, error: GatewayError, correlationId: string, traceId: string | null): void {
  const body = JSON.stringify(renderCantonError(error.definition, { ...error.details, correlationId, traceId }));
  const headers = [
    `HTTP/1.1 ${error.definition.status} ${http.STATUS_CODES[error.definition.status] ?? 'Error'}`,
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    ...Object.entries(error.headers).map(([name, value]) => `${name}: ${value}`),
  ];
  socket.end(`${headers.join('\r\n')}\r\n\r\n${body}`);
}

function statusLine(response: http.IncomingMessage): string {
  const head = [`HTTP/1.1 ${response.statusCode} ${response.statusMessage ?? ''}`];
  for (let i = 0; i < response.rawHeaders.length; i += 2) head.push(`${response.rawHeaders[i]}: ${response.rawHeaders[i + 1]}`);
  return `${head.join('\r\n')}\r\n\r\n`;
}

export function createWebSocketProxy(options: WebSocketProxyOptions): WebSocketProxy {
  const base = new URL(options.upstreamUrl);
  const basePath = base.pathname.replace(/\/+$/, '');
  const transport = base.protocol === 'https:' ? https : http;
  const tls = base.protocol === 'https:' ? upstreamTlsOptions(options.config.upstream.tls) : {};
  const { timeoutMs, operationTimeoutsMs } = options.config.upstream;
  const tunnels = new Set<Duplex>();

  function handleUpgrade(request: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    const started = performance.now();
    const correlationId = options.correlationId();
    let operation: Operation = UNKNOWN_OPERATION;
    socket.on('error', () => socket.destroy());

    const finish = (status: number, errorCode: string | null) => {
      options.onOutcome?.({ operation, status, errorCode, durationSeconds: (performance.now() - started) / 1000 });
    };
    const refuse = (error: GatewayError) => {
      writeRefusal(socket, error, correlationId, options.traceIdOf(request));
      options.log.info({ reqId: correlationId, operation: operation.name, errorCode: error.definition.code, reason: error.reason }, 'websocket upgrade refused');
      finish(error.definition.status, error.definition.code);
    };

    const url = request.url ?? '/';
    const problem = requestTargetProblem(url);
    if (problem !== undefined) {
      refuse(new GatewayError(Errors.GATEWAY_INVALID_PATH, { cause: `Invalid request target: ${problem}.` }));
      return;
    }
    const path = pathOf(url);
    const matched = request.method === 'GET' ? matchWebSocketOperation(path) : undefined;
    if (matched === undefined && !path.startsWith('/v2/')) {
      refuse(new GatewayError(Errors.GATEWAY_ROUTE_NOT_EXPOSED, { cause: `WebSocket ${path.slice(0, 200)} is not served by the gateway.` }));
      return;
    }
    operation = matched ?? UNKNOWN_OPERATION;

    options.admit(request, operation).then(() => {
      if (socket.destroyed) return;
      const headers = upstreamRequestHeaders(request.rawHeaders, forwardedFor(request, options.isTrustedProxy), false);
      headers.push('Connection', 'Upgrade', 'Upgrade', request.headers.upgrade ?? 'websocket');
      const upstream = transport.request({
        protocol: base.protocol,
        hostname: base.hostname,
        port: base.port,
        path: basePath + url,
        method: 'GET',
        headers,
        agent: false,
        // Bounds connecting and the participant's answer to the upgrade (idle time on the socket);
        // cleared once the tunnel is open, where a stream may be quiet for long.
        timeout: operationTimeoutsMs[operation.name] ?? timeoutMs,
        ...tls,
      });
      const onClientGone = () => upstream.destroy();
      socket.once('close', onClientGone);
      upstream.once('timeout', () => upstream.destroy(Object.assign(new Error('upgrade timed out'), { code: 'UND_ERR_HEADERS_TIMEOUT' })));
      upstream.once('error', (error) => {
        socket.off('close', onClientGone);
        if (!socket.destroyed) refuse(upstreamFailure(error));
      });
      upstream.once('response', (response) => {
        // The participant refused the upgrade: its answer goes back whole.
        socket.off('close', onClientGone);
        socket.write(statusLine(response));
        response.pipe(socket);
        finish(response.statusCode ?? 502, null);
      });
      upstream.once('upgrade', (response, upstreamSocket, upstreamHead) => {
        socket.off('close', onClientGone);
        upstream.setTimeout(0);
        upstreamSocket.setTimeout(0);
        if (socket.destroyed) {
          upstreamSocket.destroy();
          return;
        }
        socket.write(statusLine(response));
        if (upstreamHead.length > 0) socket.write(upstreamHead);
        if (head.length > 0) upstreamSocket.write(head);
        tunnels.add(socket);
        const close = () => {
          tunnels.delete(socket);
          socket.destroy();
          upstreamSocket.destroy();
        };
        upstreamSocket.on('error', close).on('close', close);
        socket.on('close', close);
        upstreamSocket.pipe(socket);
        socket.pipe(upstreamSocket);
        finish(101, null);
      });
      upstream.end();
    }, (error: unknown) => {
      if (socket.destroyed) return;
      if (error instanceof GatewayError) refuse(error);
      else {
        options.log.warn({ reqId: correlationId, err: error }, 'websocket upgrade failed');
        refuse(new GatewayError(Errors.GATEWAY_INTERNAL_ERROR, { cause: `An internal error occurred; the gateway log has the details under correlation id ${correlationId}.` }));
      }
    });
  }

  return {
    handleUpgrade,
    get openTunnels() {
      return tunnels.size;
    },
    closeAll() {
      for (const socket of tunnels) socket.destroy();
      tunnels.clear();
    },
  };
}
