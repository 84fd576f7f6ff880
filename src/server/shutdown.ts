// Leaving without dropping a call: readiness turns 503 at once, calls are still served through
// shutdown.drainDelayMs (while load balancers take the gateway out of rotation, each answer closing
// its connection), then the listener closes and the calls in flight get shutdown.graceMs to finish;
// what is still open after that is cut, counted as the gateway's cut, not as clients that left.
import type { Socket } from 'node:net';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { ShutdownConfig } from '../config/schema.js';
import type { Readiness } from '../health.js';

export interface GracefulShutdownOptions {
  readonly api: FastifyInstance;
  readonly readiness: Readiness;
  readonly settings: ShutdownConfig;
  /** Whether the API listener speaks TLS: its sockets in a handshake are tracked to be cut too. */
  readonly tls: boolean;
  /** Marks what is still in flight as cut by the gateway (SHUTDOWN_GRACE_ELAPSED). */
  readonly cutOff: () => void;
  /** Closes everything else, once the listener is closed or the grace is over. */
  readonly close: () => Promise<void>;
  /** Last, exports what telemetry still holds (the trace exporter's spans), within TELEMETRY_FLUSH_MS. */
  readonly flushTelemetry?: () => Promise<void>;
  readonly log: FastifyBaseLogger;
}

export interface GracefulShutdown {
  /** True once the drain delay is over and the listener closes: calls still arriving are refused. */
  readonly closing: boolean;
  run(): Promise<void>;
}

export function gracefulShutdown(options: GracefulShutdownOptions): GracefulShutdown {
  const { api, settings, log } = options;
  // With TLS, a socket still in its handshake is not yet one of the HTTP server's connections, which
  // closeAllConnections() ends when the grace is over: the raw sockets are tracked here too (per
  // connection, not per call), and ended with them.
  const rawSockets = new Set<Socket>();
  if (options.tls) {
    api.server.on('connection', (socket: Socket) => {
      rawSockets.add(socket);
      socket.once('close', () => rawSockets.delete(socket));
    });
  }
  let closing = false;

  return {
    get closing() {
      return closing;
    },
    async run() {
      options.readiness.beginShutdown();
      api.draining = true;
      if (settings.drainDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, settings.drainDelayMs));
      closing = true;
      const grace = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), settings.graceMs).unref());
      // api.close() stops accepting, closes idle keep-alive connections and waits for in-flight calls;
      // a connection whose call finishes later is idle then, and closed on the next sweep.
      const sweep = setInterval(() => api.server.closeIdleConnections(), 100);
      const outcome = await Promise.race([api.close().then(() => 'drained' as const), grace]);
      clearInterval(sweep);
      if (outcome === 'timeout') {
        log.warn({ graceMs: settings.graceMs }, 'shutdown grace elapsed; closing remaining connections');
        options.cutOff();
        api.server.closeAllConnections();
        for (const socket of rawSockets) socket.destroy();
      }
      await options.close();
      if (options.flushTelemetry !== undefined) await flushWithin(options.flushTelemetry, settings.graceMs, log);
    },
  };
}

/**
 * How long the trace exporter may take to send its last spans (at most graceMs): an unreachable
 * collector would otherwise hold the exit for the exporter's own timeout and retries (8 s and more),
 * past a Kubernetes termination grace, and fail the shutdown.
 */
export const TELEMETRY_FLUSH_MS = 2_000;

async function flushWithin(flush: () => Promise<void>, graceMs: number, log: FastifyBaseLogger): Promise<void> {
  const boundMs = Math.min(TELEMETRY_FLUSH_MS, graceMs);
  let timer: NodeJS.Timeout | undefined;
  const elapsed = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), boundMs)));
  const outcome = await Promise.race([
    flush().then(
      () => 'flushed' as const,
      (error: unknown) => (error instanceof Error ? error.message : String(error)),
    ),
    elapsed,
  ]);
  clearTimeout(timer);
  if (outcome === 'timeout')
    log.warn({ boundMs }, 'trace export did not finish at shutdown; the spans it still held are dropped');
  else if (outcome !== 'flushed')
    log.warn({ err: outcome }, 'trace export failed at shutdown; the spans it still held are dropped');
}
