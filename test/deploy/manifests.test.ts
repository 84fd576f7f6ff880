// The Kubernetes manifests (deploy/kubernetes): both overlays rendered with `kubectl kustomize`,
// every object validated against the Kubernetes and Prometheus Operator schemas, then what no
// schema catches: ports and paths against the config the pods mount, what the Ingress and Services
// expose, NetworkPolicy selectors, the shutdown arithmetic, the native sidecar.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { GatewayConfig } from '../../src/config/schema.js';
import {
  DEPLOY, DOWNWARD_API_TEST_VALUES, GATEWAY_CONTAINER, configPathOf, containerEnvironment, effectiveConfig, findObject,
  gatewayWorkload, mountedConfigMapFile, objectsOfKind, readDockerfile, renderKustomization, resolveContainerPort,
  selectorMatches, type Container, type GatewayWorkload, type KubernetesObject,
} from './manifests.js';
import { schemaProblems, unknownFieldProblems } from './schemas.js';

const OVERLAYS = ['ingress', 'sidecar'] as const;
const SPLICE_VALUES = join(DEPLOY, 'kubernetes/overlays/sidecar/splice-participant-values.yaml');

interface Rendered {
  readonly objects: KubernetesObject[];
  readonly gateway: GatewayWorkload;
  readonly env: Record<string, string>;
  readonly config: GatewayConfig;
}

const renderedOverlays = new Map<string, Rendered>();

/** Rendered once per file; called inside each test so that a failure (no kubectl) fails every test. */
function renderOverlay(overlay: (typeof OVERLAYS)[number]): Rendered {
  const cached = renderedOverlays.get(overlay);
  if (cached !== undefined) return cached;
  const objects = renderKustomization(overlay);
  const gateway = gatewayWorkload(objects);
  const env = containerEnvironment(gateway.container, DOWNWARD_API_TEST_VALUES);
  const config = effectiveConfig(mountedConfigMapFile(objects, gateway, configPathOf(readDockerfile().argv)), env);
  const rendered = { objects, gateway, env, config };
  renderedOverlays.set(overlay, rendered);
  return rendered;
}

/** Bytes of a Kubernetes quantity such as 512Mi or 1Gi. */
function bytesOf(quantity: string): number {
  const match = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|K|M|G)?$/.exec(quantity);
  if (match === null) throw new Error(`unexpected memory quantity ${quantity}`);
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, K: 1e3, M: 1e6, G: 1e9 }[match[2] as 'Ki'] ?? 1;
  return Number(match[1]) * unit;
}

/** Services selecting the gateway's pod (the API Service, and in the ingress overlay the admin one). */
function podServices(rendered: Rendered): KubernetesObject[] {
  return objectsOfKind(rendered.objects, 'Service').filter((service) => selectorMatches(service.spec.selector, rendered.gateway.podLabels));
}

function servicePortTargets(service: KubernetesObject, container: Container): number[] {
  return (service.spec.ports as Array<{ port: number; targetPort?: number | string }>).map((port) => resolveContainerPort(container, port.targetPort ?? port.port));
}

describe('schemas', () => {
  it('every rendered object, and the Splice values\' sidecar, validates and has no unknown field', () => {
    const objects = [...renderKustomization('base'), ...OVERLAYS.flatMap((overlay) => renderKustomization(overlay))];
    expect(schemaProblems(objects)).toEqual([]);

    const values = parse(readFileSync(SPLICE_VALUES, 'utf8'), { version: '1.1' }) as { extraInitContainers: Container[] };
    const splicePod: KubernetesObject = {
      apiVersion: 'v1', kind: 'Pod', metadata: { name: 'splice-participant-values' },
      spec: { initContainers: values.extraInitContainers, containers: [{ name: 'participant', image: 'canton-participant' }] },
    };
    expect(schemaProblems([splicePod])).toEqual([]);
    expect(unknownFieldProblems([...objects, splicePod])).toEqual([]);
  }, 60_000); // type-checks every object against the models' TypeScript interfaces

  it('names an unknown field and a wrong type (the checks can fail)', () => {
    const [deployment] = renderKustomization('base').filter((o) => o.kind === 'Deployment');
    const broken = structuredClone(deployment!);
    broken.spec.template.spec.containers[0].securityContext.readOnlyRootFilesytem = true;
    expect(unknownFieldProblems([broken]).join('\n')).toContain('readOnlyRootFilesytem');
    broken.spec.template.spec.containers[0].ports[0].containerPort = '8080';
    expect(schemaProblems([broken]).join('\n')).toContain('containerPort must be integer');
  }, 60_000);
});

describe.each(OVERLAYS)('overlay %s', (overlay) => {
  it('mounts a valid gateway config where the image\'s entry command reads it, for a real participant', () => {
    const rendered = renderOverlay(overlay);
    const container = rendered.gateway.container;
    // renderOverlay validated the file (with the container's env overrides) against the schema.
    expect(rendered.config.upstream.url).not.toBe('sandbox');
    expect(rendered.config.auth.issuers.length).toBeGreaterThan(0);
    // The image's own command line runs, with its --config path.
    expect(container.command).toBeUndefined();
    expect(container.args).toBeUndefined();
  });

  it('mounts every file the config names from a Secret', () => {
    const rendered = renderOverlay(overlay);
    const container = rendered.gateway.container;
    const config = rendered.config;
    const files = [
      ...config.auth.issuers.flatMap((issuer) => (issuer.publicKeyFile === undefined ? [] : [issuer.publicKeyFile])),
      ...[config.upstream.tls.caFile, config.upstream.tls.certFile, config.upstream.tls.keyFile].filter((file): file is string => file !== undefined),
    ];
    const volumes = rendered.gateway.podSpec.volumes as Array<{ name: string; secret?: { secretName: string; defaultMode?: number } }>;
    const secretMounts = (container.volumeMounts ?? []).filter((mount) => volumes.find((v) => v.name === mount.name)?.secret !== undefined);
    for (const file of files) {
      expect(secretMounts.some((mount) => file.startsWith(`${mount.mountPath}/`)), `${file} lies under a Secret mount`).toBe(true);
    }
    for (const mount of secretMounts) {
      expect(mount.readOnly).toBe(true);
      // Files without the "others" read bit are readable through the pod's fsGroup only.
      const mode = volumes.find((v) => v.name === mount.name)!.secret!.defaultMode ?? 0o644;
      if ((mode & 0o004) === 0) expect(rendered.gateway.podSpec.securityContext?.fsGroup, 'fsGroup for group-readable secret files').toBeGreaterThan(0);
    }
  });

  it('probes /livez and /readyz on the admin port of the config', () => {
    const rendered = renderOverlay(overlay);
    const container = rendered.gateway.container;
    const { config } = rendered;
    expect(container.startupProbe?.httpGet?.path).toBe('/livez'); // never /readyz: a sidecar must start before its participant
    expect(container.livenessProbe?.httpGet?.path).toBe('/livez');
    expect(container.readinessProbe?.httpGet?.path).toBe('/readyz');
    for (const probe of [container.startupProbe, container.livenessProbe, container.readinessProbe]) {
      expect(resolveContainerPort(container, probe!.httpGet!.port)).toBe(config.admin.port);
    }
    // /readyz re-probes a failing participant for up to min(2 s, readinessIntervalMs) before answering.
    expect(container.readinessProbe!.timeoutSeconds! * 1000).toBeGreaterThan(Math.min(2_000, config.upstream.readinessIntervalMs));
    const ports = (container.ports ?? []).map((port) => port.containerPort);
    expect(ports).toContain(config.server.port);
    expect(ports).toContain(config.admin.port);
    expect(config.server.port).not.toBe(config.admin.port);
    // The kubelet and Prometheus reach the pod address, not loopback.
    expect(['0.0.0.0', '::']).toContain(config.admin.host);
    expect(['0.0.0.0', '::']).toContain(config.server.host);
  });

  it('gives the pod more time to stop than preStop + drain delay + drain grace + the final span export', () => {
    const rendered = renderOverlay(overlay);
    const container = rendered.gateway.container;
    const { config, env, gateway } = rendered;
    expect(container.lifecycle?.preStop?.exec, 'the distroless image has no shell or sleep binary').toBeUndefined();
    const preStopSeconds = container.lifecycle?.preStop?.sleep?.seconds;
    expect(preStopSeconds).toBeGreaterThan(0);
    const exportSeconds = Number(env.OTEL_BSP_EXPORT_TIMEOUT ?? 30_000) / 1000; // the SDK's default when unset
    const needed = preStopSeconds! + (config.shutdown.drainDelayMs + config.shutdown.graceMs) / 1000 + exportSeconds;
    expect(gateway.podSpec.terminationGracePeriodSeconds).toBeGreaterThan(needed);
  });

  it('runs unprivileged: non-root, read-only root filesystem, no privilege escalation, no capabilities, seccomp', () => {
    const rendered = renderOverlay(overlay);
    const container = rendered.gateway.container;
    const security = container.securityContext ?? {};
    expect(security.runAsNonRoot).toBe(true);
    expect(security.runAsUser ?? rendered.gateway.podSpec.securityContext?.runAsUser).toBeGreaterThan(0);
    expect(security.readOnlyRootFilesystem).toBe(true);
    expect(security.allowPrivilegeEscalation).toBe(false);
    expect(security.privileged ?? false).toBe(false);
    expect(security.capabilities?.drop).toContain('ALL');
    expect(security.capabilities?.add ?? []).toEqual([]);
    expect(security.seccompProfile?.type).toBe('RuntimeDefault');
    expect(rendered.gateway.podSpec.automountServiceAccountToken).toBe(false);
  });

  it('sets resource requests and limits, with the V8 heap below the memory limit', () => {
    const rendered = renderOverlay(overlay);
    const container = rendered.gateway.container;
    const { requests, limits } = container.resources ?? {};
    for (const resource of ['cpu', 'memory']) {
      expect(requests?.[resource], `requests.${resource}`).toBeDefined();
      expect(limits?.[resource], `limits.${resource}`).toBeDefined();
    }
    expect(bytesOf(requests!.memory!)).toBeLessThanOrEqual(bytesOf(limits!.memory!));
    const heapMiB = Number(/--max-old-space-size=(\d+)/.exec(rendered.env.NODE_OPTIONS ?? '')?.[1]);
    expect(heapMiB * 2 ** 20).toBeLessThan(bytesOf(limits!.memory!));
  });

  it('configures OpenTelemetry through the standard variables', () => {
    const rendered = renderOverlay(overlay);
    const { env } = rendered;
    expect(env.OTEL_SERVICE_NAME).toBe('ledger-gateway');
    expect(() => new URL(env.OTEL_EXPORTER_OTLP_ENDPOINT!)).not.toThrow();
    expect(env.OTEL_TRACES_SAMPLER).toBeDefined();
    // $(VAR) references resolve to variables defined before them.
    expect(env.OTEL_RESOURCE_ATTRIBUTES).toContain(`k8s.pod.name=${DOWNWARD_API_TEST_VALUES['metadata.name']}`);
    for (const value of Object.values(env)) expect(value).not.toMatch(/\$\(/);
  });

  it('ships the alert rules of deploy/prometheus/alerts.yaml as its PrometheusRule', () => {
    const rendered = renderOverlay(overlay);
    const alerts = parse(readFileSync(join(DEPLOY, 'prometheus/alerts.yaml'), 'utf8')) as { groups: unknown[] };
    const [rule, ...others] = objectsOfKind(rendered.objects, 'PrometheusRule');
    expect(others).toEqual([]);
    expect(rule!.spec.groups, 'regenerate with: node deploy/kubernetes/generate-prometheus-rule.mjs').toEqual(alerts.groups);
  });

  it('exposes only the API port through the Services that select the gateway pod (admin only to the ServiceMonitor)', () => {
    const rendered = renderOverlay(overlay);
    const container = rendered.gateway.container;
    const { config } = rendered;
    const services = podServices(rendered);
    expect(services.length).toBeGreaterThan(0);
    for (const service of services) {
      const targets = servicePortTargets(service, container);
      if (targets.includes(config.admin.port)) {
        // The admin Service: admin port only, and no Ingress routes to it (checked in the ingress overlay).
        expect(targets, `${service.metadata.name}`).toEqual([config.admin.port]);
      } else {
        expect(targets, `${service.metadata.name}`).toEqual([config.server.port]);
      }
    }
  });

  it('pins an image tag', () => {
    const rendered = renderOverlay(overlay);
    const container = rendered.gateway.container;
    expect(container.image).toMatch(/^[^:@]+(:[\w][\w.-]*|@sha256:[a-f0-9]{64})$/);
    expect(container.image).not.toMatch(/:latest$/);
  });
});

describe('overlay ingress', () => {

  it('runs two or more replicas, autoscaled, spread across nodes, with a disruption budget', () => {
    const rendered = renderOverlay('ingress');
    const { workload, podLabels, podSpec } = rendered.gateway;
    expect(workload.kind).toBe('Deployment');
    expect(workload.spec.replicas).toBeGreaterThanOrEqual(2);
    const [autoscaler] = objectsOfKind(rendered.objects, 'HorizontalPodAutoscaler');
    expect(autoscaler!.spec.scaleTargetRef).toMatchObject({ kind: 'Deployment', name: workload.metadata.name });
    expect(autoscaler!.spec.minReplicas).toBeGreaterThanOrEqual(2);
    expect(autoscaler!.spec.maxReplicas).toBeGreaterThan(autoscaler!.spec.minReplicas);
    const spread = (podSpec.topologySpreadConstraints as Array<{ topologyKey: string; whenUnsatisfiable: string; labelSelector: { matchLabels: Record<string, string> } }>)
      .find((constraint) => constraint.topologyKey === 'kubernetes.io/hostname');
    expect(spread?.whenUnsatisfiable).toBe('DoNotSchedule');
    expect(selectorMatches(spread?.labelSelector.matchLabels, podLabels)).toBe(true);
    const [budget] = objectsOfKind(rendered.objects, 'PodDisruptionBudget');
    expect(selectorMatches(budget!.spec.selector.matchLabels, podLabels)).toBe(true);
    expect(budget!.spec.maxUnavailable ?? 0).toBeGreaterThanOrEqual(1); // a drain can proceed
    expect(workload.spec.selector.matchLabels).toEqual(Object.fromEntries(Object.entries(podLabels).filter(([key]) => key in workload.spec.selector.matchLabels)));
  });

  it('lets the drain grace cover a call that started just before SIGTERM', () => {
    const rendered = renderOverlay('ingress');
    expect(rendered.config.shutdown.graceMs).toBeGreaterThanOrEqual(rendered.config.upstream.timeoutMs);
  });

  it('routes the Ingress to the API port only, never to the admin port', () => {
    const rendered = renderOverlay('ingress');
    const { config, gateway } = rendered;
    const ingresses = objectsOfKind(rendered.objects, 'Ingress');
    expect(ingresses.length).toBeGreaterThan(0);
    for (const ingress of ingresses) {
      const backends = [
        ...(ingress.spec.defaultBackend ? [ingress.spec.defaultBackend] : []),
        ...(ingress.spec.rules ?? []).flatMap((rule: { http?: { paths: Array<{ backend: unknown }> } }) => rule.http?.paths.map((path) => path.backend) ?? []),
      ] as Array<{ service: { name: string; port: { name?: string; number?: number } } }>;
      expect(backends.length).toBeGreaterThan(0);
      for (const backend of backends) {
        const service = findObject(rendered.objects, 'Service', backend.service.name);
        expect(selectorMatches(service.spec.selector, gateway.podLabels)).toBe(true);
        // Every port of a Service an Ingress points at targets the API listener.
        expect(servicePortTargets(service, gateway.container).every((port) => port === config.server.port)).toBe(true);
        const port = (service.spec.ports as Array<{ name?: string; port: number; targetPort: number | string }>)
          .find((p) => (backend.service.port.name !== undefined ? p.name === backend.service.port.name : p.port === backend.service.port.number));
        expect(port, `${service.metadata.name} port ${JSON.stringify(backend.service.port)}`).toBeDefined();
        expect(resolveContainerPort(gateway.container, port!.targetPort)).toBe(config.server.port);
      }
    }
  });

  it('scrapes the admin port with a ServiceMonitor', () => {
    const rendered = renderOverlay('ingress');
    const { config, gateway } = rendered;
    const [monitor] = objectsOfKind(rendered.objects, 'ServiceMonitor');
    const services = objectsOfKind(rendered.objects, 'Service').filter((service) => selectorMatches(monitor!.spec.selector.matchLabels, service.metadata.labels ?? {}));
    expect(services.map((s) => s.metadata.name)).toEqual(['ledger-gateway-admin']);
    const endpoint = monitor!.spec.endpoints[0] as { port: string; path: string };
    expect(endpoint.path).toBe('/metrics');
    const port = (services[0]!.spec.ports as Array<{ name: string; targetPort: number | string }>).find((p) => p.name === endpoint.port);
    expect(resolveContainerPort(gateway.container, port!.targetPort)).toBe(config.admin.port);
  });

  describe('NetworkPolicies', () => {
    type Peer = { podSelector?: { matchLabels?: Record<string, string> }; namespaceSelector?: { matchLabels?: Record<string, string> }; ipBlock?: unknown };
    type Rule = { from?: Peer[]; ports?: Array<{ port: number | string }> };

    it('use explicit, non-empty pod selectors everywhere', () => {
      const rendered = renderOverlay('ingress');
      const policies = objectsOfKind(rendered.objects, 'NetworkPolicy');
      expect(policies.length).toBeGreaterThanOrEqual(2);
      for (const policy of policies) {
        expect(Object.keys(policy.spec.podSelector?.matchLabels ?? {}).length, `${policy.metadata.name} spec.podSelector`).toBeGreaterThan(0);
        for (const rule of (policy.spec.ingress ?? []) as Rule[]) {
          for (const peer of rule.from ?? []) {
            expect(Object.keys(peer.podSelector?.matchLabels ?? {}).length, `${policy.metadata.name}: a peer selects pods explicitly`).toBeGreaterThan(0);
          }
        }
      }
    });

    it('let only the ingress controller reach the API port and only Prometheus the admin port', () => {
      const rendered = renderOverlay('ingress');
      const { config, gateway } = rendered;
      const policies = objectsOfKind(rendered.objects, 'NetworkPolicy');
      const own = policies.filter((policy) => selectorMatches(policy.spec.podSelector.matchLabels, gateway.podLabels));
      expect(own.length).toBe(1);
      const rules = own[0]!.spec.ingress as Rule[];
      for (const rule of rules) {
        expect(rule.ports, 'every rule names its ports').toBeDefined();
        expect(rule.from, 'every rule names its sources').toBeDefined();
      }
      const sourcesOf = (port: number) => rules.filter((rule) => rule.ports!.some((p) => resolveContainerPort(gateway.container, p.port) === port)).flatMap((rule) => rule.from!);
      const admin = sourcesOf(config.admin.port);
      expect(admin.length).toBeGreaterThan(0);
      for (const peer of admin) expect(peer.podSelector?.matchLabels?.['app.kubernetes.io/name']).toBe('prometheus');
      const api = sourcesOf(config.server.port);
      expect(api.length).toBeGreaterThan(0);
      for (const peer of api) expect(peer.podSelector?.matchLabels?.['app.kubernetes.io/name']).toBe('ingress-nginx');
    });

    it('let only gateway pods reach the participant\'s JSON API port', () => {
      const rendered = renderOverlay('ingress');
      const { config, gateway } = rendered;
      const upstreamPort = Number(new URL(config.upstream.url).port);
      const policies = objectsOfKind(rendered.objects, 'NetworkPolicy');
      const participant = policies.filter((policy) => !selectorMatches(policy.spec.podSelector.matchLabels, gateway.podLabels));
      expect(participant.length).toBe(1);
      const rules = participant[0]!.spec.ingress as Rule[];
      const opening = rules.filter((rule) => rule.ports === undefined || rule.ports.some((p) => Number(p.port) === upstreamPort));
      expect(opening.length).toBe(1);
      expect(opening[0]!.from?.length).toBeGreaterThan(0);
      for (const peer of opening[0]!.from!) {
        expect(peer.namespaceSelector, 'same namespace').toBeUndefined();
        expect(selectorMatches(peer.podSelector?.matchLabels, gateway.podLabels)).toBe(true);
      }
    });
  });
});

describe('overlay sidecar', () => {

  it('runs the gateway as a native sidecar in the participant\'s pod, the base\'s container unchanged', () => {
    const rendered = renderOverlay('sidecar');
    const { gateway, objects } = rendered;
    expect(gateway.list).toBe('initContainers');
    expect(gateway.container.restartPolicy).toBe('Always');
    expect(gateway.podSpec.containers.map((c: Container) => c.name)).not.toContain(GATEWAY_CONTAINER);
    expect(objects.filter((o) => o.kind === 'Deployment' && o.metadata.name === 'ledger-gateway')).toEqual([]);
    const { restartPolicy: _restartPolicy, ...sidecar } = gateway.container;
    expect(sidecar).toEqual(gatewayWorkload(renderKustomization('base')).container);
  });

  it('listens to the participant on loopback, where its JSON API is bound (http-ledger-api.address = 127.0.0.1)', () => {
    const rendered = renderOverlay('sidecar');
    const { config, gateway } = rendered;
    const upstream = new URL(config.upstream.url);
    expect(upstream.hostname).toBe('127.0.0.1');
    const participant = (gateway.podSpec.containers as Container[]).find((c) => c.name !== GATEWAY_CONTAINER)!;
    const cantonConfig = (participant.env ?? []).map((variable) => variable.value ?? '').join('\n');
    expect(cantonConfig).toMatch(/http-ledger-api\.address\s*=\s*"?127\.0\.0\.1"?/);
    // The JSON API port is not declared as reachable.
    expect((participant.ports ?? []).map((p) => p.containerPort)).not.toContain(Number(upstream.port));
  });

  it('points its Service at the gateway port only, and its PodMonitor at the admin port', () => {
    const rendered = renderOverlay('sidecar');
    const { config, gateway, objects } = rendered;
    const services = podServices(rendered);
    expect(services.length).toBe(1);
    expect(servicePortTargets(services[0]!, gateway.container)).toEqual([config.server.port]);
    const [monitor] = objectsOfKind(objects, 'PodMonitor');
    expect(selectorMatches(monitor!.spec.selector.matchLabels, gateway.podLabels)).toBe(true);
    const endpoint = monitor!.spec.podMetricsEndpoints[0] as { port: string; path: string };
    expect(endpoint.path).toBe('/metrics');
    expect(resolveContainerPort(gateway.container, endpoint.port)).toBe(config.admin.port);
  });

  it('gives the Splice participant chart the same sidecar through its values', () => {
    const rendered = renderOverlay('sidecar');
    const values = parse(readFileSync(SPLICE_VALUES, 'utf8'), { version: '1.1' }) as {
      additionalEnvVars: Array<{ name: string; value: string }>;
      extraInitContainers: Container[];
      extraVolumes: Array<{ name: string; secret?: { secretName: string } }>;
    };
    expect(values.extraInitContainers).toEqual([rendered.gateway.container]);
    expect(values.additionalEnvVars.map((v) => v.value).join('\n')).toMatch(/http-ledger-api\.address\s*=\s*"?127\.0\.0\.1"?/);
    // The chart renders extraVolumes of kind secret (or PVC) only; every mount has its volume.
    for (const mount of rendered.gateway.container.volumeMounts ?? []) {
      expect(values.extraVolumes.find((volume) => volume.name === mount.name)?.secret?.secretName, mount.name).toBeDefined();
    }
  });
});
