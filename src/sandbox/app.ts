// The embedded sandbox ledger: an in-memory subset of a Canton participant's JSON Ledger API v2, used as
// the development upstream (`upstream.url: sandbox`) and as a realistic upstream in tests and benchmarks.
// It emulates the participant (Canton's routes, error codes and bodies), never the gateway.

import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { commitSeedTransaction, registerCommandRoutes } from './commands.js';
import { registerHealthRoutes } from './health.js';
import { BODY_LIMIT_BYTES, registerHttpConventions, type ReceivedRequest } from './http-conventions.js';
import { registerIdentityProviderRoutes } from './idps.js';
import { registerInteractiveRoutes } from './interactive.js';
import { registerLedgerStateRoutes } from './ledger-state.js';
import { refuseOutsidePathPrefix, upgradeUnderPathPrefix, withoutPathPrefix } from './path-prefix.js';
import { createSandboxState, type SandboxState } from './state.js';
import { createUpdateStreamServer, type UpgradeRecord } from './streams.js';
import { registerUpdateRoutes } from './updates.js';
import { registerVersionRoute } from './version.js';
import { registerVettingRoutes } from './vetting.js';

export { SANDBOX_SEED, type SandboxSeed } from './seed.js';
export { SYNTHETIC_COUNT_PARAMETER, WEBSOCKET_AUTH_PROTOCOL, type UpgradeRecord } from './streams.js';
export type { ReceivedRequest } from './http-conventions.js';
export type { SandboxState } from './state.js';

export const DEFAULT_SANDBOX_VERSION = '3.5.10';

export interface SandboxOptions {
  /** Fastify logger option; default false. Request logs never include headers, so never tokens. */
  readonly logger?: FastifyServerOptions['logger'];
  /** Canton release reported by GET /v2/version; default "3.5.10". */
  readonly version?: string;
  /** 'default': seeded packages, parties, users, vetting, one IDP and one Iou transaction at offset 1; 'empty': the same without the transaction. */
  readonly seed?: 'default' | 'empty';
  /** Fixed latency of every command submission, after validation and before commit; default 0. */
  readonly submitDelayMs?: number;
  /** Serve everything under this prefix, as Canton's `http-ledger-api.path-prefix` does (e.g. `/ledger`); default none. */
  readonly pathPrefix?: string;
}

/** What tests and benchmarks can read about the sandbox (exposed as `app.sandbox`). */
export interface SandboxHandle {
  readonly state: SandboxState;
  /** Every HTTP request that reached a route or the 404 handler (newest last, the last 1000). */
  readonly receivedRequests: readonly ReceivedRequest[];
  /** Every WebSocket upgrade request (URL and headers), newest last. */
  readonly upgrades: readonly UpgradeRecord[];
  /** Headers of the latest upgrade request, e.g. `lastUpgradeHeaders['sec-websocket-protocol']`. */
  readonly lastUpgradeHeaders: IncomingHttpHeaders | undefined;
}

export type SandboxApp = FastifyInstance & { readonly sandbox: SandboxHandle };

const UPGRADES_KEPT = 1000;

/** Build an independent sandbox (not listening: the caller listens and closes it). */
export async function buildSandbox(options: SandboxOptions = {}): Promise<SandboxApp> {
  const prefix = options.pathPrefix;
  const app = Fastify({
    logger: options.logger ?? false,
    bodyLimit: BODY_LIMIT_BYTES,
    ...(prefix !== undefined && { rewriteUrl: (request: IncomingMessage) => withoutPathPrefix(request, prefix) }),
  });
  if (prefix !== undefined) refuseOutsidePathPrefix(app);
  const state = createSandboxState();
  if ((options.seed ?? 'default') === 'default') commitSeedTransaction(state);

  const receivedRequests: ReceivedRequest[] = [];
  const upgrades: UpgradeRecord[] = [];
  const handle: SandboxHandle = {
    state,
    receivedRequests,
    upgrades,
    get lastUpgradeHeaders() {
      return upgrades.at(-1)?.headers;
    },
  };
  registerHttpConventions(app, receivedRequests);
  registerHealthRoutes(app);
  registerVersionRoute(app, options.version ?? DEFAULT_SANDBOX_VERSION);
  registerLedgerStateRoutes(app, state);
  registerVettingRoutes(app, state);
  registerCommandRoutes(app, state, { submitDelayMs: options.submitDelayMs ?? 0 });
  registerUpdateRoutes(app, state);
  registerInteractiveRoutes(app, state);
  registerIdentityProviderRoutes(app, state);

  const streams = createUpdateStreamServer(state, (record) => {
    upgrades.push(record);
    if (upgrades.length > UPGRADES_KEPT) upgrades.shift();
  });
  app.server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (prefix !== undefined && !upgradeUnderPathPrefix(request, socket, prefix)) {
      upgrades.push({ url: request.url ?? '', headers: { ...request.headers } });
      return;
    }
    streams.handleUpgrade(request, socket, head);
  });
  // While closing, answers still in flight end their connection: the HTTP server's close waits for
  // every connection, and a keep-alive one left idle after its answer would hold it open.
  let closing = false;
  app.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('connection', 'close');
  });
  // Upgraded sockets keep the HTTP server from closing, so streams end before it closes.
  app.addHook('preClose', async () => {
    closing = true;
    await streams.close();
  });
  app.addHook('onClose', async () => state.transactionListeners.clear());

  await app.ready();
  const sandboxApp: SandboxApp = Object.assign(app, { sandbox: handle });
  return sandboxApp;
}
