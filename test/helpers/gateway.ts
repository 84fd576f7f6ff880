// Builds a gateway on 127.0.0.1 port 0 with its own metrics Registry, for one test.
import { Registry } from 'prom-client';
import { buildGateway, type Gateway, type GatewayOptions } from '../../src/app.js';
import { validateGatewayConfig } from '../../src/config/load.js';
import type { GatewayConfig } from '../../src/config/schema.js';
import { createTestIssuer, TEST_PARTICIPANT, type TestIssuer } from './tokens.js';

export interface RunningGateway {
  readonly url: string;
  readonly adminUrl: string;
  readonly gateway: Gateway;
  readonly config: GatewayConfig;
  readonly registry: Registry;
  /** Headers that authenticate a test call: a valid bearer token for user alice. */
  auth(extra?: Record<string, string>): Record<string, string>;
  /** The identity provider the gateway trusts (mint other tokens with it). */
  readonly issuer: TestIssuer;
  close(): Promise<void>;
}

type DeepPartial<T> = {
  [K in keyof T]?: T[K] extends object ? (T[K] extends unknown[] ? T[K] : DeepPartial<T[K]>) : T[K];
};

function merge(target: Record<string, unknown>, source: Record<string, unknown>): Record<string, unknown> {
  for (const [key, value] of Object.entries(source)) {
    const existing = target[key];
    if (
      value &&
      typeof value === 'object' &&
      !Array.isArray(value) &&
      existing &&
      typeof existing === 'object' &&
      !Array.isArray(existing)
    ) {
      merge(existing as Record<string, unknown>, value as Record<string, unknown>);
    } else {
      target[key] = value;
    }
  }
  return target;
}

export function testConfig(
  upstreamUrl: string,
  overrides: DeepPartial<GatewayConfig> | Record<string, unknown> = {},
): GatewayConfig {
  const raw = merge(
    {
      server: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
      upstream: { url: upstreamUrl },
      log: { level: 'silent' },
    },
    structuredClone(overrides),
  );
  return validateGatewayConfig(raw, 'test');
}

/**
 * A gateway in front of `upstreamUrl` that trusts a fresh test issuer (unless the overrides
 * configure `auth` themselves).
 */
export async function startGateway(
  upstreamUrl: string,
  overrides: DeepPartial<GatewayConfig> | Record<string, unknown> = {},
  options: Partial<GatewayOptions> = {},
): Promise<RunningGateway> {
  const issuer = await createTestIssuer();
  const withAuth =
    'auth' in overrides
      ? overrides
      : { ...overrides, auth: { issuers: [issuer.issuerConfig], participantId: TEST_PARTICIPANT } };
  const config = testConfig(upstreamUrl, withAuth);
  const registry = new Registry();
  const gateway = await buildGateway(config, { upstreamUrl, registry, logger: false, ...options });
  const urls = await gateway.listen();
  const token = await issuer.mint();
  return {
    url: urls.api,
    adminUrl: urls.admin,
    gateway,
    config,
    registry,
    auth: (extra = {}) => ({ authorization: `Bearer ${token}`, ...extra }),
    issuer,
    close: () => gateway.close(),
  };
}

/**
 * A gauge's value as the registry reports it at a scrape (its collect() runs). Throws when the
 * gateway has no such metric, so that a renamed metric cannot read as 0; a labelled series not
 * seen yet reads 0.
 */
export async function gauge(
  gateway: { registry: Registry },
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const metric = (await gateway.registry.getMetricsAsJSON()).find((m) => m.name === name);
  if (metric === undefined) throw new Error(`no metric ${name}`);
  const values = metric.values as Array<{ value: number; labels: Record<string, string | number> }>;
  return values.find((v) => Object.entries(labels).every(([k, l]) => String(v.labels[k]) === l))?.value ?? 0;
}
