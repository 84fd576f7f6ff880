// The Helm chart's own values (deploy/helm/ledger-gateway/values.yaml): their types and bounds. Their
// descriptions are the comments in values.yaml; `config` is the gateway's config schema
// (src/config/schema.ts), made fit for Helm by helm-chart.ts, which writes values.schema.json.
import { Type, type TSchema } from '@sinclair/typebox';

const Section = <T extends Parameters<typeof Type.Object>[0]>(properties: T) =>
  Type.Object(properties, { additionalProperties: false });

const Name = Type.String({ pattern: '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$', maxLength: 253 });
const OptionalName = Type.String({ pattern: '^([a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$', maxLength: 253 });
const Labels = Type.Record(Type.String({ minLength: 1 }), Type.String());
const Port = Type.Integer({ minimum: 1, maximum: 65535 });
/** What the chart hands to Kubernetes unchanged (a security context, affinity): the rendered objects are validated by the API server. */
const KubernetesObject = Type.Object({}, { additionalProperties: true });
const KubernetesList = Type.Array(KubernetesObject);
/** A Redis node as host:port (an IPv6 address in brackets), as the config takes it. */
const RedisAddress = Type.String({ pattern: '^(\\[[0-9A-Fa-f:.]+\\]|[^\\s:\\[\\]/]+):\\d{1,5}$' });
/** Whole MiB or GiB: the memory rule computes V8's old space from it. */
const MemoryLimit = Type.String({ pattern: '^[0-9]+(Mi|Gi)$' });
const Quantity = Type.Union([Type.String({ minLength: 1 }), Type.Number()]);
const Seconds = Type.Integer({ minimum: 0 });
/** A Prometheus duration. */
const Duration = Type.String({ pattern: '^([0-9]+(ms|s|m|h|d|w|y))+$' });
/** A Gateway API duration (GEP-2257). */
const GatewayDuration = Type.String({ pattern: '^([0-9]{1,5}(h|m|s|ms)){1,4}$' });

const SecretKey = Section({ name: OptionalName, key: Type.String({ minLength: 1 }) });

const Redis = Type.Object(
  {
    mode: Type.Union([Type.Literal(''), Type.Literal('node'), Type.Literal('sentinel'), Type.Literal('cluster')]),
    address: Type.Union([Type.Literal(''), RedisAddress]),
    tls: Type.Boolean(),
    nodes: Type.Array(RedisAddress, { uniqueItems: true }),
    masterName: Type.String(),
    username: Type.String(),
    passwordSecret: SecretKey,
    sentinelPasswordSecret: SecretKey,
  },
  {
    additionalProperties: false,
    // What each mode needs (draft-07 if/then, which Helm's validator applies).
    allOf: [
      { if: { properties: { mode: { const: 'node' } } }, then: { properties: { address: RedisAddress } } },
      {
        if: { properties: { mode: { const: 'sentinel' } } },
        then: { properties: { nodes: { minItems: 1 }, masterName: { minLength: 1 } } },
      },
      { if: { properties: { mode: { const: 'cluster' } } }, then: { properties: { nodes: { minItems: 1 } } } },
    ],
  },
);

const Resources = Section({
  requests: Type.Object(
    { cpu: Type.Optional(Quantity), memory: Type.Optional(Quantity) },
    { additionalProperties: Quantity },
  ),
  limits: Type.Object({ cpu: Type.Optional(Quantity), memory: MemoryLimit }, { additionalProperties: Quantity }),
});

const HttpRoute = Section({
  enabled: Type.Boolean(),
  hostnames: Type.Array(Type.String({ minLength: 1 })),
  parentRefs: KubernetesList,
  requestTimeout: GatewayDuration,
  gateway: Section({
    create: Type.Boolean(),
    name: Name,
    className: Type.String({ minLength: 1 }),
    hostname: Type.String({ minLength: 1 }),
    tlsSecretName: Name,
    annotations: Labels,
  }),
});

const Ingress = Section({
  enabled: Type.Boolean(),
  className: Type.String(),
  annotations: Labels,
  hosts: Type.Array(
    Section({
      host: Type.String({ minLength: 1 }),
      paths: Type.Array(
        Section({
          path: Type.String({ minLength: 1 }),
          pathType: Type.Union([Type.Literal('Prefix'), Type.Literal('Exact'), Type.Literal('ImplementationSpecific')]),
        }),
        { minItems: 1 },
      ),
    }),
  ),
  tls: KubernetesList,
});

const PeerPods = Section({ namespace: Name, podLabels: Labels });

const NetworkPolicy = Section({
  enabled: Type.Boolean(),
  proxies: PeerPods,
  prometheus: PeerPods,
  participant: Section({
    enabled: Type.Boolean(),
    podLabels: Labels,
    jsonApiPort: Port,
    otherPorts: Type.Array(Port, { uniqueItems: true }),
  }),
});

const Monitoring = Section({
  release: Type.String({ minLength: 1 }),
  monitor: Section({
    enabled: Type.Boolean(),
    kind: Type.Union([Type.Literal('auto'), Type.Literal('ServiceMonitor'), Type.Literal('PodMonitor')]),
    interval: Duration,
    scrapeTimeout: Duration,
  }),
  prometheusRule: Section({
    enabled: Type.Boolean(),
    runbookBaseUrl: Type.String({ pattern: '^https?://[^#]+$' }),
  }),
  dashboard: Section({
    enabled: Type.Boolean(),
    namespace: OptionalName,
    labels: Labels,
    annotations: Labels,
  }),
});

const Sidecar = Section({
  render: Type.Union([Type.Literal('none'), Type.Literal('patch'), Type.Literal('spliceValues')]),
  participant: Section({
    deployment: Name,
    container: Type.String({ minLength: 1 }),
    podLabels: Type.Record(Type.String({ minLength: 1 }), Type.String(), { minProperties: 1 }),
    jsonApiOnLoopback: Type.Boolean(),
    cantonName: Type.String({ pattern: '^[A-Za-z0-9_-]+$' }),
    terminationGracePeriodSeconds: Seconds,
    shutdownSeconds: Seconds,
  }),
});

/** Every value but `config`, whose schema helm-chart.ts adds; `global` is Helm's, for a parent chart. */
export function chartValueSchemas(config: TSchema): Record<string, TSchema> {
  return {
    global: Type.Optional(KubernetesObject),
    mode: Type.Union([Type.Literal('ingress'), Type.Literal('sidecar')]),
    nameOverride: Type.String(),
    fullnameOverride: Type.String(),
    image: Section({
      repository: Type.String({ minLength: 1 }),
      tag: Type.String(),
      digest: Type.String({ pattern: '^(sha256:[a-f0-9]{64})?$' }),
      pullPolicy: Type.Union([Type.Literal('Always'), Type.Literal('IfNotPresent'), Type.Literal('Never')]),
    }),
    imagePullSecrets: KubernetesList,
    config,
    rollOnConfigChange: Type.Boolean(),
    secrets: Section({ name: Name, optional: Type.Boolean() }),
    participantIdentityProviders: Section({ enabled: Type.Boolean(), tokenSecret: Name }),
    auditTrail: Section({ enabled: Type.Boolean(), claimName: Name, signingKeySecret: Name }),
    redis: Redis,
    resources: Resources,
    semiSpaceMiB: Type.Integer({ minimum: 1, maximum: 64 }),
    opentelemetry: Section({
      endpoint: Type.String({ pattern: '^https?://' }),
      protocol: Type.Union([Type.Literal('http/protobuf'), Type.Literal('http/json'), Type.Literal('grpc')]),
      exportTimeoutMs: Type.Integer({ minimum: 1, maximum: 60_000 }),
      sampler: Type.String({ minLength: 1 }),
      samplerArg: Type.String(),
    }),
    extraEnv: KubernetesList,
    podSecurityContext: KubernetesObject,
    securityContext: KubernetesObject,
    preStopSleepSeconds: Type.Integer({ minimum: 1, maximum: 60 }),
    terminationGracePeriodSeconds: Seconds,
    serviceAccount: Section({ create: Type.Boolean(), name: OptionalName }),
    replicaCount: Type.Integer({ minimum: 1 }),
    revisionHistoryLimit: Type.Integer({ minimum: 0 }),
    topologySpread: Type.Boolean(),
    podAnnotations: Labels,
    podLabels: Labels,
    nodeSelector: Labels,
    tolerations: KubernetesList,
    affinity: KubernetesObject,
    priorityClassName: Type.String(),
    autoscaling: Section({
      enabled: Type.Boolean(),
      minReplicas: Type.Integer({ minimum: 1 }),
      maxReplicas: Type.Integer({ minimum: 1 }),
      targetCPUUtilizationPercentage: Type.Integer({ minimum: 1, maximum: 100 }),
      scaleDownStabilizationSeconds: Type.Integer({ minimum: 0, maximum: 3600 }),
    }),
    podDisruptionBudget: Section({ enabled: Type.Boolean(), maxUnavailable: Type.Integer({ minimum: 1 }) }),
    service: Section({
      type: Type.Union([Type.Literal('ClusterIP'), Type.Literal('NodePort'), Type.Literal('LoadBalancer')]),
      port: Port,
      annotations: Labels,
    }),
    httpRoute: HttpRoute,
    ingress: Ingress,
    backendTls: Section({ enabled: Type.Boolean(), hostname: Type.String({ minLength: 1 }), caConfigMap: Name }),
    networkPolicy: NetworkPolicy,
    monitoring: Monitoring,
    sidecar: Sidecar,
  };
}
