// The admin listener: probes, metrics and the version cache's purge, never on the API port. /readyz
// reports the readiness checks (health.ts); the `upstream` one is the participant's replicas, each
// probed on its own connection every upstream.readinessIntervalMs (proxy/upstream-replicas.ts).
import Fastify, { type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import type { GatewayConfig } from './config/schema.js';
import type { Readiness } from './health.js';

export interface AdminListenerOptions {
  readonly config: GatewayConfig;
  readonly readiness: Readiness;
  readonly registry: Registry;
  /** Whether a replica of the participant answers, and a probe of each replica now (settles once all answered). */
  readonly upstream: { ready(): boolean; probeNow(): Promise<void> };
  /** POST /cache/version/purge. */
  readonly purgeVersionCache: () => void;
}

export interface AdminListener {
  readonly server: FastifyInstance;
  /** Probes the participant at once (readiness follows) and listens on admin.host:admin.port; returns the bound URL. */
  listen(): Promise<string>;
  close(): Promise<void>;
}

export function createAdminListener(options: AdminListenerOptions): AdminListener {
  const { config, readiness, registry, upstream } = options;
  const server = Fastify({ logger: false });

  readiness.add({ name: 'upstream', ready: () => upstream.ready() });
  // A probe already under way (an interval's) is joined, not doubled.
  const probeUpstream = () => upstream.probeNow();

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
  server.post('/cache/version/purge', async (_request, reply) => {
    options.purgeVersionCache();
    return reply.code(204).send();
  });
  server.get('/metrics', async (_request, reply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  });

  return {
    server,
    async listen() {
      void probeUpstream(); // readiness follows; /readyz re-probes on demand while failing
      return server.listen({ host: config.admin.host, port: config.admin.port });
    },
    async close() {
      await server.close();
    },
  };
}
