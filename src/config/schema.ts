// The configuration schema: every key, its type, its default and what it means.
// config/default.yaml documents the same keys for operators; a test keeps the two in step.
import { Type, type Static } from '@sinclair/typebox';

const Section = <T extends Parameters<typeof Type.Object>[0]>(properties: T, description: string) =>
  Type.Object(properties, { additionalProperties: false, default: {}, description });

const Port = (def: number, description: string) =>
  Type.Integer({ minimum: 0, maximum: 65535, default: def, description });

const Milliseconds = (def: number, description: string, minimum = 1) =>
  Type.Integer({ minimum, maximum: 24 * 3600 * 1000, default: def, description });

export const ServerSchema = Section({
  host: Type.String({ minLength: 1, default: '0.0.0.0', description: 'Address of the API listener.' }),
  port: Port(8080, 'Port of the API listener (0 = any free port).'),
  requestTimeoutMs: Milliseconds(120_000, 'Bound on receiving a whole request and sending its answer (Node http requestTimeout); must exceed upstream.timeoutMs.'),
  headersTimeoutMs: Milliseconds(10_000, 'Bound on receiving the request headers (slow-loris protection).'),
  keepAliveTimeoutMs: Milliseconds(65_000, 'How long an idle client keep-alive connection stays open.'),
  maxHeaderBytes: Type.Integer({ minimum: 1024, maximum: 1_048_576, default: 16_384, description: 'Largest request head (request line + headers) accepted; larger gets 431.' }),
  trustedProxies: Type.Array(Type.String({ minLength: 1 }), { default: [], description: 'Addresses or CIDRs whose X-Forwarded-* headers are trusted (ingress controllers). Empty = trust none.' }),
}, 'The API listener, where clients send /v2 calls.');

export const AdminSchema = Section({
  host: Type.String({ minLength: 1, default: '0.0.0.0', description: 'Address of the admin listener.' }),
  port: Port(9464, 'Port of the admin listener: /livez, /readyz, /metrics. Never the API port.'),
}, 'The admin listener: health probes and metrics.');

export const UpstreamSchema = Section({
  url: Type.String({ minLength: 1, default: 'sandbox', description: '"sandbox" starts the embedded sandbox ledger (development only); otherwise the participant\'s JSON API base URL, e.g. http://127.0.0.1:7575.' }),
  timeoutMs: Milliseconds(30_000, 'Bound on one upstream call: until the answer\'s headers, and between two chunks of its body.'),
  operationTimeoutsMs: Type.Record(Type.String({ minLength: 1 }), Type.Integer({ minimum: 1, maximum: 24 * 3600 * 1000 }), { default: {}, description: 'Per-operation overrides of timeoutMs, by operation name, e.g. { submitAndWaitForTransaction: 60000 }.' }),
  connectTimeoutMs: Milliseconds(5_000, 'Bound on opening a connection to the participant.'),
  connections: Type.Integer({ minimum: 1, maximum: 4096, default: 128, description: 'Most keep-alive connections in the pool to the participant.' }),
  keepAliveTimeoutMs: Milliseconds(60_000, 'How long an idle upstream connection is kept (capped by the participant\'s Keep-Alive hint).'),
  tls: Section({
    caFile: Type.Optional(Type.String({ minLength: 1, description: 'PEM file of CA certificates to trust for an https upstream, in addition to the system ones.' })),
    certFile: Type.Optional(Type.String({ minLength: 1, description: 'PEM client certificate for mutual TLS.' })),
    keyFile: Type.Optional(Type.String({ minLength: 1, description: 'PEM private key for mutual TLS.' })),
    serverName: Type.Optional(Type.String({ minLength: 1, description: 'SNI / name to verify, when it differs from the URL host.' })),
  }, 'TLS to an https upstream. Certificates are always verified; there is no switch to turn that off.'),
  readinessIntervalMs: Milliseconds(5_000, 'How often /readyz re-checks that the participant answers (GET /v2/version).'),
}, 'The participant\'s JSON Ledger API.');

export const LimitsSchema = Section({
  bodyBytes: Type.Integer({ minimum: 1, maximum: 1024 * 1024 * 1024, default: 10_485_760, description: 'Largest request body, streamed or not; larger gets 413 GATEWAY_REQUEST_TOO_LARGE.' }),
}, 'Request limits.');

export const RoutesSchema = Section({
  exposeParticipantHealth: Type.Boolean({ default: false, description: 'Forward GET /livez and /readyz to the participant (they are hidden by default; the gateway\'s own probes are on the admin port).' }),
  exposeParticipantDocs: Type.Boolean({ default: false, description: 'Forward GET /docs/openapi and /docs/asyncapi to the participant.' }),
}, 'Which participant routes outside /v2 are reachable through the gateway.');

export const ShutdownSchema = Section({
  graceMs: Milliseconds(30_000, 'On SIGTERM/SIGINT: readiness turns 503 at once, in-flight requests get this long to finish, then the process exits.'),
  drainDelayMs: Milliseconds(0, 'Time between turning unready and closing the listener, so load balancers notice (Kubernetes: a few seconds).', 0),
}, 'Graceful shutdown.');

export const LogSchema = Section({
  level: Type.Union([Type.Literal('fatal'), Type.Literal('error'), Type.Literal('warn'), Type.Literal('info'), Type.Literal('debug'), Type.Literal('trace'), Type.Literal('silent')], { default: 'info', description: 'pino log level.' }),
}, 'Logging.');

export const VersionCacheSchema = Section({
  ttlSeconds: Type.Integer({ minimum: 0, maximum: 86_400, default: 30, description: 'GET /v2/version answers are fresh for this long; 0 disables the cache.' }),
  staleIfErrorSeconds: Type.Integer({ minimum: 0, maximum: 86_400, default: 300, description: 'When a refresh fails (unreachable, timeout, 5xx), the last good answer is served this long past its freshness, marked x-cache: STALE.' }),
}, 'The GET /v2/version cache.');

export const ConfigSchema = Type.Object({
  server: ServerSchema,
  admin: AdminSchema,
  upstream: UpstreamSchema,
  limits: LimitsSchema,
  routes: RoutesSchema,
  shutdown: ShutdownSchema,
  log: LogSchema,
  versionCache: VersionCacheSchema,
}, { additionalProperties: false });

export type GatewayConfig = Static<typeof ConfigSchema>;
export type UpstreamConfig = Static<typeof UpstreamSchema>;
