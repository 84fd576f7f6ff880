// The configuration schema: every key, its type, its default and what it means.
// config/default.yaml documents the same keys for operators; a test keeps the two in step.
import { Type, type Static } from '@sinclair/typebox';
import { withoutFileSecrets } from './file-secrets.js';

/** A configuration the gateway cannot start with: every bad key path named (the process exits 2). */
export class ConfigError extends Error {
  readonly problems: readonly string[];
  /**
   * Set by the loader when the file could be read: the config as far as it validated, and which of
   * its sections are sound (their types right), so that later checks can still judge those.
   */
  readonly partial?: { readonly config: GatewayConfig; readonly sound: (section: string) => boolean };
  constructor(source: string, problems: readonly string[], partial?: ConfigError['partial']) {
    // Whichever check found a problem, a value read with ${file:...} is never printed in it.
    const told = problems.map(withoutFileSecrets);
    super(`invalid configuration (${source}):\n${told.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = told;
    if (partial !== undefined) this.partial = partial;
  }
}

const Section = <T extends Parameters<typeof Type.Object>[0]>(properties: T, description: string) =>
  Type.Object(properties, { additionalProperties: false, default: {}, description });

const Port = (def: number, description: string) =>
  Type.Integer({ minimum: 0, maximum: 65535, default: def, description });

const Milliseconds = (def: number, description: string, minimum = 1) =>
  Type.Integer({ minimum, maximum: 24 * 3600 * 1000, default: def, description });

export const ServerSchema = Section(
  {
    host: Type.String({ minLength: 1, default: '0.0.0.0', description: 'Address of the API listener.' }),
    port: Port(8080, 'Port of the API listener (0 = any free port).'),
    requestTimeoutMs: Milliseconds(
      120_000,
      'Bound on receiving a whole request from the client, head and body (Node http requestTimeout; a slow upload gets 408). The answer is bounded by upstream.timeoutMs.',
    ),
    headersTimeoutMs: Milliseconds(10_000, 'Bound on receiving the request headers (slow-loris protection).'),
    keepAliveTimeoutMs: Milliseconds(65_000, 'How long an idle client keep-alive connection stays open.'),
    maxHeaderBytes: Type.Integer({
      minimum: 1024,
      maximum: 1_048_576,
      default: 16_384,
      description: 'Largest request head (request line + headers) accepted; larger gets 431.',
    }),
    pathPrefix: Type.Optional(
      Type.String({
        // Every segment holds a character other than a dot, or 3 dots or more: never `.` or `..`
        // (written without lookahead, which Helm's RE2 validator cannot run).
        pattern:
          "^(?:/(?:[A-Za-z0-9._~!$&'()*+,;=:@-]*[A-Za-z0-9_~!$&'()*+,;=:@-][A-Za-z0-9._~!$&'()*+,;=:@-]*|\\.{3,}))+/?$",
        description:
          "A path prefix clients call the JSON API under, e.g. /api/json-api (as Splice's ingress and cn-quickstart expose it): a call or WebSocket upgrade under it is served as its path without the prefix (then put behind upstream.url's own path), and metrics, logs, traces and the audit trail see that path; any other path gets 404 as the participant answers a path it does not serve. Whole segments, matched byte for byte; no percent-encoding, dot segments, query or fragment; a trailing slash is ignored. The admin listener is not affected. Unset: no prefix. Needs a restart (docs/forwarding.md, section A client-facing path prefix).",
      }),
    ),
    trustedProxies: Type.Array(Type.String({ minLength: 1 }), {
      default: [],
      description:
        'IP addresses or CIDRs (host names are not resolved) whose X-Forwarded-* headers are trusted (ingress controllers). Empty = trust none.',
    }),
    tls: Section(
      {
        certFile: Type.Optional(
          Type.String({
            minLength: 1,
            description:
              'PEM certificate (chain) the API listener presents: with keyFile, the listener speaks HTTPS (and WSS).',
          }),
        ),
        keyFile: Type.Optional(Type.String({ minLength: 1, description: 'PEM private key of certFile.' })),
        clientCaFile: Type.Optional(
          Type.String({
            minLength: 1,
            description:
              'PEM CA certificates that verify client certificates (mutual TLS); clientCertificate says whether one is required.',
          }),
        ),
        clientCertificate: Type.Union([Type.Literal('require'), Type.Literal('request')], {
          default: 'require',
          description:
            'With clientCaFile: "require" refuses a TLS connection without a certificate clientCaFile verifies; "request" asks for one and accepts the connection without it (policy.sources decides per operation).',
        }),
        resumeSessions: Type.Boolean({
          default: false,
          description:
            "With clientCaFile: let clients resume a TLS session (session tickets), which skips the client certificate's verification a full handshake makes (a certificate revoked or a client CA replaced since still passes; its validity dates are judged at each call all the same). Off: every connection verifies its certificate. Without clientCaFile sessions are always resumable (docs/security.md).",
        }),
        reloadIntervalMs: Milliseconds(
          60_000,
          'How often the files are read again: a changed certificate, key or client CA serves new connections without a restart (cert-manager renewals); an unreadable or invalid one is logged and the last good one kept.',
          1_000,
        ),
      },
      'TLS on the API listener (off without certFile and keyFile: plain HTTP, e.g. behind an ingress controller or a mesh that terminates TLS).',
    ),
  },
  'The API listener, where clients send /v2 calls.',
);

export const AdminSchema = Section(
  {
    host: Type.String({ minLength: 1, default: '0.0.0.0', description: 'Address of the admin listener.' }),
    port: Port(9464, 'Port of the admin listener: /livez, /readyz, /metrics. Never the API port.'),
    purgeToken: Type.Optional(
      Type.String({
        minLength: 16,
        secret: true,
        description:
          "Bearer token a caller presents for POST /cache/version/purge, GET /config, GET /usage and the status page's data (GET /status/data; the page is opened as /status#token=...) (e.g. ${file:/run/secrets/purge-token}); compared in constant time, never logged. Unset: nobody may purge or read the running configuration, usage or status, unless trustLoopback is on. Probes and metrics stay open.",
      }),
    ),
    trustLoopback: Type.Boolean({
      default: false,
      description:
        "Serve POST /cache/version/purge, GET /config, GET /usage and GET /status/data to any loopback peer (127.0.0.0/8, ::1) without the token. Off by default: behind a mesh sidecar every inbound connection is a loopback one (Istio's passthrough comes from 127.0.0.6), so loopback says nothing about who called. Turn it on only where nothing forwards to the admin port from off the pod (kubectl port-forward arrives on loopback too).",
    }),
  },
  'The admin listener: health probes and metrics.',
);

export const UpstreamSchema = Section(
  {
    url: Type.String({
      minLength: 1,
      default: 'sandbox',
      description:
        '"sandbox" starts the embedded sandbox ledger (development only); otherwise the participant\'s JSON API base URL (http or https, no user information, query or fragment), e.g. http://127.0.0.1:7575. Not set together with replicas.',
    }),
    timeoutMs: Milliseconds(
      30_000,
      "Bound on one upstream call: until the answer's headers (the wait for a free connection included), between two chunks of its body, and on a client that stops reading the answer. Kept above the participant's own http-ledger-api.request-timeout (Canton's default 20 s), so that a call the participant cannot answer in time gets the participant's own 503 (counted PARTICIPANT_REQUEST_TIMEOUT) and this bound cuts only a participant that does not answer at all; raise both together (docs/forwarding.md).",
    ),
    operationTimeoutsMs: Type.Record(
      Type.String({ minLength: 1 }),
      Type.Integer({ minimum: 1, maximum: 24 * 3600 * 1000 }),
      {
        default: {},
        description:
          "Per-operation overrides of timeoutMs, by operation name (checked at start), e.g. { submitAndWaitForTransaction: 60000 } in front of a participant whose http-ledger-api.request-timeout is raised above 60 s (with Canton's 20 s, the participant answers first); for a WebSocket channel, the bound on the participant's answer to the upgrade.",
      },
    ),
    connectTimeoutMs: Milliseconds(5_000, 'Bound on opening a connection to the participant.'),
    connections: Type.Integer({
      minimum: 1,
      maximum: 4096,
      default: 128,
      description: 'Most keep-alive connections in the pool to the participant.',
    }),
    keepAliveTimeoutMs: Milliseconds(
      30_000,
      "How long an idle upstream connection is kept (capped by the participant's Keep-Alive hint); keep it below the participant's idle timeout (pekko-http: 60 s).",
    ),
    tls: Section(
      {
        caFile: Type.Optional(
          Type.String({
            minLength: 1,
            description: 'PEM file of CA certificates to trust for an https upstream, in addition to the system ones.',
          }),
        ),
        certFile: Type.Optional(Type.String({ minLength: 1, description: 'PEM client certificate for mutual TLS.' })),
        keyFile: Type.Optional(Type.String({ minLength: 1, description: 'PEM private key for mutual TLS.' })),
        serverName: Type.Optional(
          Type.String({ minLength: 1, description: 'SNI / name to verify, when it differs from the URL host.' }),
        ),
      },
      'TLS to an https upstream. Certificates are always verified; there is no switch to turn that off.',
    ),
    replicas: Type.Optional(
      Type.Array(
        Type.Union(
          [
            Type.String({ minLength: 1 }),
            Type.Object(
              {
                url: Type.String({
                  minLength: 1,
                  description: "The replica's JSON API base URL, checked like upstream.url.",
                }),
                name: Type.Optional(
                  Type.String({
                    pattern: '^[A-Za-z0-9_.-]{1,64}$',
                    description:
                      "The replica's name in the replica_up metric and the log (default: its index in the list).",
                  }),
                ),
              },
              { additionalProperties: false },
            ),
          ],
          { description: 'A replica: its base URL as a plain string (the same as { url }), or { url, name }.' },
        ),
        {
          minItems: 1,
          maxItems: 16,
          description:
            "Instead of url: the base URLs of a participant's replicas (Canton active-passive HA), each a URL or { url, name }. Each is probed every readinessIntervalMs; calls and new WebSocket streams go to the active one, and one refused before any byte was sent waits for the next one (docs/replicas.md). The tls settings apply to every replica.",
        },
      ),
    ),
    readinessIntervalMs: Milliseconds(
      5_000,
      'How often /readyz re-checks that the participant answers (GET /v2/version); with replicas, how often each replica is probed.',
    ),
    bufferBodyBytes: Type.Integer({
      minimum: 0,
      maximum: 1024 * 1024 * 1024,
      default: 65_536,
      description:
        "A request body up to this size (declared, or chunked and ending within it) is read whole before its call takes an upstream connection, so a slow client holds none; a larger one streams to the participant as it arrives, on its caller's share (uploadShare). 0: every body streams.",
    }),
    uploadShare: Type.Number({
      exclusiveMinimum: 0,
      maximum: 1,
      default: 0.25,
      description:
        "Most of the upstream connections one caller's streamed uploads (bodies over bufferBodyBytes) may hold at once, as a share of `connections` (at least one); one more is refused with 429 GATEWAY_UPLOAD_SHARE_EXHAUSTED. The caller is the token's subject, or the client address for a call without a token.",
    }),
    bodyIdleTimeoutMs: Milliseconds(
      10_000,
      "The window over which a forwarded request body's pace is judged, while it is read whole or streamed: a window without a byte of it (or with fewer than bodyMinBytesPerSecond on average) cuts it with 408 GATEWAY_CLIENT_TIMEOUT, closes its connection and frees its upstream connection. Time the participant holds the body back is not counted.",
    ),
    bodyMinBytesPerSecond: Type.Integer({
      minimum: 0,
      maximum: 1024 * 1024 * 1024,
      default: 1_024,
      description:
        'The least average pace of a forwarded request body over each bodyIdleTimeoutMs window; 0: any byte in a window will do.',
    }),
  },
  "The participant's JSON Ledger API.",
);

export const WebSocketSchema = Section(
  {
    idleTimeoutMs: Milliseconds(
      300_000,
      'A stream tunnel that carries no byte in either direction for this long is ' +
        'closed, both connections (the client sees close code 1006; WebSocket pings count as traffic). A Canton stream ' +
        'can be silent while nothing new happens (offset checkpoints come only when there is a new one), so keep it ' +
        "well above your subscribers' quiet spells. 0: never.",
      0,
    ),
    clientBytesPerSecond: Type.Integer({
      minimum: 0,
      maximum: 1024 * 1024 * 1024,
      default: 65_536,
      description:
        "The average pace at which a stream's client may send bytes to the participant, past clientBurstBytes; faster cuts the stream, both connections (the client sees close code 1006), counted with ended_by byte_rate. A Canton stream's client sends its subscription and little else. 0: no bound.",
    }),
    clientBurstBytes: Type.Integer({
      minimum: 1,
      maximum: 1024 * 1024 * 1024,
      default: 1_048_576,
      description:
        "What a stream's client may send at once above clientBytesPerSecond (the upgrade's own bytes included): its largest frame must fit.",
    }),
    keepAliveSeconds: Type.Integer({
      minimum: 0,
      maximum: 3600,
      default: 0,
      description:
        "Every this many seconds, a WebSocket ping from the gateway to the client and to the participant, each between two frames of the stream and only while nothing waits to be written to that side; the pongs that answer them are dropped, every frame of the stream passes unchanged. Canton's v2 streams send no keep-alive and pekko-http closes a connection idle for 60 s (load balancers on the way too): 30 keeps a quiet subscription open through them. A side that sends no byte for a whole interval after its ping is gone: the tunnel closes (ended_by keepalive_timeout). Pings count as traffic for idleTimeoutMs. 0: no pings (docs/forwarding.md).",
    }),
  },
  'WebSocket streams tunnelled to the participant.',
);

export const LimitsSchema = Section(
  {
    bodyBytes: Type.Integer({
      minimum: 1,
      maximum: 1024 * 1024 * 1024,
      default: 8_388_608,
      description:
        "The participant's own limit on a request body, which every body cap follows: larger gets 413 GATEWAY_REQUEST_TOO_LARGE. 8 MiB on Canton 3.4 and 3.5 (pekko-http's max-content-length, which Canton does not override); 10 MiB on 3.6 (http-ledger-api.max-inbound-message-size): set it to the participant's. Streamed bodies, and the submissions read only for their userId (tokenized as they arrive, never parsed whole), take up to this; so do the four routes whose rules read the whole document (parsed in a worker thread past 1 MiB), unless policy.maxBodyBytes sets them a lower cap.",
    }),
    bufferedBodyBytes: Type.Integer({
      minimum: 0,
      maximum: 1024 * 1024 * 1024,
      default: 33_554_432,
      description:
        'Bytes of request bodies held in memory at once, all callers together: rule-checked bodies and bodies up to upstream.bufferBodyBytes, counted in the bytes that arrived (never from a declared Content-Length) until their exchange ends. A chunk that would pass it is refused with 503 GATEWAY_BODY_BUFFER_EXHAUSTED, Retry-After: 1, before more of the body is read. The default keeps the process inside the shipped 416 MiB memory limit with the budget full and a worst body being parsed (docs/security.md). 0: no budget.',
    }),
    bufferedBodyShare: Type.Number({
      exclusiveMinimum: 0,
      maximum: 1,
      default: 0.25,
      description:
        'The largest share of bufferedBodyBytes one caller (its principal; its client address for a call without one) may hold; over it: 429 GATEWAY_RESOURCE_EXHAUSTED with limit gatewayPrincipalBodyBytes, Retry-After: 1. 1: no share.',
    }),
    pipelining: Section(
      {
        maxRequests: Type.Integer({
          minimum: 1,
          maximum: 65_536,
          default: 32,
          description:
            'Pipelined requests (RFC 9112 §9.3.2) one client connection may have waiting for their turn; at it the connection is not read until an answer frees a place (TCP backpressure). What one read already brought (at most 64 KiB) still waits.',
        }),
        maxBytes: Type.Integer({
          minimum: 1,
          maximum: 1024 * 1024 * 1024,
          default: 65_536,
          description:
            'Bytes of the heads of the pipelined requests one client connection may have waiting; at it the connection is not read until an answer frees a place.',
        }),
        totalRequests: Type.Integer({
          minimum: 1,
          maximum: 16_777_216,
          default: 8_192,
          description:
            'Pipelined requests waiting in all client connections together (about 1.6 KB of heap each); a request that would pass it closes its connection at once, unanswered (none of its waiting requests was run; its call in flight is cut), counted in ledger_gateway_pipelined_connections_cut_total.',
        }),
        totalBytes: Type.Integer({
          minimum: 1,
          maximum: 1024 * 1024 * 1024,
          default: 8_388_608,
          description:
            'Bytes of the heads of the pipelined requests waiting in all client connections together; a request that would pass it closes its connection as totalRequests does.',
        }),
      },
      'Requests pipelined on a client connection wait for their turn (each is run only when the answers before it are done); these bound what waits (docs/security.md).',
    ),
  },
  'Request limits.',
);

export const RoutesSchema = Section(
  {
    exposeParticipantHealth: Type.Boolean({
      default: false,
      description:
        "Forward GET /livez and /readyz to the participant (they are hidden by default; the gateway's own probes are on the admin port).",
    }),
    exposeParticipantDocs: Type.Boolean({
      default: false,
      description: 'Forward GET /docs/openapi and /docs/asyncapi to the participant.',
    }),
  },
  'Which participant routes outside /v2 are reachable through the gateway.',
);

export const ShutdownSchema = Section(
  {
    graceMs: Milliseconds(
      30_000,
      'On SIGTERM/SIGINT: readiness turns 503 at once, in-flight requests get this long to finish, then the process exits.',
    ),
    drainDelayMs: Milliseconds(
      0,
      'Time between turning unready and closing the listener, so load balancers notice (Kubernetes: a few seconds).',
      0,
    ),
  },
  'Graceful shutdown.',
);

/** What an access line may carry besides the request line's own fields (docs/errors-and-metrics.md, Access log). */
export const ACCESS_LOG_FIELDS = [
  'startTime',
  'clientAddress',
  'issuer',
  'subject',
  'consumer',
  'path',
  'requestBytes',
  'responseBytes',
  'upstreamReplica',
  'upstreamMs',
  'userAgent',
] as const;
export type AccessLogField = (typeof ACCESS_LOG_FIELDS)[number];

export const LogSchema = Section(
  {
    level: Type.Union(
      [
        Type.Literal('fatal'),
        Type.Literal('error'),
        Type.Literal('warn'),
        Type.Literal('info'),
        Type.Literal('debug'),
        Type.Literal('trace'),
        Type.Literal('silent'),
      ],
      { default: 'info', description: 'pino log level.' },
    ),
    access: Section(
      {
        enabled: Type.Boolean({
          default: true,
          description:
            'The request line becomes an access line (docs/errors-and-metrics.md, Access log): the fields below besides its own, and sampling: who did what from where. Off: the request line alone (reqId, operation, status, error code, duration, trace ids), a little cheaper (docs/performance.md).',
        }),
        fields: Type.Array(Type.Union(ACCESS_LOG_FIELDS.map((field) => Type.Literal(field))), {
          default: [...ACCESS_LOG_FIELDS],
          uniqueItems: true,
          description:
            'The access fields written besides reqId, operation, method, status, errorCode, durationMs and the trace ids (docs/errors-and-metrics.md, Access log, lists them).',
        }),
        successSampleRatio: Type.Number({
          minimum: 0,
          maximum: 1,
          default: 1,
          description:
            'Share of successful calls (status below 400, streams that opened) whose line is written; every refusal and error is written. 0.01 keeps 1% of 2xx.',
        }),
        redactPathParameters: Type.Array(Type.String({ minLength: 1 }), {
          default: [],
          uniqueItems: true,
          description:
            "Path template parameters written as [Redacted] (personal data, e.g. ['party', 'user-id']): names as in the route catalogue's templates.",
        }),
        includeQuery: Type.Boolean({
          default: false,
          description: 'Write the query string with the path (it may carry a user or party id).',
        }),
      },
      "The access log: one line per call and per WebSocket stream (written when the stream ends), with what an operator expects (Envoy's default access log).",
    ),
  },
  'Logging.',
);

/** A consumer's name: a metrics label value, a Redis key part and a log field; `unmapped` is reserved. */
export const CONSUMER_NAME_PATTERN = '^[a-z0-9][a-z0-9_.-]{0,62}$';

/** Calls a consumer may make in a UTC day and a UTC calendar month; unset: no quota of that period. */
const QuotaSchema = Type.Object(
  {
    perDay: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 1_000_000_000, description: 'Calls per UTC day (00:00 to 24:00 UTC).' }),
    ),
    perMonth: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 1_000_000_000,
        description: 'Calls per UTC calendar month (from the 1st, 00:00 UTC).',
      }),
    ),
  },
  { additionalProperties: false },
);

/** A budget's amounts: decimal text as Daml writes a Numeric (digits, at most one point, no exponent). */
export const BUDGET_DECIMAL_PATTERN = '^\\d{1,30}(\\.\\d{1,37})?$';

/** A budget over an argument of the consumer's calls: how much of it they may move in a UTC day (consumers/budgets.ts). */
const BudgetSchema = Type.Object(
  {
    name: Type.String({
      pattern: CONSUMER_NAME_PATTERN,
      description:
        "The budget's name (as a consumer's): context.budget of its refusals, the `budget` label of its metric, its RateLimit item and Redis key. Unique within the consumer.",
    }),
    operations: Type.Array(Type.String({ minLength: 1 }), {
      minItems: 1,
      maxItems: 64,
      description:
        'The operations whose calls spend it, e.g. [submitAndWaitForTransaction, submitAndWait, submit]; the amount expression chooses among their commands.',
    }),
    amount: Type.String({
      minLength: 1,
      maxLength: 4_096,
      description:
        'A CEL expression over the call\'s ledger-policy decision document (docs/ledger-policy.md) giving the amount the call spends: a decimal (a string as Daml writes a Numeric, or an int), or a list of them, summed. Type-checked at load. E.g. commands.filter(c, c.choice == "Transfer").map(c, c.choiceArgument.amount).',
    }),
    scale: Type.Integer({
      minimum: 0,
      maximum: 37,
      description:
        "Decimal places counted (Daml's Numeric 10 has ten): an amount with more is refused (GATEWAY_BUDGET_AMOUNT_INVALID). A change starts the day's count again.",
    }),
    perDay: Type.String({
      pattern: BUDGET_DECIMAL_PATTERN,
      description:
        'The sum a consumer may spend per UTC day, a decimal with at most `scale` places; at most 2^53 units of 10^-scale (Redis counts exactly up to there).',
    }),
  },
  { additionalProperties: false },
);

/** One consumer: its name, how its calls are recognised, its upstream credentials and its quotas (consumers/). */
export const ConsumerSchema = Type.Object(
  {
    name: Type.String({
      pattern: CONSUMER_NAME_PATTERN,
      description:
        'The consumer\'s name (lower case, digits, "_", ".", "-"; at most 63): the `consumer` label of the metrics, the access log\'s and audit records\' field, the ledger policy\'s principal.consumer. Unique; "unmapped" is reserved for calls no consumer claims.',
    }),
    userId: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 128,
        description:
          "The Ledger API user a call by gateway key acts as (the principal's subject: limits, authorization rules, the submitting-user rule); it should be the sub of the consumer's brokered tokens. Default: the consumer's name.",
      }),
    ),
    match: Type.Object(
      {
        tokens: Type.Optional(
          Type.Array(
            Type.Object(
              {
                issuer: Type.Optional(Type.String({ minLength: 1, description: "The token's iss." })),
                azp: Type.Optional(Type.String({ minLength: 1, description: "The token's azp (authorized party)." })),
                clientId: Type.Optional(
                  Type.String({ minLength: 1, description: "The token's client_id claim (RFC 9068)." }),
                ),
                sub: Type.Optional(Type.String({ minLength: 1, description: "The token's sub." })),
              },
              {
                additionalProperties: false,
                description: 'A verified token belongs to the consumer when every claim named here equals its value.',
              },
            ),
            { minItems: 1, description: 'Verified tokens of this consumer: any entry that matches.' },
          ),
        ),
        certificates: Type.Optional(
          Type.Object(
            {
              subjects: Type.Optional(
                Type.Array(Type.String({ minLength: 1 }), {
                  minItems: 1,
                  uniqueItems: true,
                  description: "Subjects as RFC 4514 strings (e.g. CN=payments,O=Example) of the client's certificate.",
                }),
              ),
              dnsNames: Type.Optional(
                Type.Array(Type.String({ minLength: 1 }), {
                  minItems: 1,
                  uniqueItems: true,
                  description: "DNS names of the certificate's subjectAltName.",
                }),
              ),
            },
            {
              additionalProperties: false,
              description:
                'A call whose connection presented a client certificate that server.tls.clientCaFile verified, naming one of these, belongs to the consumer (when no token entry claimed it). It classifies; it never replaces the token.',
            },
          ),
        ),
      },
      {
        additionalProperties: false,
        default: {},
        description:
          "How calls with a verified token are recognised as this consumer; calls by gateway key belong to the key's consumer.",
      },
    ),
    upstreamToken: Type.Optional(
      Type.Object(
        {
          tokenUrl: Type.String({
            pattern: '^https?://',
            description:
              "The token endpoint of the participant's identity provider (OAuth 2.0 client credentials, RFC 6749 §4.4).",
          }),
          clientId: Type.String({ minLength: 1, description: 'The OAuth client id.' }),
          clientSecret: Type.String({
            minLength: 1,
            secret: true,
            description: 'The OAuth client secret, e.g. ${file:/run/secrets/payments-client-secret}; never logged.',
          }),
          clientAuthentication: Type.Union([Type.Literal('basic'), Type.Literal('post')], {
            default: 'basic',
            description:
              'How the client authenticates at the token endpoint: basic (HTTP Basic, client_secret_basic) or post (in the form, client_secret_post).',
          }),
          scope: Type.Optional(
            Type.String({ minLength: 1, description: 'The scope asked for (e.g. daml_ledger_api).' }),
          ),
          parameters: Type.Record(Type.String({ pattern: '^[A-Za-z0-9_.-]{1,64}$' }), Type.String(), {
            default: {},
            description:
              'Further form parameters of the token request, e.g. { audience: https://daml.com/jwt/aud/participant/p1 } (Auth0) or { resource: ... } (RFC 8707).',
          }),
        },
        {
          additionalProperties: false,
          description:
            "Brokered Canton tokens: the gateway obtains the consumer's token itself and sends it to the participant on every call and stream of the consumer, in place of the client's credential (docs/consumers.md).",
        },
      ),
    ),
    quotas: Type.Object(
      {
        default: Type.Object(QuotaSchema.properties, {
          additionalProperties: false,
          default: {},
          description: 'The quota of every operation without its own entry; each operation is counted on its own.',
        }),
        operations: Type.Record(Type.String({ minLength: 1 }), QuotaSchema, {
          default: {},
          description: 'Quotas by operation name; a key set here replaces the same key of default.',
        }),
      },
      {
        additionalProperties: false,
        default: {},
        description:
          'Calls per UTC day and month, per operation; over it: 429 GATEWAY_QUOTA_EXHAUSTED. Exact across replicas with protection.redis (kept across restarts); in memory otherwise (a restart starts them again).',
      },
    ),
    budgets: Type.Array(BudgetSchema, {
      default: [],
      maxItems: 32,
      description:
        "Budgets over an argument of the consumer's calls, per UTC day (e.g. the sum of `amount` it may transfer): the call that would pass one gets 429 GATEWAY_BUDGET_EXHAUSTED and counts nothing. Spent once the ledger policy admitted the call, before it is forwarded. Exact across replicas with protection.redis (kept across restarts); in memory otherwise (docs/consumers.md).",
    }),
  },
  { additionalProperties: false },
);

export const ConsumersSchema = Section(
  {
    list: Type.Array(ConsumerSchema, {
      default: [],
      maxItems: 1_000,
      description:
        'The consumers, by name. Empty: no consumer is recognised, no gateway key accepted, nothing counted per consumer (and nothing costs a call).',
    }),
    keys: Section(
      {
        store: Type.Union([Type.Literal('none'), Type.Literal('file'), Type.Literal('redis')], {
          default: 'none',
          description:
            'Where gateway keys (lgk_...) are kept, as SHA-256 hashes only: none (no key accepted), file (keys.file, e.g. a mounted Secret; re-read every refreshIntervalMs) or redis (protection.redis, shared by every replica; a revocation reaches each within a second).',
        }),
        file: Type.Optional(
          Type.String({
            minLength: 1,
            description: 'The key file with store: file (written by `ledger-gateway keys create|revoke`).',
          }),
        ),
        refreshIntervalMs: Milliseconds(
          500,
          'How often the key file is read again, or the Redis key set polled (besides its change notices).',
          100,
        ),
      },
      'Gateway keys: opaque bearer keys, each of one consumer, with an expiry, allowed source addresses and operations (docs/consumers.md).',
    ),
    upstreamTokens: Section(
      {
        timeoutMs: Milliseconds(
          5_000,
          "Bound on one token request to a consumer's token endpoint; past it the calls waiting get 503 GATEWAY_UPSTREAM_TOKEN_UNAVAILABLE.",
        ),
        refreshBeforeExpirySeconds: Type.Integer({
          minimum: 1,
          maximum: 3_600,
          default: 60,
          description:
            'A brokered token is refreshed once it has less than this left (one request per consumer, however many calls wait).',
        }),
        minRemainingSeconds: Type.Integer({
          minimum: 1,
          maximum: 3_600,
          default: 30,
          description:
            'A brokered token with less than this left is not sent: calls wait for the refresh instead. Keep it above upstream.timeoutMs, so that a call waiting for an upstream connection never sends an expired token.',
        }),
      },
      "Brokered Canton tokens (consumers' upstreamToken).",
    ),
  },
  'Consumers: who calls, by gateway key, token claims or client certificate; their brokered Canton tokens, quotas and usage (docs/consumers.md). Reloads live.',
);

const AuditLevel = Type.Union(
  [Type.Literal('none'), Type.Literal('metadata'), Type.Literal('request'), Type.Literal('body')],
  {
    description:
      'none: not audited; metadata: who, when, which operation, from where; request: and the identifying fields of the request (command, submission and workflow ids, parties, user, rights, package ids); body: and the whole request body.',
  },
);

export const AuditSchema = Section(
  {
    enabled: Type.Boolean({
      default: false,
      description:
        'Write the audit trail of ledger writes (docs/audit.md): an intent record before each write is forwarded, an outcome record after its answer.',
    }),
    directory: Type.String({
      minLength: 1,
      default: 'audit',
      description:
        'Where the trail files (JSON Lines, audit-*.jsonl) are written; created if missing. Keep it on a persistent volume.',
    }),
    durable: Type.Boolean({
      default: true,
      description:
        'A write is forwarded only once its intent record is on disk (O_DSYNC writes, group-committed): a process killed at any point leaves no write the participant received unrecorded. false: written but not synced (a process crash keeps it, a power loss may not).',
    }),
    failMode: Type.Union([Type.Literal('closed'), Type.Literal('open')], {
      default: 'closed',
      description:
        'When the trail cannot be written (disk full, I/O error, writeTimeoutMs passed): closed refuses the write with 503 GATEWAY_AUDIT_UNAVAILABLE (reads go on); open forwards it, counted in ledger_gateway_audit_records_lost_total.',
    }),
    writeTimeoutMs: Milliseconds(
      2_000,
      'Bound on waiting for an intent record to be on disk before the call is refused (closed) or forwarded unrecorded (open).',
    ),
    maxPendingRecords: Type.Integer({
      minimum: 1,
      maximum: 1_000_000,
      default: 10_000,
      description:
        'Records waiting to be written at most; past it a record is refused as if the trail could not be written.',
    }),
    maxPendingBytes: Type.Integer({
      minimum: 64 * 1024,
      maximum: 1024 * 1024 * 1024,
      default: 8 * 1024 * 1024,
      description:
        'Bytes of records (their JSON text) waiting to be written at most; past it a record is refused as if the trail could not be written.',
    }),
    maxRecordBytes: Type.Integer({
      minimum: 8 * 1024,
      maximum: 1024 * 1024,
      default: 64 * 1024,
      description:
        "A record's size on disk at most: past it an intent sheds its body (level body), then keeps only its request's ids, and says so in `shortened` (docs/audit.md).",
    }),
    callerBytesPerMinute: Type.Integer({
      minimum: 0,
      maximum: 2 ** 40,
      default: 8 * 1024 * 1024,
      description:
        "One caller's share of the trail (by token subject, or client address without a token): the bytes its writes' records add per minute, refilled at that rate. Past it a write is refused with 429 GATEWAY_AUDIT_SHARE_EXHAUSTED (failMode closed) or recorded with only its ids (open). 0: no share.",
    }),
    maxBatchRecords: Type.Integer({
      minimum: 1,
      maximum: 65_536,
      default: 512,
      description: 'Most records written and synced by one durable write (group commit).',
    }),
    rotateBytes: Type.Integer({
      minimum: 4096,
      maximum: 2 ** 40,
      default: 64 * 1024 * 1024,
      description: 'A trail file is closed (with a signed digest) and a new one begun past this size.',
    }),
    retainFiles: Type.Integer({
      minimum: 0,
      maximum: 1_000_000,
      default: 0,
      description:
        'Trail files kept in the directory, the oldest removed past it (after a retention record names them); 0: no bound by count (maxTrailBytes still bounds the size).',
    }),
    maxTrailBytes: Type.Integer({
      minimum: 0,
      maximum: 2 ** 50,
      default: 1024 * 1024 * 1024,
      description:
        "The trail's files in the directory together at most this size: as each file begins, the oldest past it are removed (after a retention record names them). Ship the files before. 0: no bound (the volume's free space is the bound: the LedgerGatewayAuditVolumeLow alert).",
    }),
    retryIntervalMs: Milliseconds(
      1_000,
      'After a write failure, how often the trail tries a new file (on its own timer, written or not).',
    ),
    signingKeyFile: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          'PEM Ed25519 private key (PKCS#8) signing the digest records; keep it apart from the trail (a secret volume). Unset: no digests (only the hash chain).',
      }),
    ),
    digestIntervalMs: Milliseconds(
      60_000,
      'A signed digest record at least this often while records are written, and at each file end.',
      100,
    ),
    stdout: Type.Boolean({
      default: false,
      description:
        'Also write each record to stdout (msg "audit"), for a log collector: best effort (dropped when stdout is slow, as log lines are); the files are the trail.',
    }),
    responseCaptureBytes: Type.Integer({
      minimum: 0,
      maximum: 16 * 1024 * 1024,
      default: 256 * 1024,
      description:
        "How much of an audited write's answer is kept to read its updateId, offset and record time (the answer passes unchanged).",
    }),
    policy: Section(
      {
        defaultLevel: { ...AuditLevel, default: 'request' },
        levels: Type.Record(Type.String({ minLength: 1 }), AuditLevel, {
          default: {},
          description:
            'Level by operation name (checked at start), over defaultLevel, e.g. { postV2Users: body, postV2Dars: metadata }. Only write operations are audited.',
        }),
      },
      'Which writes are audited and at which level; reloads live.',
    ),
  },
  'The audit trail of every ledger write (docs/audit.md).',
);

export const VersionCacheSchema = Section(
  {
    ttlSeconds: Type.Integer({
      minimum: 0,
      maximum: 86_400,
      default: 30,
      description: 'GET /v2/version answers are fresh for this long; 0 disables the cache.',
    }),
    staleIfErrorSeconds: Type.Integer({
      minimum: 0,
      maximum: 86_400,
      default: 300,
      description:
        'When a refresh fails (unreachable, timeout, 5xx), the last good answer is served this long past its freshness, marked x-cache: STALE.',
    }),
  },
  'The GET /v2/version cache.',
);

/** JWS algorithms an issuer may pin. No `none`; HS256 only with `unsafeHmacSecret` (checked in auth/config.ts). */
export const JWS_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
  'HS256',
] as const;
export type JwsAlgorithm = (typeof JWS_ALGORITHMS)[number];

export const IssuerSchema = Type.Object(
  {
    issuer: Type.String({
      minLength: 1,
      description:
        "The identity provider's issuer: the token's `iss` must equal it exactly and selects this entry (Canton: IDP config `issuer`).",
    }),
    jwksUrl: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          'Key source (exactly one per issuer): the JWKS URL (https; http only for loopback). Fetched at start, refreshed in the background and on an unknown `kid`; the last good keys are kept when a refresh fails. Tokens must carry a `kid`.',
      }),
    ),
    publicKeyFile: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          'Key source: a PEM file holding the public key (SPKI "PUBLIC KEY") or an X.509 certificate, for air-gapped clusters (Canton: jwt-rs-256-crt, jwt-es-256-crt, jwt-es-512-crt). No `kid` needed.',
      }),
    ),
    jwks: Type.Optional(
      Type.Object(
        {
          keys: Type.Array(Type.Object({ kty: Type.String({ minLength: 1 }) }, { additionalProperties: true }), {
            minItems: 1,
          }),
        },
        {
          additionalProperties: true,
          description:
            'Key source: an inline JWKS ({ keys: [...] }) of public keys, for air-gapped clusters. Tokens must carry a `kid`.',
        },
      ),
    ),
    unsafeHmacSecret: Type.Optional(
      Type.String({
        minLength: 32,
        secret: true,
        description:
          "Key source, DEVELOPMENT ONLY: an HS256 shared secret (at least 32 characters), like Canton's unsafe-jwt-hmac-256. Refused with a real upstream unless auth.unsafeAllowHmacWithParticipant is true.",
      }),
    ),
    audience: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          "When set, `aud` must contain this value (Canton: target-audience / IDP audience). With neither audience nor scope, Canton's default parsing applies.",
      }),
    ),
    scope: Type.Optional(
      Type.String({
        minLength: 1,
        pattern: '^\\S+$',
        description:
          'When set, `scope` (space-separated) or `scp` must contain this value (Canton: target-scope). With both audience and scope set, both must match.',
      }),
    ),
    algorithms: Type.Optional(
      Type.Array(Type.Unsafe<JwsAlgorithm>({ type: 'string', enum: [...JWS_ALGORITHMS] }), {
        minItems: 1,
        uniqueItems: true,
        description:
          'The pinned JWS algorithms. Default: [RS256, ES256, ES512] for jwksUrl and jwks; for publicKeyFile, [RS256] for an RSA key, else the ones the key fits; [HS256] for unsafeHmacSecret.',
      }),
    ),
  },
  { additionalProperties: false },
);

export const AuthSchema = Section(
  {
    issuers: Type.Array(IssuerSchema, {
      default: [],
      description:
        'One entry per identity provider; the token\'s `iss` selects it. Required unless participantIdentityProviders.enabled (the participant\'s IdPs alone) or upstream.url is "sandbox", where an empty list turns on the development issuer.',
    }),
    participantId: Type.Optional(
      Type.String({
        minLength: 1,
        description:
          "The participant's id: a Canton audience-based token (aud https://daml.com/jwt/aud/participant/<id>) must name it, and a scope-based token's aud, when present. Unset: any participant id is accepted, as Canton's parsing alone would.",
      }),
    ),
    maxTokenLifetimeSeconds: Type.Integer({
      minimum: 0,
      maximum: 31_536_000,
      default: 300,
      description:
        "Largest remaining lifetime (exp - now) accepted, as Canton's ledger-api.max-token-lifetime (5 minutes since 3.4.4); 0 = no limit. exp is always required.",
    }),
    clockToleranceSeconds: Type.Integer({
      minimum: 0,
      maximum: 300,
      default: 5,
      description: 'Clock skew allowed on exp, nbf, a future iat and the lifetime limit.',
    }),
    publicOperations: Type.Array(Type.String({ minLength: 1 }), {
      default: [],
      uniqueItems: true,
      description:
        'Operation names that need no token, e.g. [getVersion]. Default: none; every /v2 call and WebSocket upgrade needs one.',
    }),
    unsafeAllowHmacWithParticipant: Type.Boolean({
      default: false,
      description:
        'UNSAFE: allow an unsafeHmacSecret issuer with a real participant (a shared secret anyone holding it can mint tokens with). For test participants only.',
    }),
    keySets: Section(
      {
        fetchTimeoutMs: Milliseconds(5_000, 'Bound on one JWKS fetch (connect, headers and body).'),
        refreshIntervalMs: Milliseconds(
          300_000,
          'Background refresh of every JWKS (Canton caches JWKS for 5 minutes). A failed fetch is retried after unknownKeyCooldownMs; the last good keys stay in use.',
        ),
        unknownKeyCooldownMs: Milliseconds(
          5_000,
          'A token with an unknown kid triggers a refetch at most once per this period (and a failed fetch is retried after it).',
          100,
        ),
      },
      'JWKS fetching for jwksUrl issuers.',
    ),
    tokenCache: Section(
      {
        maxEntries: Type.Integer({
          minimum: 0,
          maximum: 1_000_000,
          default: 10_000,
          description:
            'Verified tokens remembered (by SHA-256 of the token), each until its exp at the latest; 0 disables the cache. A hit still checks expiry.',
        }),
        maxBytes: Type.Integer({
          minimum: 4_096,
          maximum: 1024 * 1024 * 1024,
          default: 8_388_608,
          description:
            'Bytes of the verified tokens remembered (the tokens as sent; the claims each keeps cost about as much again on the heap): past it the least recently used are forgotten, as past maxEntries. A token larger than it is not remembered.',
        }),
        negativeTtlMs: Milliseconds(
          5_000,
          'How long a refused token (bad signature, malformed, wrong audience, ...) is remembered so a flood of it costs one check; 0 disables. Time-dependent refusals (lifetime, not yet valid) and key set failures are never remembered.',
          0,
        ),
      },
      'The verified-token cache.',
    ),
    participantIdentityProviders: Section(
      {
        enabled: Type.Boolean({
          default: false,
          description:
            'Also trust the identity providers configured on the participant (GET /v2/idps), as the participant does: each active one by its issuer, jwksUrl and audience; deactivated ones are dropped. Configured issuers win on a conflict. Reloads live: turned on, off or re-timed by a reload (docs/live-configuration.md).',
        }),
        refreshIntervalSeconds: Type.Integer({
          minimum: 1,
          maximum: 86_400,
          default: 60,
          description:
            'How often the list is fetched; a POST, PATCH or DELETE of /v2/idps answered with success through the gateway refreshes it at once.',
        }),
        tokenFile: Type.Optional(
          Type.String({
            minLength: 1,
            description:
              'File holding a participant-admin bearer token for GET /v2/idps, read at each use (a mounted secret can rotate). Unset: the list is fetched without a token.',
          }),
        ),
        allowedJwksHosts: Type.Array(Type.String({ minLength: 1 }), {
          default: [],
          uniqueItems: true,
          description:
            "Host names, IP addresses or CIDRs (e.g. 10.20.0.0/16) an IdP's jwksUrl may name although they are loopback, link-local or private: such addresses are refused otherwise, whether written in the URL or resolved from its name. The participant's IdPs are set by whoever administers the participant, not by the gateway's operator. An allowed host is held to the configured issuers' rule (https; http only on loopback); any other jwksUrl must be https.",
        }),
        maxIdentityProviders: Type.Integer({
          minimum: 1,
          maximum: 10_000,
          default: 100,
          description:
            'At most this many of the participant\'s active IdPs are trusted (in the order listed); the rest are left out, logged and counted in ledger_gateway_participant_idps_left_out{reason="cap"}. Each one trusted costs a key set, fetched at each change of the list.',
        }),
        retryBackoffMaxSeconds: Type.Integer({
          minimum: 1,
          maximum: 86_400,
          default: 3_600,
          description:
            'An IdP left out because its keys could not be fetched is tried again after refreshIntervalSeconds, then after twice as long at each further failure, up to this bound; a change of that IdP through the gateway tries it at once.',
        }),
      },
      "The participant's identity provider configs, trusted as the participant trusts them.",
    ),
  },
  'Authentication: every /v2 call and WebSocket upgrade carries a bearer JWT, verified here before anything is forwarded, as the participant verifies it (docs/authentication.md).',
);

export const TelemetrySchema = Section(
  {
    metrics: Section(
      {
        exemplars: Type.Boolean({
          default: false,
          description:
            'Attach the trace id of a sampled request as an OpenMetrics exemplar to the two duration histograms. /metrics then answers in the OpenMetrics format (application/openmetrics-text); Prometheus keeps exemplars only with --enable-feature=exemplar-storage.',
        }),
        maxUpstreamErrorCodes: Type.Integer({
          minimum: 0,
          maximum: 10_000,
          default: 100,
          description:
            "Distinct participant error codes kept as error_code label values; a code first seen after this many is counted as OTHER (bounded cardinality). The gateway's own codes never count.",
        }),
      },
      'Prometheus metrics on the admin listener (GET /metrics).',
    ),
  },
  'Metrics, traces and logs. Tracing is configured by the standard OTEL_* environment variables (docs/errors-and-metrics.md).',
);

export const RateLimitSchema = Type.Object(
  {
    requests: Type.Integer({
      minimum: 1,
      maximum: 1_000_000,
      description:
        'Requests allowed per caller in each perSeconds period, spread evenly (GCRA: one every perSeconds/requests seconds).',
    }),
    perSeconds: Type.Integer({
      minimum: 1,
      maximum: 86_400,
      default: 1,
      description: 'The period of `requests`, in seconds.',
    }),
    burst: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 1_000_000,
        description: 'Requests a rested caller may send at once before the even spacing applies. Default: `requests`.',
      }),
    ),
  },
  { additionalProperties: false },
);

export const OperationLimitsSchema = Type.Object(
  {
    rate: Type.Optional(
      Type.Union([RateLimitSchema, Type.Null()], {
        description:
          "Rate limit per caller (the token's `sub`; the client address for calls without a principal). null: none.",
      }),
    ),
    maxInFlightPerPrincipal: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 1_000_000,
        description: 'Concurrent calls (and open WebSocket streams) of this operation per caller; 0: no cap.',
      }),
    ),
    maxInFlight: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 1_000_000,
        description:
          'Concurrent calls (and open WebSocket streams) of this operation, all callers together; 0: no cap.',
      }),
    ),
  },
  { additionalProperties: false },
);

/** host:port of a Redis node or sentinel (an IPv6 address in brackets). */
const RedisNodeAddress = Type.String({ pattern: '^(\\[[0-9A-Fa-f:.]+\\]|[^\\s:\\[\\]/]+):\\d{1,5}$' });

export const ProtectionSchema = Section(
  {
    maxInFlight: Type.Integer({
      minimum: 0,
      maximum: 1_000_000,
      default: 1024,
      description:
        'Concurrent calls and open WebSocket streams in this gateway process, all operations and callers together (per replica, never shared, so it holds while Redis is down); over it: 429. 0: no cap.',
    }),
    default: Type.Object(OperationLimitsSchema.properties, {
      additionalProperties: false,
      default: {},
      description:
        'Limits for every operation without its own entry under `operations`; each operation is counted separately. Empty: no limits.',
    }),
    operations: Type.Record(Type.String({ minLength: 1 }), OperationLimitsSchema, {
      default: {},
      description:
        'Per-operation limits by operation name (docs/request-policy.md); a key set here replaces the same key of `default`, the others are inherited.',
    }),
    principalShare: Type.Number({
      exclusiveMinimum: 0,
      maximum: 1,
      default: 0.25,
      description:
        'The largest share of maxInFlight one caller (its principal; its client address for a call without ' +
        'one) may hold in this process, calls and WebSocket streams together (at least 1 slot); over it: 429 with ' +
        'limit gatewayPrincipalConcurrency. 1: no share, one caller may take every slot.',
    }),
    unauthenticated: Section(
      {
        rate: Type.Union([RateLimitSchema, Type.Null()], {
          default: { requests: 5, perSeconds: 1, burst: 100 },
          description:
            'Budget of calls without a token the gateway has already verified (no token, a refused one, or a ' +
            'new one whose signature it must check), per client address (as resolved through server.trustedProxies; an ' +
            'IPv6 address by its /64). A unit is spent before any signature check and given back when the token proves ' +
            'valid, so refusals are what count: a flood of made-up tokens costs a burst of checks, then 429 with limit ' +
            'unauthenticatedRate. A call with a verified token spends none. Shared through Redis when one is set (redis.url, sentinel or cluster). null: no ' +
            'budget.',
        }),
        refusalDelayMs: Type.Integer({
          minimum: 0,
          maximum: 60_000,
          default: 1_000,
          description:
            "How long a refusal over the budget is held before it is answered, as HAProxy's http-request " +
            'tarpit holds one: a client that sends its next call once the answer is in gets one refusal a second per ' +
            'connection, not as many as the gateway can write. One held at a time per connection (the others are ' +
            'answered at once, behind it). 0: answered at once.',
        }),
      },
      'Calls that present no verified token, counted by client address.',
    ),
    connections: Section(
      {
        max: Type.Integer({
          minimum: 0,
          maximum: 1_000_000,
          default: 10_000,
          description:
            'Open client connections on the API listener in this process; a connection over it is closed at ' +
            'once, unanswered (ledger_gateway_connections_refused_total{limit="total"}). 0: no cap.',
        }),
        maxPerAddress: Type.Integer({
          minimum: 0,
          maximum: 1_000_000,
          default: 1_000,
          description:
            'Open client connections from one peer address (an IPv6 one by its /64; server.trustedProxies are ' +
            'exempt, as they carry many clients); over it: closed at once, unanswered (limit="perAddress"). 0: no cap.',
        }),
      },
      'Caps on open client connections, checked when a connection is accepted (before TLS and any request).',
    ),
    failMode: Type.Union([Type.Literal('open'), Type.Literal('closed')], {
      default: 'open',
      description:
        'When Redis cannot answer: open admits the call (a warning at most every 30 s, metric ledger_gateway_protection_store_failures_total); closed refuses it with 503 GATEWAY_PROTECTION_UNAVAILABLE.',
    }),
    redis: Section(
      {
        url: Type.Optional(
          Type.String({
            pattern: '^rediss?://',
            secret: true,
            description:
              "redis:// or rediss:// URL of a single Redis node shared by every replica (credentials may be in the URL; it is never logged). Set one of url, sentinel and cluster; none: limits are kept in this process's memory.",
          }),
        ),
        sentinel: Type.Optional(
          Type.Object(
            {
              nodes: Type.Array(RedisNodeAddress, {
                minItems: 1,
                uniqueItems: true,
                description: 'Sentinels asked for the current master, as host:port; the first that answers is used.',
              }),
              masterName: Type.String({
                minLength: 1,
                description: 'The master group the sentinels watch (`sentinel monitor <masterName> ...`).',
              }),
              username: Type.Optional(
                Type.String({
                  minLength: 1,
                  description: 'ACL user of the sentinels themselves (Redis 6+); unset: none.',
                }),
              ),
              password: Type.Optional(
                Type.String({
                  minLength: 1,
                  secret: true,
                  description:
                    "Password of the sentinels themselves (sentinel requirepass), e.g. ${file:/run/secrets/sentinel-password}; never logged. The master's own is redis.password.",
                }),
              ),
            },
            {
              additionalProperties: false,
              description:
                'Redis behind Sentinel: the gateway asks the sentinels for the master and follows a failover (docs/traffic-protection.md#redis-sentinel-and-cluster).',
            },
          ),
        ),
        cluster: Type.Optional(
          Type.Object(
            {
              nodes: Type.Array(RedisNodeAddress, {
                minItems: 1,
                uniqueItems: true,
                description:
                  'Seed nodes of a Redis Cluster, as host:port; the rest of the cluster and its slots are learnt from them.',
              }),
            },
            {
              additionalProperties: false,
              description:
                "Redis Cluster: each caller's keys stay in one hash slot; the gateway follows slot moves and failovers (docs/traffic-protection.md#redis-sentinel-and-cluster).",
            },
          ),
        ),
        username: Type.Optional(
          Type.String({
            minLength: 1,
            description: 'ACL user of the Redis data nodes with sentinel or cluster (with url, the URL carries it).',
          }),
        ),
        password: Type.Optional(
          Type.String({
            minLength: 1,
            secret: true,
            description:
              "Password of the Redis data nodes with sentinel or cluster (requirepass or the ACL user's), e.g. ${file:/run/secrets/redis-password}; never logged. With url, the URL carries it.",
          }),
        ),
        keyPrefix: Type.String({
          minLength: 1,
          maxLength: 100,
          default: 'ledger-gateway:',
          description: 'Prefix of every key the gateway writes; replicas sharing a budget use the same prefix.',
        }),
        commandTimeoutMs: Milliseconds(
          250,
          'Bound on one Redis command; a slower answer counts as a failure (failMode applies). Also bounds asking a sentinel for the master.',
        ),
        connectTimeoutMs: Milliseconds(
          2_000,
          'Bound on opening the Redis connection; reconnects back off up to 2 s while failMode applies.',
        ),
        leaseMs: Milliseconds(
          30_000,
          'Concurrency slots held in Redis are leases renewed every third of this; slots of a replica that died come back after it.',
          3_000,
        ),
        maxReplyBytes: Type.Integer({
          minimum: 64 * 1024,
          maximum: 64 * 1024 * 1024,
          default: 1024 * 1024,
          description:
            'Most bytes a Redis connection may receive toward one reply before it is cut (and reopened): a server that streams an endless reply cannot take the heap. The gateway\'s replies are a few bytes; a cluster\'s slot map a few KB. ledger_gateway_protection_store_errors_total{reason="reply_too_large"} counts the cuts.',
        }),
      },
      'The shared store (Redis) for the rate and concurrency limits of several replicas.',
    ),
    memory: Section(
      {
        maxKeys: Type.Integer({
          minimum: 1,
          maximum: 10_000_000,
          default: 100_000,
          description:
            'Rate-limit states kept in memory (one per caller and operation); the least recently used is forgotten first.',
        }),
      },
      'The in-memory store, used when no Redis (url, sentinel or cluster) is set.',
    ),
  },
  'Traffic protection: rate limits and concurrency caps per caller and operation, checked after authentication; over a limit: 429 GATEWAY_RESOURCE_EXHAUSTED with Retry-After.',
);

/** One authorization rule: every matcher it names must hold (policy/authorization.ts). */
export const AuthorizationRuleSchema = Type.Object(
  {
    effect: Type.Union([Type.Literal('allow'), Type.Literal('deny')], {
      default: 'allow',
      description: 'What a match decides: allow the call, or refuse it with 403.',
    }),
    anyAuthenticated: Type.Optional(Type.Literal(true, { description: 'Matches any verified token.' })),
    subjects: Type.Optional(
      Type.Array(Type.String({ minLength: 1 }), {
        minItems: 1,
        uniqueItems: true,
        description: "Matches when the token's `sub` (the Ledger API user id) is one of these.",
      }),
    ),
    issuers: Type.Optional(
      Type.Array(Type.String({ minLength: 1 }), {
        minItems: 1,
        uniqueItems: true,
        description: "Matches when the token's `iss` is one of these.",
      }),
    ),
    scope: Type.Optional(
      Type.String({
        minLength: 1,
        pattern: '^\\S+$',
        description: "Matches when the token's `scope` (space-separated) or `scp` holds this scope.",
      }),
    ),
    audience: Type.Optional(
      Type.String({ minLength: 1, description: "Matches when the token's `aud` holds this value." }),
    ),
    claims: Type.Optional(
      Type.Record(Type.String({ minLength: 1 }), Type.Union([Type.String(), Type.Number(), Type.Boolean()]), {
        description: 'Matches when each named claim equals the value (or, for an array claim, holds it).',
      }),
    ),
  },
  { additionalProperties: false },
);

const AddressList = (description: string) =>
  Type.Optional(Type.Array(Type.String({ minLength: 1 }), { minItems: 1, uniqueItems: true, description }));

/** One source rule: where a call may come from, by client address and client certificate (policy/sources.ts). */
export const SourceRuleSchema = Type.Object(
  {
    operations: Type.Optional(
      Type.Array(Type.String({ minLength: 1 }), {
        minItems: 1,
        uniqueItems: true,
        description: 'Operation names the rule applies to; without it, every operation (calls and WebSocket streams).',
      }),
    ),
    allow: AddressList(
      'IP addresses or CIDRs: a call whose client address (resolved through server.trustedProxies) is in none of them is refused 403 GATEWAY_SOURCE_NOT_ALLOWED.',
    ),
    deny: AddressList(
      'IP addresses or CIDRs: a call whose client address is in one of them is refused (before allow).',
    ),
    clientCertificate: Type.Optional(
      Type.Object(
        {
          subjects: Type.Optional(
            Type.Array(Type.String({ minLength: 1 }), {
              minItems: 1,
              uniqueItems: true,
              description:
                "Accepted subjects, as RFC 4514 strings of the certificate's subject (e.g. CN=platform-ops, or CN=ops,O=Example).",
            }),
          ),
          dnsNames: Type.Optional(
            Type.Array(Type.String({ minLength: 1 }), {
              minItems: 1,
              uniqueItems: true,
              description: "Accepted DNS names of the certificate's subjectAltName.",
            }),
          ),
        },
        {
          additionalProperties: false,
          description:
            'The call must come with a client certificate that server.tls.clientCaFile verified and that names one of these subjects or DNS names; it never replaces the token.',
        },
      ),
    ),
  },
  { additionalProperties: false },
);

export const PolicySchema = Section(
  {
    sources: Type.Array(SourceRuleSchema, {
      default: [],
      description:
        "Where calls may come from: every rule whose operations include the call's (or that names none) must let it through (deny, then allow, then clientCertificate); otherwise 403 GATEWAY_SOURCE_NOT_ALLOWED. Applies to WebSocket upgrades alike; reloads live.",
    }),
    rules: Type.Record(Type.String({ minLength: 1 }), Type.Array(AuthorizationRuleSchema, { minItems: 1 }), {
      default: {},
      description:
        'Authorization per operation name: the first rule that matches the token decides; a call no rule allows is refused (403). An operation without rules is open to any authenticated caller. Unknown operation names and rules without a matcher stop the process at start.',
    }),
    requestRules: Type.Boolean({
      default: true,
      description:
        "Answer the requests the participant would refuse (updateVettedPackages, getUpdateByOffset, updateIdentityProviderConfig, submitAndWaitForTransaction; on every other submission route, a userId other than the token's) at the edge, in its error shape. Only these routes have their bodies read.",
    }),
    maxBodyBytes: Type.Optional(
      Type.Integer({
        minimum: 1024,
        maximum: 1024 * 1024 * 1024,
        description:
          "Unset (the default): a rule-checked route's body (read whole and parsed) takes what limits.bodyBytes, the participant's limit, allows, as every other route's. Set: a lower cap on those four routes' bodies only; larger gets 413 GATEWAY_REQUEST_TOO_LARGE before anything is parsed (the lower of this and limits.bodyBytes applies). Bodies up to 1 MiB are parsed on the event loop; larger ones in a worker thread with a bounded heap, so that no body stalls other calls (docs/security.md).",
      }),
    ),
    maxBodyDepth: Type.Integer({
      minimum: 8,
      maximum: 10_000,
      default: 512,
      description: 'Deepest JSON nesting accepted in a rule-checked body; deeper gets 400 GATEWAY_MALFORMED_REQUEST.',
    }),
    bodyReadTimeoutMs: Milliseconds(
      30_000,
      'Bound on receiving a rule-checked body; slower gets 400 GATEWAY_MALFORMED_REQUEST and the connection is closed.',
    ),
  },
  "Per-operation authorization and Canton's request rules at the edge (docs/request-policy.md).",
);

export const CorsSchema = Section(
  {
    enabled: Type.Boolean({
      default: false,
      description: 'Answer CORS preflights and add CORS headers, for browser dApps calling the JSON API directly.',
    }),
    origins: Type.Array(Type.String({ minLength: 1 }), {
      default: [],
      uniqueItems: true,
      description:
        'Allowed origins, exactly as browsers send them (https://app.example.com); "*" allows any origin (never with credentials).',
    }),
    methods: Type.Array(Type.String({ minLength: 1, pattern: '^[A-Z]+$' }), {
      default: ['GET', 'POST', 'PATCH', 'DELETE'],
      uniqueItems: true,
      description: 'Methods a preflight allows.',
    }),
    allowedHeaders: Type.Array(Type.String({ minLength: 1 }), {
      default: ['authorization', 'content-type', 'traceparent', 'tracestate'],
      uniqueItems: true,
      description: 'Request headers a preflight allows.',
    }),
    exposedHeaders: Type.Array(Type.String({ minLength: 1 }), {
      default: ['x-request-id', 'retry-after'],
      uniqueItems: true,
      description:
        'Response headers a browser script may read: the correlation id of every answer, and how long to wait after a 429 or 503.',
    }),
    maxAgeSeconds: Type.Integer({
      minimum: 0,
      maximum: 86_400,
      default: 600,
      description: 'How long a browser may cache a preflight answer.',
    }),
    credentials: Type.Boolean({
      default: false,
      description:
        'Send Access-Control-Allow-Credentials: true (cookies or client certificates from the browser). Bearer tokens do not need it.',
    }),
  },
  'CORS for browser dApps: off by default; preflights are answered before authentication (browsers send no token on them).',
);

const NameList = (description: string) =>
  Type.Optional(Type.Array(Type.String({ minLength: 1 }), { minItems: 1, uniqueItems: true, description }));

const Instant = (description: string) =>
  Type.Optional(
    Type.String({ minLength: 1, description: `${description} An RFC 3339 time, e.g. 2026-10-01T00:00:00Z.` }),
  );

/** One ledger rule: what it allows or denies of a call's decision document (ledger-policy/rules.ts). */
export const LedgerRuleSchema = Type.Object(
  {
    name: Type.String({
      pattern: '^[A-Za-z0-9_.:-]{1,64}$',
      description:
        "The rule's name: in a refusal's context, the log, the metrics and `policy test` (never its conditions).",
    }),
    effect: Type.Union([Type.Literal('allow'), Type.Literal('deny')], {
      default: 'allow',
      description:
        'allow: the rule covers a call all of whose parties, packages, rights and read templates it lists (and each command it lists); deny: the rule refuses a call that touches any of them.',
    }),
    operations: NameList(
      'Operation names (docs/request-policy.md), or the groups "reads" and "writes"; without it, every operation.',
    ),
    parties: NameList(
      'Every party the call names (actAs, readAs, submitter, a read\'s parties, the party of a party or rights call): party ids, "Hint::*" prefixes, "*", "$claims.<name>" (the token\'s claim, a string or a list) or "$userId".',
    ),
    actAs: NameList(
      "The call's actAs parties (a prepared transaction's submitters at execute), in the forms of parties.",
    ),
    readAs: NameList("The call's readAs parties, in the forms of parties."),
    templates: NameList(
      'Templates of commands and read filters: "#<package-name>:<Module>:<Entity>" ("*" for module or entity, "#<package-name>:*"), "<package-id>:<Module>:<Entity>", or "*". A package-name form also holds for a template named by package id (resolved through the participant).',
    ),
    choices: NameList(
      'Choice names of exercise commands (ExerciseCommand, CreateAndExerciseCommand, ExerciseByKeyCommand).',
    ),
    commandKinds: Type.Optional(
      Type.Array(
        Type.Union(
          [
            Type.Literal('CreateCommand'),
            Type.Literal('ExerciseCommand'),
            Type.Literal('CreateAndExerciseCommand'),
            Type.Literal('ExerciseByKeyCommand'),
            Type.Literal('AssignCommand'),
            Type.Literal('UnassignCommand'),
            Type.Literal('FetchNode'),
          ],
          { description: "Canton's command variants (FetchNode: a prepared transaction's fetch root)." },
        ),
        { minItems: 1, uniqueItems: true, description: 'Command kinds.' },
      ),
    ),
    packages: NameList(
      'Package names uploaded, vetted or unvetted ("*" for any; an uploaded archive is not opened: only "*" covers it).',
    ),
    rights: NameList(
      'Right kinds granted, revoked or given to a new user (CanActAs, CanReadAs, CanExecuteAs, ParticipantAdmin, IdentityProviderAdmin, ...).',
    ),
    notBefore: Instant('The rule holds from this time on.'),
    notAfter: Instant('The rule holds until this time.'),
    where: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 4096,
        description:
          'A CEL condition on the decision document (docs/ledger-policy.md), type-checked when the configuration is loaded; the rule holds only when it is true.',
      }),
    ),
  },
  { additionalProperties: false },
);

/** Who a ledger policy is for: every matcher it names must hold. */
export const LedgerPrincipalsSchema = Type.Object(
  {
    anyAuthenticated: Type.Optional(Type.Literal(true, { description: 'Every caller with a verified token.' })),
    subjects: NameList("The token's `sub` (the Ledger API user id) is one of these."),
    issuers: NameList("The token's `iss` is one of these."),
    claims: Type.Optional(
      Type.Record(Type.String({ minLength: 1 }), Type.Union([Type.String(), Type.Number(), Type.Boolean()]), {
        description: 'Each named claim equals the value (or, for an array claim, holds it).',
      }),
    ),
    consumers: NameList('The API consumer name is one of these (where consumer keys exist).'),
    certificateSubjects: NameList('The verified client certificate subject, RFC 4514 (e.g. CN=ci,O=Example).'),
    certificateDnsNames: NameList("A DNS name of the verified client certificate's subjectAltName."),
    sources: NameList('The client address (through server.trustedProxies) is in one of these addresses or CIDRs.'),
  },
  { additionalProperties: false },
);

export const LedgerPolicyEntrySchema = Type.Object(
  {
    name: Type.String({
      pattern: '^[A-Za-z0-9_.:-]{1,64}$',
      description: "The policy's name (refusals, logs, metrics).",
    }),
    principals: LedgerPrincipalsSchema,
    dryRun: Type.Boolean({
      default: false,
      description: 'Decide and record, never refuse: what the policy would refuse is counted and logged.',
    }),
    notBefore: Instant('Its allow rules hold from this time on (its principals stay named: denied by default before).'),
    notAfter: Instant('Its allow rules hold until this time (then its principals are denied by default).'),
    rules: Type.Array(LedgerRuleSchema, {
      default: [],
      description: 'The rules; deny rules first, then allow, else denied.',
    }),
  },
  { additionalProperties: false },
);

/** A break-glass principal: allowed everything by the ledger policy, each use logged at warn, counted and audited. */
export const LedgerBreakGlassSchema = Type.Object(
  {
    name: Type.String({
      pattern: '^[A-Za-z0-9_.:-]{1,64}$',
      description: "The entry's name: the `policy` of its decisions (metric, access log, audit record, warning).",
    }),
    principals: LedgerPrincipalsSchema,
    notBefore: Instant('It holds from this time on (before, its principals are judged by the policies).'),
    notAfter: Instant('It holds until this time (then its principals are judged by the policies).'),
  },
  { additionalProperties: false },
);

export const LedgerPolicySchema = Section(
  {
    policies: Type.Array(LedgerPolicyEntrySchema, {
      default: [],
      description:
        'Ledger policies (docs/ledger-policy.md): a caller a policy names may do only what its allow rules cover and its deny rules do not touch; a caller no policy names is left to the other rules. Reloads live; a rule that does not compile (its path and why) stops the start or the reload.',
    }),
    breakGlass: Type.Array(LedgerBreakGlassSchema, {
      default: [],
      description:
        'Break-glass principals (docs/ledger-policy.md#break-glass): a caller one names is allowed everything the ledger policy could refuse, whatever the policies say; each call is logged at warn, counted with decision breakGlass and written to the audit record (alert LedgerGatewayLedgerPolicyBreakGlassUsed). Authentication, authorization and the request rules still apply.',
    }),
    packageNames: Section(
      {
        cacheEntries: Type.Integer({
          minimum: 1,
          maximum: 1_000_000,
          default: 10_000,
          description: 'Package ids whose names are kept (package ids are immutable: a name never changes).',
        }),
        lookupTimeoutMs: Milliseconds(
          2_000,
          "Bound on asking the participant a package id's name (POST /v2/package-vetting/list); past it the call is refused (fail closed).",
        ),
        unknownRetryMs: Milliseconds(
          10_000,
          'How long a package id the participant does not know is remembered as unknown before it is asked again.',
        ),
      },
      'Resolving package ids to names, for package-name rules on templates named by id.',
    ),
    preparedTransactions: Section(
      {
        workerThreads: Type.Integer({
          minimum: 1,
          maximum: 64,
          default: 1,
          description:
            'Worker threads decoding prepared transactions (every one is decoded in a worker: only they load the protobuf bindings), and reading the bodies over 1 MiB of a caller a policy names into their decision documents.',
        }),
        maxQueue: Type.Integer({
          minimum: 1,
          maximum: 100_000,
          default: 64,
          description:
            'Prepared transactions and large bodies waiting for a worker at most; past it a call is refused (503, retry).',
        }),
        timeoutMs: Milliseconds(
          5_000,
          'Bound on decoding one prepared transaction, or reading one large body, its wait included.',
        ),
        maxValueDepth: Type.Integer({
          minimum: 8,
          maximum: 10_000,
          default: 256,
          description: 'Deepest Daml value read from a prepared transaction; deeper is refused as unreadable.',
        }),
        maxRoots: Type.Integer({
          minimum: 1,
          maximum: 1_000_000,
          default: 10_000,
          description: 'Most root nodes read.',
        }),
      },
      "Decoding the preparedTransaction of execute calls, and reading a governed caller's bodies over 1 MiB (off the event loop).",
    ),
  },
  'Ledger policy: who may do what on the ledger, by parties, templates, choices, command kinds, packages and rights, with CEL conditions (docs/ledger-policy.md).',
);

export const ConfigSchema = Type.Object(
  {
    server: ServerSchema,
    admin: AdminSchema,
    upstream: UpstreamSchema,
    websocket: WebSocketSchema,
    limits: LimitsSchema,
    routes: RoutesSchema,
    shutdown: ShutdownSchema,
    log: LogSchema,
    versionCache: VersionCacheSchema,
    auth: AuthSchema,
    telemetry: TelemetrySchema,
    protection: ProtectionSchema,
    policy: PolicySchema,
    ledgerPolicy: LedgerPolicySchema,
    cors: CorsSchema,
    audit: AuditSchema,
    consumers: ConsumersSchema,
  },
  { additionalProperties: false },
);

export type GatewayConfig = Static<typeof ConfigSchema>;
export type UpstreamConfig = Static<typeof UpstreamSchema>;
export type AuthConfig = Static<typeof AuthSchema>;
export type IssuerConfig = Static<typeof IssuerSchema>;
export type ProtectionConfig = Static<typeof ProtectionSchema>;
export type LimitsConfig = Static<typeof LimitsSchema>;
export type OperationLimitsConfig = Static<typeof OperationLimitsSchema>;
export type RateLimitConfig = Static<typeof RateLimitSchema>;
export type PolicyConfig = Static<typeof PolicySchema>;
export type AuthorizationRuleConfig = Static<typeof AuthorizationRuleSchema>;
export type CorsConfig = Static<typeof CorsSchema>;
export type AuditConfig = Static<typeof AuditSchema>;
export type ConsumersConfig = Static<typeof ConsumersSchema>;
export type ConsumerConfig = Static<typeof ConsumerSchema>;
export type AuditLevelName = Static<typeof AuditLevel>;
export type AccessLogConfig = Static<typeof LogSchema>['access'];
export type ServerConfig = Static<typeof ServerSchema>;
export type ListenerTlsConfig = ServerConfig['tls'];
export type AdminConfig = Static<typeof AdminSchema>;
export type WebSocketConfig = Static<typeof WebSocketSchema>;
export type RoutesConfig = Static<typeof RoutesSchema>;
export type ShutdownConfig = Static<typeof ShutdownSchema>;
export type LogConfig = Static<typeof LogSchema>;
export type VersionCacheConfig = Static<typeof VersionCacheSchema>;
export type TelemetryConfig = Static<typeof TelemetrySchema>;
export type MetricsConfig = TelemetryConfig['metrics'];
export type SourceRuleConfig = Static<typeof SourceRuleSchema>;
export type LedgerPolicyConfig = Static<typeof LedgerPolicySchema>;
export type LedgerPolicyEntryConfig = Static<typeof LedgerPolicyEntrySchema>;
export type LedgerRuleConfig = Static<typeof LedgerRuleSchema>;
export type LedgerPrincipalsConfig = Static<typeof LedgerPrincipalsSchema>;
export type LedgerBreakGlassConfig = Static<typeof LedgerBreakGlassSchema>;
