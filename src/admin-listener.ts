// The admin listener: probes, metrics and the version cache's purge, never on the API port. /readyz
// reports the readiness checks (health.ts); the `upstream` one is kept by a probe of the participant,
// on its own connection, every upstream.readinessIntervalMs.
import Fastify, { type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import type { GatewayConfig } from './config/schema.js';
import type { Readiness } from './health.js';

/** A probe waits at most this long for the participant's answer (less when the interval is shorter). */
const PROBE_TIMEOUT_MS = 2_000;

export interface AdminListenerOptions {
  readonly config: GatewayConfig;
  readonly readiness: Readiness;
  readonly registry: Registry;
  /** Does the participant answer at all, within `timeoutMs` (the forwarder's probe)? */
  readonly probeUpstream: (timeoutMs: number) => Promise<boolean>;
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
  const { config, readiness, registry } = options;
  const interval = config.upstream.readinessIntervalMs;
  const server = Fastify({ logger: false });

  let upstreamAnswers = false;
  readiness.add({ name: 'upstream', ready: () => upstreamAnswers });
  // One probe at a time: an interval tick or a /readyz while one runs waits for it.
  let probing: Promise<void> | undefined;
  const probeUpstream = () =>
    (probing ??= options
      .probeUpstream(Math.min(PROBE_TIMEOUT_MS, interval))
      .then((answers) => {
        upstreamAnswers = answers;
      })
      .finally(() => {
        probing = undefined;
      }));
  const probeTimer = setInterval(() => void probeUpstream(), interval);
  probeTimer.unref();

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
      clearInterval(probeTimer);
      await server.close();
    },
  };
}
