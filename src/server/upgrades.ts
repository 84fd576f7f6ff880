// WebSocket upgrades: the same exchange as a call, walking the same stage list (app.ts), then handed
// to the tunnel (proxy/websocket.ts). No HTTP response exists for an upgrade: a refusal is written on
// its socket (refusal.ts), and its request line is written once it has an answer, the tunnel's 101
// included (request-telemetry.ts), as a call's is; with the access log on, a 101's line waits for
// its stream's end.
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Duplex } from 'node:stream';
import { Errors, GatewayError } from '../errors.js';
import type { LedgerDecisionNote, Principal, Stage } from '../exchange/exchange.js';
import type { Generation, PinnedExchange } from '../live/generations.js';
import type { Operation } from '../operations.js';
import type { WebSocketTunnels } from '../proxy/websocket.js';
import { writeUpgradeRefusal } from '../exchange/refusal.js';
import { admitUpgrade } from '../exchange/stage-runner.js';
import type { RequestTelemetry } from '../telemetry/request-telemetry.js';
import type { TraceContext } from '../trace-context.js';

/** An upgrade's exchange (a call's is its FastifyRequest): one shape for every upgrade. */
class UpgradeExchange implements PinnedExchange {
  readonly kind = 'upgrade';
  generation = null as unknown as Generation; // pinned by the first stage
  operation = null as unknown as Operation; // set by the request context stage
  principal: Principal | null = null;
  errorCode: string | null = null;
  refusalReason: string | undefined = undefined;
  traceContext: TraceContext | undefined = undefined;
  traceresponse: string | undefined = undefined;
  answerContentLength: string | number | undefined = undefined;
  ledgerDecision: LedgerDecisionNote | undefined = undefined;
  constructor(
    readonly id: string,
    readonly raw: IncomingMessage,
    readonly lifeline: Duplex,
  ) {}
}

export interface UpgradeHandlerOptions {
  /** The gateway's stage list, the same one every call walks. */
  readonly stages: readonly Stage<PinnedExchange>[];
  readonly tunnels: WebSocketTunnels;
  readonly telemetry: Pick<RequestTelemetry, 'upgradeAnswered' | 'streamEnded'>;
  readonly correlationId: () => string;
  readonly log: { warn(details: object, message: string): void };
}

export interface UpgradeHandler {
  /** The 'upgrade' listener for the API server. */
  readonly handleUpgrade: (request: IncomingMessage, socket: Duplex, head: Buffer) => void;
  /** Ends every upgrade not yet answered and every open tunnel (shutdown; `shuttingDown`: the gateway's cut). */
  closeAll(shuttingDown: boolean): void;
}

export function createUpgradeHandler(options: UpgradeHandlerOptions): UpgradeHandler {
  const { stages, tunnels, telemetry, log } = options;
  // Upgrades not yet tunnelled or refused (stages or the participant's answer pending), for shutdown.
  const pending = new Set<Duplex>();

  function handleUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    const exchange = new UpgradeExchange(options.correlationId(), request, socket);
    socket.on('error', () => socket.destroy());
    pending.add(socket);
    socket.once('close', () => pending.delete(socket));
    // The API server keeps sockets half-open: a client that sends FIN before the tunnel opens has
    // given up, and nothing would close its socket until the upstream timeout.
    const onGiveUp = () => socket.destroy();
    socket.once('end', onGiveUp);

    const refuse = (error: GatewayError) => {
      writeUpgradeRefusal(exchange, socket, error);
      telemetry.upgradeAnswered(exchange, error.definition.status);
    };
    admitUpgrade(stages, exchange).then(
      () => {
        if (socket.destroyed) return;
        tunnels.open(exchange, socket, head, {
          answered(status) {
            if (status === 101) {
              socket.off('end', onGiveUp); // from here on, a half-close goes through the tunnel
              pending.delete(socket);
            }
            telemetry.upgradeAnswered(exchange, status);
          },
          ended: (stream) => telemetry.streamEnded(exchange, stream),
          failed: refuse,
        });
      },
      (error: unknown) => {
        if (socket.destroyed) return;
        if (error instanceof GatewayError) refuse(error);
        else {
          log.warn({ reqId: exchange.id, err: error }, 'websocket upgrade failed');
          refuse(
            new GatewayError(Errors.GATEWAY_INTERNAL_ERROR, {
              cause: `An internal error occurred; the gateway log has the details under correlation id ${exchange.id}.`,
            }),
          );
        }
      },
    );
  }

  return {
    handleUpgrade,
    closeAll(shuttingDown) {
      tunnels.closeAll(shuttingDown);
      for (const socket of pending) socket.destroy();
      pending.clear();
    },
  };
}

/** Serves every upgrade of `api`'s server: the stage list, then the tunnel. */
export function serveUpgrades(api: FastifyInstance, options: UpgradeHandlerOptions): UpgradeHandler {
  const upgrades = createUpgradeHandler(options);
  api.server.on('upgrade', upgrades.handleUpgrade);
  return upgrades;
}
