// The options of the undici pools to the participant, built once: the traffic pool and the readiness
// probe's own connection differ only in how many connections they keep.
import { readFileSync } from 'node:fs';
import type { Pool } from 'undici';
import type { UpstreamConfig } from '../config/schema.js';

export function upstreamTlsOptions(config: UpstreamConfig['tls']) {
  return {
    rejectUnauthorized: true,
    ...(config.caFile !== undefined && { ca: readFileSync(config.caFile) }),
    ...(config.certFile !== undefined && { cert: readFileSync(config.certFile) }),
    ...(config.keyFile !== undefined && { key: readFileSync(config.keyFile) }),
    ...(config.serverName !== undefined && { servername: config.serverName }),
  };
}

/**
 * A keep-alive pool of upstream.connections connections, one call at a time on each (no pipelining:
 * a slow answer would hold up the calls behind it), TLS always verified, every wait bounded.
 */
export function upstreamPoolOptions(upstream: UpstreamConfig): Pool.Options {
  return {
    connections: upstream.connections,
    pipelining: 1,
    keepAliveTimeout: upstream.keepAliveTimeoutMs,
    keepAliveMaxTimeout: upstream.keepAliveTimeoutMs,
    headersTimeout: upstream.timeoutMs,
    bodyTimeout: upstream.timeoutMs,
    connect: { timeout: upstream.connectTimeoutMs, ...upstreamTlsOptions(upstream.tls) },
  };
}
