// The admin listener: probes, metrics, the running configuration and the version cache's purge,
// never on the API port. /readyz reports the readiness checks (health.ts); the `upstream` one is the
// participant's replicas, each probed on its own connection every upstream.readinessIntervalMs
// (proxy/upstream-replicas.ts). Each change of readiness is logged once.
import { timingSafeEqual } from 'node:crypto';
import { BlockList, isIP } from 'node:net';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify';
import type { Registry } from 'prom-client';
import type { AdminConfig } from '../config/schema.js';
import type { Readiness } from '../health.js';
import type { ConsumersStatus } from '../consumers/status.js';
import type { UsageReport } from '../consumers/usage.js';
import { serveStatusPage } from './status-page.js';

export interface AdminListenerOptions {
  readonly admin: AdminConfig;
  /** upstream.readinessIntervalMs: how often readiness changes are looked for (and logged). */
  readonly readinessIntervalMs: number;
  readonly readiness: Readiness;
  readonly registry: Registry;
  /** Whether a replica of the participant answers, why not, and a probe of each replica now (settles once all answered). */
  readonly upstream: { ready(): boolean; cause(): string | undefined; probeNow(): Promise<void> };
  /** POST /cache/version/purge. */
  readonly purgeVersionCache: () => void;
  /** GET /config: the configuration running now, secrets redacted. */
  readonly runningConfig: () => RunningConfigReport;
  /** GET /usage: the consumers' usage by UTC day (consumers/usage.ts); undefined while no consumer is configured. */
  readonly usage?: (from: string, to: string) => Promise<UsageReport> | undefined;
  /** GET /status's consumers (consumers/status.ts); undefined while no consumer is configured. */
  readonly consumerStatus?: () => Promise<ConsumersStatus> | undefined;
  /** Where changes of readiness are logged (none: not logged). */
  readonly log?: FastifyBaseLogger;
  /** Is this peer address loopback? Tests replace it to act as a remote caller. */
  readonly isLoopback?: (address: string | undefined) => boolean;
}

/** What GET /config answers: which configuration runs, and what of the file waits for a restart. */
export interface RunningConfigReport {
  /** As ledger_gateway_config_info{fingerprint} shows it. */
  readonly fingerprint: string;
  /** Keys of the last valid file a reload read that keep their running values until a restart. */
  readonly restartRequired: readonly string[];
  /** The effective configuration (defaults filled in, the participant's IdPs among the issuers), secrets redacted. */
  readonly config: Record<string, unknown>;
}

const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/** 127.0.0.0/8, ::1, and IPv4-mapped ::ffff:127.x.y.z. */
export function isLoopbackAddress(address: string | undefined): boolean {
  const family = address === undefined ? 0 : isIP(address);
  return family !== 0 && loopback.check(address!, family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * The admin calls the admin token guards, POST /cache/version/purge and GET /config, are allowed to a
 * caller presenting `Authorization: Bearer <admin.purgeToken>`, or to a loopback peer when
 * admin.trustLoopback is on (`trustedPeer`: behind a mesh sidecar every peer is loopback, Istio's
 * passthrough 127.0.0.6). /livez, /readyz and /metrics are open to any peer.
 */
export function adminTokenCallAllowed(
  trustedPeer: boolean,
  authorization: string | undefined,
  token: string | undefined,
): boolean {
  if (trustedPeer) return true;
  if (token === undefined || authorization === undefined) return false;
  const match = /^Bearer +(\S+)\s*$/i.exec(authorization);
  if (match === null) return false;
  const presented = Buffer.from(match[1]!);
  const expected = Buffer.from(token);
  return presented.length === expected.length && timingSafeEqual(presented, expected);
}

export interface AdminListener {
  readonly server: FastifyInstance;
  /** Probes the participant at once (readiness follows) and listens on admin.host:admin.port; returns the bound URL. */
  listen(): Promise<string>;
  close(): Promise<void>;
}

export function createAdminListener(options: AdminListenerOptions): AdminListener {
  const { admin, readiness, registry, upstream } = options;
  const server = Fastify({ logger: false });

  const isLoopback = options.isLoopback ?? isLoopbackAddress;
  const allowed = (request: FastifyRequest) =>
    adminTokenCallAllowed(
      admin.trustLoopback && isLoopback(request.socket.remoteAddress),
      request.headers.authorization,
      admin.purgeToken,
    );
  readiness.add({ name: 'upstream', ready: () => upstream.ready(), detail: () => upstream.cause() });
  // Not before the first probe has ended: the upstream check would be logged as failing with cause
  // "not probed yet", and its real cause (refused, say) never, as failing to failing is no change.
  // A check turning failing is a warning (what an operator filters for), unless the gateway is
  // shutting down; turning ok is info.
  let probed = false;
  const logChanges = () => {
    if (!probed) return;
    for (const change of readiness.changes())
      if (change.state === 'failing' && !readiness.isShuttingDown) options.log?.warn(change, 'readiness changed');
      else options.log?.info(change, 'readiness changed');
  };
  // A probe already under way (an interval's) is joined, not doubled.
  const probeUpstream = () =>
    upstream.probeNow().then(() => {
      probed = true;
      logChanges();
    });
  // The replicas probe on their own interval: their changes (and the key sets') are logged on this one.
  const changeTimer = setInterval(logChanges, options.readinessIntervalMs);
  changeTimer.unref();

  server.get('/livez', async () => ({ status: 'ok' }));
  server.get('/readyz', async (_request, reply) => {
    const report = readiness.report();
    // Between two probes, a failing upstream is re-checked on demand so the answer is current.
    if (!report.ready && !readiness.isShuttingDown && report.checks.upstream === 'failing') {
      await probeUpstream();
      return reply.code(readiness.report().ready ? 200 : 503).send(readiness.report());
    }
    return reply.code(report.ready ? 200 : 503).send(report);
  });
  server.post('/cache/version/purge', async (request, reply) => {
    if (!allowed(request)) return reply.code(403).send({ error: 'purge is allowed with the admin purge token only' });
    options.purgeVersionCache();
    return reply.code(204).send();
  });
  // The running configuration, as Envoy's /config_dump shows its own: with the admin token, like the purge.
  server.get('/config', async (request, reply) => {
    if (!allowed(request))
      return reply.code(403).send({ error: 'the configuration is shown with the admin purge token only' });
    return reply.header('cache-control', 'no-store').send(options.runningConfig());
  });
  server.get('/usage', async (request, reply) => {
    if (!allowed(request)) return reply.code(403).send({ error: 'usage is shown with the admin purge token only' });
    const range = usageRange(request.query as Record<string, unknown>);
    if (typeof range === 'string') return reply.code(400).send({ error: range });
    const report = await options.usage?.(range.from, range.to);
    if (report === undefined) return reply.code(404).send({ error: 'no consumer is configured (consumers.list)' });
    reply.header('cache-control', 'no-store');
    const csv =
      range.format === 'csv' || (range.format === undefined && /\btext\/csv\b/.test(request.headers.accept ?? ''));
    return csv ? reply.type('text/csv; charset=utf-8').send(usageCsv(report)) : reply.send(report);
  });
  // The status page (status-page.ts): the page is open, its data is the admin token's.
  serveStatusPage(server, {
    allowed,
    report: async () => {
      const { ready, checks } = readiness.report();
      return {
        generatedAt: new Date().toISOString(),
        fingerprint: options.runningConfig().fingerprint,
        ready,
        checks,
        consumers: await options.consumerStatus?.(),
      };
    },
  });
  server.get('/metrics', async (_request, reply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  });

  return {
    server,
    async listen() {
      void probeUpstream(); // readiness follows; /readyz re-probes on demand while failing
      return server.listen({ host: admin.host, port: admin.port });
    },
    async close() {
      clearInterval(changeTimer);
      await server.close();
    },
  };
}

/** Days a usage report may span. */
const MAX_USAGE_DAYS = 400;
const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** GET /usage?from=YYYY-MM-DD&to=YYYY-MM-DD&format=json|csv: the range (default: today, UTC), or what is wrong with it. */
export function usageRange(
  query: Record<string, unknown>,
  now = Date.now(),
): { from: string; to: string; format: 'json' | 'csv' | undefined } | string {
  const today = new Date(now).toISOString().slice(0, 10);
  const from = query.from ?? today;
  const to = query.to ?? (query.from === undefined ? today : from);
  const format = query.format;
  if (typeof from !== 'string' || !DAY.test(from) || Number.isNaN(Date.parse(from)))
    return 'from: a UTC day, YYYY-MM-DD';
  if (typeof to !== 'string' || !DAY.test(to) || Number.isNaN(Date.parse(to))) return 'to: a UTC day, YYYY-MM-DD';
  if (to < from) return 'to is before from';
  if ((Date.parse(to) - Date.parse(from)) / 86_400_000 >= MAX_USAGE_DAYS) return `at most ${MAX_USAGE_DAYS} days`;
  if (format !== undefined && format !== 'json' && format !== 'csv') return 'format: json or csv';
  return { from, to, format };
}

const USAGE_COLUMNS = [
  'day',
  'consumer',
  'operation',
  'calls',
  'refused',
  'failed',
  'requestBytes',
  'responseBytes',
  'durationMs',
] as const;

/** The report's rows as CSV (RFC 4180): names and numbers only, nothing to quote. */
export function usageCsv(report: UsageReport): string {
  const lines = [USAGE_COLUMNS.join(',')];
  for (const row of report.rows) lines.push(USAGE_COLUMNS.map((column) => String(row[column])).join(','));
  return `${lines.join('\r\n')}\r\n`;
}
