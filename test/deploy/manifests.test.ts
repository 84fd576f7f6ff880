// The Kubernetes manifests (deploy/kubernetes): both overlays, and overlays of an operator's own
// with the components, rendered with `kubectl kustomize`, every object validated against the
// Kubernetes, Gateway API and Prometheus Operator schemas, then what no schema catches: ports and
// paths against the config the pods mount, what the Gateway API routes and the Services expose,
// NetworkPolicy selectors, the shutdown arithmetic, the native sidecar, the monitoring settings.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments, stringify } from 'yaml';
import {
  DEPLOY,
  DOWNWARD_API_TEST_VALUES,
  GATEWAY_CONTAINER,
  KUSTOMIZE_COMPONENTS,
  KUSTOMIZE_DIRS,
  findObject,
  gatewayWorkload,
  mountedFile,
  objectsOfKind,
  renderKustomization,
  renderOwnOverlay,
  resolveContainerPort,
  selectorMatches,
  subPathMounts,
  type Container,
  type KubernetesObject,
  type Volume,
} from './manifests.js';
import { environmentVariable } from '../../src/config/environment.js';
import { ROOT } from '../helpers/process.js';
import { schemaProblems, unknownFieldProblems } from './schemas.js';
import {
  bytesOf,
  configMapKeys,
  expectConfigFilesFromSecrets,
  expectLiveConfigMount,
  podSpecs,
  readRendered,
  type Rendered,
} from './gateway-pod.js';
import { describeNeeding } from '../helpers/tool-groups.js';

// Every group renders the overlays with `kubectl kustomize`.
const describeRendered = describeNeeding('kubectl');

// The renders block the worker (kubectl, TypeScript); a turn of its event loop between tests lets it
// answer its runner, whose calls time out after 60 s without one (a failed run on a loaded machine).
beforeEach(() => new Promise<void>((resolve) => setImmediate(resolve)));

const OVERLAYS = ['ingress', 'sidecar'] as const;
const SPLICE_VALUES = join(DEPLOY, 'kubernetes/overlays/sidecar/splice-participant-values.yaml');
const SPLICE_POST_RENDERER = join(DEPLOY, 'kubernetes/overlays/sidecar/splice-post-renderer.sh');

const renderedOverlays = new Map<string, Rendered>();

/** Rendered once per file; called inside each test so that a failure (no kubectl) fails every test. */
function renderOverlay(overlay: (typeof OVERLAYS)[number]): Rendered {
  const cached = renderedOverlays.get(overlay);
  if (cached !== undefined) return cached;
  const rendered = readRendered(renderKustomization(overlay));
  renderedOverlays.set(overlay, rendered);
  return rendered;
}

/** An overlay rendered with one component, valid against the schemas with no unknown field, and read back. */
function renderWithComponent(
  overlay: (typeof OVERLAYS)[number],
  component: string,
): { objects: KubernetesObject[]; rendered: Rendered } {
  const objects = renderOwnOverlay({ resources: [KUSTOMIZE_DIRS[overlay]], components: [component] });
  expect(schemaProblems(objects)).toEqual([]);
  expect(unknownFieldProblems(objects)).toEqual([]);
  // The keys come from the container's environment, validated with the ConfigMap's file.
  return { objects, rendered: readRendered(objects) };
}

/**
 * The gateway gets the same container from `component` in both overlays (but for the restartPolicy
 * only a sidecar has), with `count` of its variables named with `prefix`.
 */
function expectSameContainerInBothOverlays(component: string, prefix: string, count: number): void {
  const containers = OVERLAYS.map((overlay) => {
    const objects = renderOwnOverlay({ resources: [KUSTOMIZE_DIRS[overlay]], components: [component] });
    const { restartPolicy: _restartPolicy, ...container } = gatewayWorkload(objects).container;
    return container;
  });
  expect(containers[1]).toEqual(containers[0]);
  expect(containers[0]!.env?.filter((variable) => variable.name.startsWith(prefix)).length).toBe(count);
}

/**
 * What a component that mounts a Secret's file leaves as it was: no subPath mount anywhere, the
 * config's files from Secrets, the live config mount, and nothing but what `without` takes out.
 */
function expectComponentLeavesTheRest(
  overlay: (typeof OVERLAYS)[number],
  { objects, rendered }: { objects: KubernetesObject[]; rendered: Rendered },
  without: (objects: readonly KubernetesObject[]) => KubernetesObject[],
): void {
  const { gateway } = rendered;
  expect(podSpecs(objects).flatMap((pod) => subPathMounts(pod))).toEqual([]);
  expectConfigFilesFromSecrets(rendered);
  expectLiveConfigMount(gateway.podSpec.volumes as Volume[], gateway.container, configMapKeys(objects));
  expect(without(objects)).toEqual(renderOverlay(overlay).objects);
}

/**
 * The hop from the Gateway's proxies to the gateway: TLS exactly when the config gives the API
 * listener a certificate (server.tls), and then a BackendTLSPolicy on the port every route uses.
 */
function expectBackendTlsMatchesListener(rendered: Rendered): void {
  const { config, gateway, objects } = rendered;
  const listenerTls = config.server.tls.certFile !== undefined;
  const policies = objectsOfKind(objects, 'BackendTLSPolicy');
  const backends = (objectsOfKind(objects, 'HTTPRoute') as unknown as HttpRoute[]).flatMap((route) =>
    route.spec.rules.flatMap((rule) => rule.backendRefs ?? []),
  );
  expect(backends.length).toBeGreaterThan(0);
  for (const backend of backends) {
    const service = findObject(objects, 'Service', backend.name);
    const port = (
      service.spec.ports as Array<{ name?: string; port: number; targetPort: number | string; appProtocol?: string }>
    ).find((p) => p.port === backend.port)!;
    expect(resolveContainerPort(gateway.container, port.targetPort)).toBe(config.server.port);
    const targeting = policies.filter((policy) =>
      (policy.spec.targetRefs as Array<{ group: string; kind: string; name: string; sectionName?: string }>).some(
        (ref) =>
          ref.group === '' &&
          ref.kind === 'Service' &&
          ref.name === service.metadata.name &&
          (ref.sectionName === undefined || ref.sectionName === port.name),
      ),
    );
    expect(targeting.length, `BackendTLSPolicies for ${service.metadata.name} port ${port.name}`).toBe(
      listenerTls ? 1 : 0,
    );
    expect(port.appProtocol).toBe(listenerTls ? 'https' : 'http');
    if (listenerTls) {
      const validation = targeting[0]!.spec.validation as {
        hostname: string;
        caCertificateRefs?: Array<{ kind: string; name: string }>;
        wellKnownCACertificates?: string;
      };
      expect(validation.hostname).toMatch(/^[a-z0-9]/);
      expect(validation.caCertificateRefs?.map((ref) => ref.kind)).toEqual(['ConfigMap']);
      // One CA source only: a CEL rule of the CRD, which the models' JSON Schema does not carry.
      expect(validation.wellKnownCACertificates).toBeUndefined();
    }
  }
}

/** Milliseconds of a Gateway API duration (GEP-2257: 1h, 30s, 1m30s, 500ms); 0 disables a timeout. */
function gatewayApiDurationMs(duration: string): number {
  if (!/^([0-9]{1,5}(h|m|s|ms)){1,4}$/.test(duration)) throw new Error(`not a Gateway API duration: ${duration}`);
  const unit = { h: 3_600_000, m: 60_000, s: 1_000, ms: 1 };
  return [...duration.matchAll(/([0-9]+)(ms|h|m|s)/g)].reduce(
    (sum, [, value, u]) => sum + Number(value) * unit[u as keyof typeof unit],
    0,
  );
}

type HttpRoute = {
  metadata: { name: string };
  spec: {
    parentRefs: Array<{ kind?: string; name: string; sectionName?: string }>;
    hostnames?: string[];
    rules: Array<{
      backendRefs?: Array<{ kind?: string; name: string; port: number }>;
      timeouts?: { request?: string; backendRequest?: string };
    }>;
  };
};

interface GatewayListener {
  name: string;
  protocol?: string;
  hostname?: string;
  tls?: { mode?: string; certificateRefs?: unknown[] };
  allowedRoutes?: { namespaces?: { from?: string } };
}

/** The Gateways an HTTPRoute attaches to, each with the listener it names. */
function parentGateways(
  objects: readonly KubernetesObject[],
  route: HttpRoute,
): Array<{ gateway: KubernetesObject; listener: GatewayListener }> {
  return route.spec.parentRefs.map((parent) => {
    expect(parent.kind ?? 'Gateway').toBe('Gateway');
    const gateway = findObject(objects, 'Gateway', parent.name);
    const listener = (gateway.spec.listeners as GatewayListener[]).find(
      (l) => parent.sectionName === undefined || l.name === parent.sectionName,
    );
    expect(listener, `${parent.name} has a listener ${parent.sectionName}`).toBeDefined();
    return { gateway, listener: listener! };
  });
}

/** Services selecting the gateway's pod (the API Service, and in the ingress overlay the admin one). */
function podServices(rendered: Rendered): KubernetesObject[] {
  return objectsOfKind(rendered.objects, 'Service').filter((service) =>
    selectorMatches(service.spec.selector, rendered.gateway.podLabels),
  );
}

function servicePortTargets(service: KubernetesObject, container: Container): number[] {
  return (service.spec.ports as Array<{ port: number; targetPort?: number | string }>).map((port) =>
    resolveContainerPort(container, port.targetPort ?? port.port),
  );
}

describeRendered('schemas', () => {
  it("every rendered object, and the Splice values' sidecar, validates and has no unknown field", () => {
    const objects = [...renderKustomization('base'), ...OVERLAYS.flatMap((overlay) => renderKustomization(overlay))];
    expect(schemaProblems(objects)).toEqual([]);

    const values = parse(readFileSync(SPLICE_VALUES, 'utf8'), { version: '1.1' }) as {
      extraInitContainers: Container[];
    };
    const splicePod: KubernetesObject = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'splice-participant-values' },
      spec: {
        initContainers: values.extraInitContainers,
        containers: [{ name: 'participant', image: 'canton-participant' }],
      },
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

    const [route] = renderKustomization('ingress').filter((o) => o.kind === 'HTTPRoute');
    const brokenRoute = structuredClone(route!);
    brokenRoute.spec.rules[0].timeouts.request = 'forever';
    expect(schemaProblems([brokenRoute]).join('\n')).toContain('timeouts/request must match pattern');
    brokenRoute.spec.rules[0].timeout = '0s';
    expect(unknownFieldProblems([brokenRoute]).join('\n')).toContain('\'"timeout"\' does not exist');

    // v1alpha2's singular targetRef, a hostname that is no DNS name, a CA set by the wrong case.
    const policy: KubernetesObject = {
      apiVersion: 'gateway.networking.k8s.io/v1',
      kind: 'BackendTLSPolicy',
      metadata: { name: 'p' },
      spec: {
        targetRef: { group: '', kind: 'Service', name: 's' },
        validation: { hostname: 'Not A Name', wellKnownCACertificates: 'system' },
      },
    };
    const policyProblems = schemaProblems([policy]).join('\n');
    expect(policyProblems).toContain('BackendTLSPolicy/p: data/spec must have required property targetRefs');
    expect(policyProblems).toContain('data/spec/validation/hostname must match pattern');
    expect(policyProblems).toContain('data/spec/validation/wellKnownCACertificates must match pattern');
    expect(unknownFieldProblems([policy]).join('\n')).toMatch(/^BackendTLSPolicy\/p: .*'"targetRef"' does not exist/m);
    const mended = structuredClone(policy);
    mended.spec = {
      targetRefs: [mended.spec.targetRef],
      validation: { hostname: 'ledger-gateway', wellKnownCACertificates: 'System' },
    };
    expect(schemaProblems([mended])).toEqual([]);
    expect(unknownFieldProblems([mended])).toEqual([]);
  }, 60_000);
});

describeRendered.each(OVERLAYS)('overlay %s', (overlay) => {
  it("mounts a valid gateway config where the image's entry command reads it, for a real participant", () => {
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
    expectConfigFilesFromSecrets(renderOverlay(overlay));
  });

  it('turns Service links off in every pod: the Service ledger-gateway would give it LEDGER_GATEWAY_PORT=tcp://...', () => {
    const pods = podSpecs(renderKustomization(overlay));
    expect(pods.length).toBeGreaterThan(0);
    for (const pod of pods) expect(pod.enableServiceLinks).toBe(false);
  });

  it('mounts no ConfigMap or Secret through subPath, in any container (the kubelet never updates such a mount)', () => {
    const pods = podSpecs(renderKustomization(overlay));
    expect(pods.length).toBeGreaterThan(0);
    expect(pods.flatMap((pod) => subPathMounts(pod))).toEqual([]);
  });

  it('tells the gateway a config file at the root of its ConfigMap directory mount, which projects that file alone', () => {
    const objects = renderKustomization(overlay);
    const { podSpec, container } = gatewayWorkload(objects);
    const { key, volume } = expectLiveConfigMount(podSpec.volumes as Volume[], container, configMapKeys(objects));
    expect(Object.keys(findObject(objects, 'ConfigMap', volume.configMap!.name).data ?? {})).toContain(key);
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
    expect(container.readinessProbe!.timeoutSeconds! * 1000).toBeGreaterThan(
      Math.min(2_000, config.upstream.readinessIntervalMs),
    );
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

  it('sets resource requests and limits, with the V8 heap and 64 MiB beside it below the memory limit', () => {
    const rendered = renderOverlay(overlay);
    const container = rendered.gateway.container;
    const { requests, limits } = container.resources ?? {};
    for (const resource of ['cpu', 'memory']) {
      expect(requests?.[resource], `requests.${resource}`).toBeDefined();
      expect(limits?.[resource], `limits.${resource}`).toBeDefined();
    }
    expect(bytesOf(requests!.memory!)).toBeLessThanOrEqual(bytesOf(limits!.memory!));
    const heapMiB = Number(/--max-old-space-size=(\d+)/.exec(rendered.env.NODE_OPTIONS ?? '')?.[1]);
    // Beside the old space: the binary's code, the young space and buffers (~70 MiB; docs/operations.md "Memory").
    expect((heapMiB + 64) * 2 ** 20).toBeLessThanOrEqual(bytesOf(limits!.memory!));
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
    expect(rule!.spec.groups, 'regenerate with: node deploy/kubernetes/generate-prometheus-rule.mjs').toEqual(
      alerts.groups,
    );
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
        // The admin Service: admin port only, and no HTTPRoute routes to it (checked in the ingress overlay).
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

describeRendered('the config ConfigMap for live reloads (docs/live-configuration.md "In Kubernetes")', () => {
  it('keeps its name with disableNameSuffixHash, so that an apply updates in place what the pods mount', () => {
    const objects = renderOwnOverlay(
      {
        resources: [KUSTOMIZE_DIRS.ingress],
        configMapGenerator: [
          {
            name: 'ledger-gateway-config',
            behavior: 'replace',
            options: { disableNameSuffixHash: true },
            files: ['config.yaml'],
          },
        ],
      },
      { 'config.yaml': readFileSync(join(KUSTOMIZE_DIRS.base, 'config.yaml'), 'utf8') },
    );
    const rendered = readRendered(objects);
    const { volume } = expectLiveConfigMount(
      rendered.gateway.podSpec.volumes as Volume[],
      rendered.gateway.container,
      configMapKeys(objects),
    );
    expect(volume.configMap?.name).toBe('ledger-gateway-config');
    // By default the name carries a hash of the content: a changed config is a rollout instead.
    const ingress = renderOverlay('ingress');
    const { volume: hashed } = expectLiveConfigMount(
      ingress.gateway.podSpec.volumes as Volume[],
      ingress.gateway.container,
      configMapKeys(ingress.objects),
    );
    expect(hashed.configMap?.name).toMatch(/^ledger-gateway-config-[a-z0-9]{10}$/);
  }, 60_000);
});

describeRendered('overlay ingress', () => {
  it('runs two or more replicas, autoscaled, spread across nodes, with a disruption budget', () => {
    const rendered = renderOverlay('ingress');
    const { workload, podLabels, podSpec } = rendered.gateway;
    expect(workload.kind).toBe('Deployment');
    expect(workload.spec.replicas).toBeGreaterThanOrEqual(2);
    const [autoscaler] = objectsOfKind(rendered.objects, 'HorizontalPodAutoscaler');
    expect(autoscaler!.spec.scaleTargetRef).toMatchObject({ kind: 'Deployment', name: workload.metadata.name });
    expect(autoscaler!.spec.minReplicas).toBeGreaterThanOrEqual(2);
    expect(autoscaler!.spec.maxReplicas).toBeGreaterThan(autoscaler!.spec.minReplicas);
    const spread = (
      podSpec.topologySpreadConstraints as Array<{
        topologyKey: string;
        whenUnsatisfiable: string;
        labelSelector: { matchLabels: Record<string, string> };
      }>
    ).find((constraint) => constraint.topologyKey === 'kubernetes.io/hostname');
    expect(spread?.whenUnsatisfiable).toBe('DoNotSchedule');
    expect(selectorMatches(spread?.labelSelector.matchLabels, podLabels)).toBe(true);
    const [budget] = objectsOfKind(rendered.objects, 'PodDisruptionBudget');
    expect(selectorMatches(budget!.spec.selector.matchLabels, podLabels)).toBe(true);
    expect(budget!.spec.maxUnavailable ?? 0).toBeGreaterThanOrEqual(1); // a drain can proceed
    expect(workload.spec.selector.matchLabels).toEqual(
      Object.fromEntries(Object.entries(podLabels).filter(([key]) => key in workload.spec.selector.matchLabels)),
    );
  });

  it('lets the drain grace cover a call that started just before SIGTERM', () => {
    const rendered = renderOverlay('ingress');
    expect(rendered.config.shutdown.graceMs).toBeGreaterThanOrEqual(rendered.config.upstream.timeoutMs);
  });

  it('routes a Gateway API HTTPRoute to the API port only, never to the admin port', () => {
    const rendered = renderOverlay('ingress');
    const { config, gateway } = rendered;
    const routes = objectsOfKind(rendered.objects, 'HTTPRoute') as unknown as HttpRoute[];
    expect(routes.length).toBeGreaterThan(0);
    for (const route of routes) {
      const backends = route.spec.rules.flatMap((rule) => rule.backendRefs ?? []);
      expect(backends.length).toBeGreaterThan(0);
      for (const backend of backends) {
        expect(backend.kind ?? 'Service').toBe('Service');
        const service = findObject(rendered.objects, 'Service', backend.name);
        expect(selectorMatches(service.spec.selector, gateway.podLabels)).toBe(true);
        // Every port of a Service a route points at targets the API listener.
        expect(servicePortTargets(service, gateway.container).every((port) => port === config.server.port)).toBe(true);
        const port = (service.spec.ports as Array<{ port: number; targetPort: number | string }>).find(
          (p) => p.port === backend.port,
        );
        expect(port, `${service.metadata.name} port ${backend.port}`).toBeDefined();
        expect(resolveContainerPort(gateway.container, port!.targetPort)).toBe(config.server.port);
      }
    }
  });

  it("speaks plain HTTP from the Gateway's proxies to the gateway: no BackendTLSPolicy (components/backend-tls)", () => {
    const rendered = renderOverlay('ingress');
    expect(rendered.config.server.tls.certFile).toBeUndefined();
    expectBackendTlsMatchesListener(rendered);
  });

  it("attaches the HTTPRoute to a Gateway listener that terminates TLS for the route's host", () => {
    const rendered = renderOverlay('ingress');
    for (const route of objectsOfKind(rendered.objects, 'HTTPRoute') as unknown as HttpRoute[]) {
      for (const { listener } of parentGateways(rendered.objects, route)) {
        expect(listener.protocol).toBe('HTTPS');
        expect(listener.tls?.mode ?? 'Terminate').toBe('Terminate');
        expect(listener.tls?.certificateRefs?.length).toBeGreaterThan(0);
        expect(listener.allowedRoutes?.namespaces?.from ?? 'Same').toBe('Same');
        for (const host of route.spec.hostnames ?? [])
          expect(listener.hostname === undefined || listener.hostname === host, host).toBe(true);
      }
    }
  });

  it('sets no proxy timeout that could end a call the gateway still bounds itself, or a WebSocket stream', () => {
    const rendered = renderOverlay('ingress');
    const { config } = rendered;
    // The longest bound the gateway applies itself, so that its answer (Canton's error shape) comes first.
    const gatewayBoundMs = Math.max(
      config.server.requestTimeoutMs,
      config.upstream.timeoutMs,
      ...Object.values(config.upstream.operationTimeoutsMs),
    );
    for (const route of objectsOfKind(rendered.objects, 'HTTPRoute') as unknown as HttpRoute[]) {
      for (const rule of route.spec.rules) {
        // Unset, an implementation's default applies (Envoy's route timeout: 15 s).
        expect(rule.timeouts?.request, `${route.metadata.name}: timeouts.request`).toBeDefined();
        for (const timeout of [rule.timeouts!.request!, rule.timeouts!.backendRequest].filter(
          (t): t is string => t !== undefined,
        )) {
          const ms = gatewayApiDurationMs(timeout);
          expect(ms === 0 || ms > gatewayBoundMs, `${timeout}: 0 (none) or above ${gatewayBoundMs} ms`).toBe(true);
        }
      }
    }
    expect(gatewayApiDurationMs('1m30s')).toBe(90_000);
  });

  it('scrapes the admin port with a ServiceMonitor', () => {
    const rendered = renderOverlay('ingress');
    const { config, gateway } = rendered;
    const [monitor] = objectsOfKind(rendered.objects, 'ServiceMonitor');
    const services = objectsOfKind(rendered.objects, 'Service').filter((service) =>
      selectorMatches(monitor!.spec.selector.matchLabels, service.metadata.labels ?? {}),
    );
    expect(services.map((s) => s.metadata.name)).toEqual(['ledger-gateway-admin']);
    const endpoint = monitor!.spec.endpoints[0] as { port: string; path: string };
    expect(endpoint.path).toBe('/metrics');
    const port = (services[0]!.spec.ports as Array<{ name: string; targetPort: number | string }>).find(
      (p) => p.name === endpoint.port,
    );
    expect(resolveContainerPort(gateway.container, port!.targetPort)).toBe(config.admin.port);
  });

  describe('NetworkPolicies', () => {
    type Peer = {
      podSelector?: { matchLabels?: Record<string, string> };
      namespaceSelector?: { matchLabels?: Record<string, string> };
      ipBlock?: unknown;
    };
    type Rule = { from?: Peer[]; ports?: Array<{ port: number | string }> };

    it('use explicit, non-empty pod selectors everywhere', () => {
      const rendered = renderOverlay('ingress');
      const policies = objectsOfKind(rendered.objects, 'NetworkPolicy');
      expect(policies.length).toBeGreaterThanOrEqual(2);
      for (const policy of policies) {
        expect(
          Object.keys(policy.spec.podSelector?.matchLabels ?? {}).length,
          `${policy.metadata.name} spec.podSelector`,
        ).toBeGreaterThan(0);
        for (const rule of (policy.spec.ingress ?? []) as Rule[]) {
          for (const peer of rule.from ?? []) {
            expect(
              Object.keys(peer.podSelector?.matchLabels ?? {}).length,
              `${policy.metadata.name}: a peer selects pods explicitly`,
            ).toBeGreaterThan(0);
          }
        }
      }
    });

    it("let only the proxies of the HTTPRoute's Gateway reach the API port and only Prometheus the admin port", () => {
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
      const sourcesOf = (port: number) =>
        rules
          .filter((rule) => rule.ports!.some((p) => resolveContainerPort(gateway.container, p.port) === port))
          .flatMap((rule) => rule.from!);
      const admin = sourcesOf(config.admin.port);
      expect(admin.length).toBeGreaterThan(0);
      for (const peer of admin) expect(peer.podSelector?.matchLabels?.['app.kubernetes.io/name']).toBe('prometheus');
      const api = sourcesOf(config.server.port);
      expect(api.length).toBeGreaterThan(0);
      // Envoy Gateway labels each Gateway's proxy pods with the Gateway's name.
      const gateways = (objectsOfKind(rendered.objects, 'HTTPRoute') as unknown as HttpRoute[]).flatMap((route) =>
        parentGateways(rendered.objects, route).map(({ gateway: parent }) => parent.metadata.name),
      );
      expect(gateways.length).toBeGreaterThan(0);
      for (const peer of api)
        expect(gateways).toContain(peer.podSelector?.matchLabels?.['gateway.envoyproxy.io/owning-gateway-name']);
    });

    it("let only gateway pods reach the participant's JSON API port", () => {
      const rendered = renderOverlay('ingress');
      const { config, gateway } = rendered;
      const upstreamPort = Number(new URL(config.upstream.url).port);
      const policies = objectsOfKind(rendered.objects, 'NetworkPolicy');
      const participant = policies.filter(
        (policy) => !selectorMatches(policy.spec.podSelector.matchLabels, gateway.podLabels),
      );
      expect(participant.length).toBe(1);
      const rules = participant[0]!.spec.ingress as Rule[];
      const opening = rules.filter(
        (rule) => rule.ports === undefined || rule.ports.some((p) => Number(p.port) === upstreamPort),
      );
      expect(opening.length).toBe(1);
      expect(opening[0]!.from?.length).toBeGreaterThan(0);
      for (const peer of opening[0]!.from!) {
        expect(peer.namespaceSelector, 'same namespace').toBeUndefined();
        expect(selectorMatches(peer.podSelector?.matchLabels, gateway.podLabels)).toBe(true);
      }
    });
  });
});

describeRendered('overlay sidecar', () => {
  it("runs the gateway as a native sidecar in the participant's pod, the base's container unchanged", () => {
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
    expect(values.additionalEnvVars.map((v) => v.value).join('\n')).toMatch(
      /http-ledger-api\.address\s*=\s*"?127\.0\.0\.1"?/,
    );
    // The chart renders extraVolumes of kind secret (or PVC) only; every mount has its volume.
    for (const mount of rendered.gateway.container.volumeMounts ?? []) {
      expect(
        values.extraVolumes.find((volume) => volume.name === mount.name)?.secret?.secretName,
        mount.name,
      ).toBeDefined();
    }
  });

  it("turns Service links off in the Splice chart's pod with the post-renderer deploy/README.md gives helm", () => {
    const chart = [
      { apiVersion: 'v1', kind: 'Service', metadata: { name: 'participant' }, spec: { ports: [{ port: 7575 }] } },
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'participant' },
        spec: {
          selector: { matchLabels: { app: 'participant' } },
          template: {
            metadata: { labels: { app: 'participant' } },
            spec: { containers: [{ name: 'participant', image: 'canton-participant' }] },
          },
        },
      },
    ];
    const result = spawnSync(SPLICE_POST_RENDERER, {
      input: chart.map((object) => stringify(object)).join('---\n'),
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(result.stderr).toBe('');
    const rendered = parseAllDocuments(result.stdout).map((document) => document.toJS() as KubernetesObject);
    expect(podSpecs(rendered).map((pod) => pod.enableServiceLinks)).toEqual([false]);
    expect(rendered.find((o) => o.kind === 'Service')).toEqual(chart[0]);
    expect(readFileSync(join(DEPLOY, 'README.md'), 'utf8')).toContain(
      '--post-renderer deploy/kubernetes/overlays/sidecar/splice-post-renderer.sh',
    );
  });

  it('gives the Splice sidecar its config Secret as a directory (no subPath), projecting the config file alone', () => {
    const values = parse(readFileSync(SPLICE_VALUES, 'utf8'), { version: '1.1' }) as {
      extraInitContainers: Container[];
      extraVolumes: Volume[];
    };
    expect(subPathMounts({ volumes: values.extraVolumes, initContainers: values.extraInitContainers })).toEqual([]);
    // The operator creates the Secret, so its keys are unknown here: the volume must list its items.
    const { key, volume } = expectLiveConfigMount(values.extraVolumes, values.extraInitContainers[0]!, () => undefined);
    expect(volume.secret?.secretName).toBe('ledger-gateway-config');
    expect(key).toBe('config.yaml'); // deploy/README.md: --from-file=config.yaml=./gateway-config.yaml
  });
});

describeRendered('components', () => {
  /** What the Splice charts' Prometheus wants (their ServiceMonitors carry this release label). */
  const SPLICE_MONITORING = {
    release: 'prometheus-grafana-monitoring',
    prometheusNamespace: 'observability',
    runbookBaseUrl: 'https://git.example.com/ops/ledger-gateway/blob/main/docs/alerts.md',
  };
  /** The settings ConfigMap as deploy/README.md shows it: never applied (local-config). */
  const monitoringSettings = (values: Record<string, string>) => ({
    name: 'ledger-gateway-monitoring',
    options: { disableNameSuffixHash: true, annotations: { 'config.kubernetes.io/local-config': 'true' } },
    literals: Object.entries(values).map(([key, value]) => `${key}=${value}`),
  });
  const MONITORING_KINDS = ['ServiceMonitor', 'PodMonitor', 'PrometheusRule'];

  /** NetworkPolicy peers that may reach the gateway's admin port. */
  function adminPeers(rendered: Rendered): Array<{ namespaceSelector?: { matchLabels?: Record<string, string> } }> {
    return objectsOfKind(rendered.objects, 'NetworkPolicy')
      .filter((policy) => selectorMatches(policy.spec.podSelector.matchLabels, rendered.gateway.podLabels))
      .flatMap((policy) => policy.spec.ingress as Array<{ from: unknown[]; ports: Array<{ port: number | string }> }>)
      .filter((rule) =>
        rule.ports.some((p) => resolveContainerPort(rendered.gateway.container, p.port) === rendered.config.admin.port),
      )
      .flatMap((rule) => rule.from) as Array<{ namespaceSelector?: { matchLabels?: Record<string, string> } }>;
  }

  /** The objects with what the monitoring component sets blanked out, to compare the rest. */
  function withoutMonitoringSettings(rendered: Rendered): KubernetesObject[] {
    const objects = structuredClone(rendered.objects);
    for (const object of objects.filter((o) => MONITORING_KINDS.includes(o.kind)))
      delete object.metadata.labels?.release;
    for (const rule of objectsOfKind(objects, 'PrometheusRule').flatMap((o) =>
      o.spec.groups.flatMap((g: { rules: unknown[] }) => g.rules),
    )) {
      rule.annotations.runbook_url = rule.annotations.runbook_url.replace(/^[^#]*/, '');
    }
    for (const peer of adminPeers({ ...rendered, objects }))
      delete peer.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name'];
    return objects;
  }

  it.each(OVERLAYS)(
    'monitoring: fits the %s overlay to another Prometheus (release, namespace, runbook links), nothing else',
    (overlay) => {
      const objects = renderOwnOverlay({
        resources: [KUSTOMIZE_DIRS[overlay]],
        components: [KUSTOMIZE_COMPONENTS.monitoring],
        configMapGenerator: [monitoringSettings(SPLICE_MONITORING)],
      });
      expect(schemaProblems(objects)).toEqual([]);
      const rendered = readRendered(objects);
      expect(objects.map((o) => `${o.kind}/${o.metadata.name}`)).not.toContain('ConfigMap/ledger-gateway-monitoring');

      const monitoring = objects.filter((o) => MONITORING_KINDS.includes(o.kind));
      expect(monitoring.map((o) => o.kind).sort()).toEqual(
        overlay === 'ingress' ? ['PrometheusRule', 'ServiceMonitor'] : ['PodMonitor', 'PrometheusRule'],
      );
      for (const object of monitoring)
        expect(object.metadata.labels?.release, object.kind).toBe(SPLICE_MONITORING.release);
      const alerts = objectsOfKind(objects, 'PrometheusRule').flatMap((o) =>
        o.spec.groups.flatMap((g: { rules: unknown[] }) => g.rules),
      ) as Array<{ alert: string; annotations: Record<string, string> }>;
      expect(alerts.length).toBeGreaterThan(0);
      for (const alert of alerts)
        expect(alert.annotations.runbook_url).toBe(`${SPLICE_MONITORING.runbookBaseUrl}#${alert.alert.toLowerCase()}`);
      if (overlay === 'ingress') {
        const peers = adminPeers(rendered);
        expect(peers.length).toBeGreaterThan(0);
        for (const peer of peers)
          expect(peer.namespaceSelector?.matchLabels?.['kubernetes.io/metadata.name']).toBe(
            SPLICE_MONITORING.prometheusNamespace,
          );
      }
      expect(withoutMonitoringSettings(rendered)).toEqual(withoutMonitoringSettings(renderOverlay(overlay)));
    },
    60_000,
  );

  it('monitoring: refuses to render without the settings, naming the one missing', () => {
    expect(() =>
      renderOwnOverlay({ resources: [KUSTOMIZE_DIRS.ingress], components: [KUSTOMIZE_COMPONENTS.monitoring] }),
    ).toThrow(/ledger-gateway-monitoring/);
    const { runbookBaseUrl: _missing, ...partial } = SPLICE_MONITORING;
    expect(() =>
      renderOwnOverlay({
        resources: [KUSTOMIZE_DIRS.ingress],
        components: [KUSTOMIZE_COMPONENTS.monitoring],
        configMapGenerator: [monitoringSettings(partial)],
      }),
    ).toThrow(/data\.runbookBaseUrl/);
  }, 60_000);

  it("backend-tls: the Gateway's proxies verify the gateway's HTTPS listener, whose files come from the Secret", () => {
    const config = parse(readFileSync(join(KUSTOMIZE_DIRS.base, 'config.yaml'), 'utf8')) as {
      server: Record<string, unknown>;
    };
    config.server.tls = {
      certFile: '/etc/ledger-gateway/secrets/listener.crt',
      keyFile: '/etc/ledger-gateway/secrets/listener.key',
    };
    const objects = renderOwnOverlay(
      {
        resources: [KUSTOMIZE_DIRS.ingress],
        components: [KUSTOMIZE_COMPONENTS.backendTls],
        configMapGenerator: [{ name: 'ledger-gateway-config', behavior: 'replace', files: ['config.yaml'] }],
      },
      { 'config.yaml': stringify(config) },
    );
    expect(schemaProblems(objects)).toEqual([]);
    expect(unknownFieldProblems(objects)).toEqual([]);
    // The test CA's certificate for a participant, as a stand-in for the listener's.
    const fixture = (name: string) => join(ROOT, 'test/proxy/fixtures', name);
    const rendered = readRendered(objects, {
      'listener.crt': fixture('test-participant.pem'),
      'listener.key': fixture('test-only-participant-key.pem'),
    });
    expect(rendered.config.server.tls.certFile).toBe('/etc/ledger-gateway/secrets/listener.crt');
    expectConfigFilesFromSecrets(rendered);
    expectBackendTlsMatchesListener(rendered);
  }, 60_000);

  const ADMIN_TOKEN_SECRET = 'ledger-gateway-participant-admin-token';
  const IDP_VARIABLES = `${environmentVariable(['auth', 'participantIdentityProviders'])}__`;

  /** The objects with what components/participant-identity-providers adds to the gateway's pod taken out. */
  function withoutParticipantIdps(objects: readonly KubernetesObject[]): KubernetesObject[] {
    const copy = structuredClone(objects) as KubernetesObject[];
    const { podSpec, container } = gatewayWorkload(copy);
    const volumes = podSpec.volumes as Volume[];
    const added = volumes.filter((volume) => volume.secret?.secretName === ADMIN_TOKEN_SECRET).map((v) => v.name);
    podSpec.volumes = volumes.filter((volume) => !added.includes(volume.name));
    container.volumeMounts = container.volumeMounts?.filter((mount) => !added.includes(mount.name));
    container.env = container.env?.filter((variable) => !variable.name.startsWith(IDP_VARIABLES));
    return copy;
  }

  it.each(OVERLAYS)(
    'participant-identity-providers: turns the feature on in the %s overlay, the admin token from a Secret mounted as a directory',
    (overlay) => {
      const { objects, rendered } = renderWithComponent(overlay, KUSTOMIZE_COMPONENTS.participantIdentityProviders);
      const { gateway } = rendered;
      const idps = rendered.config.auth.participantIdentityProviders;
      expect(idps.enabled).toBe(true);
      expect(idps.tokenFile).toBeDefined();

      // The token file it configures is the Secret's key `token`, mounted read-only without subPath.
      const token = mountedFile(gateway.podSpec.volumes as Volume[], gateway.container, idps.tokenFile!);
      expect(token.volume.secret?.secretName).toBe(ADMIN_TOKEN_SECRET);
      expect(token.key).toBe('token');
      expect(token.mount.readOnly).toBe(true);
      expect(token.volume.secret?.optional ?? false, 'the pod waits for the Secret').toBe(false);
      // The token's mount leaves the config directory alone; nothing else changes.
      expectComponentLeavesTheRest(overlay, { objects, rendered }, withoutParticipantIdps);
    },
    60_000,
  );

  it('participant-identity-providers: gives the gateway the same container in both overlays', () => {
    expectSameContainerInBothOverlays(KUSTOMIZE_COMPONENTS.participantIdentityProviders, IDP_VARIABLES, 2);
  }, 60_000);

  const AUDIT_CLAIM = 'ledger-gateway-audit';
  const AUDIT_SIGNING_KEY_SECRET = 'ledger-gateway-audit-signing-key';
  const AUDIT_VARIABLES = `${environmentVariable(['audit'])}__`;
  const POD_NAME = 'POD_NAME';

  /** The objects with what components/audit-trail adds to the gateway's pod taken out. */
  function withoutAuditTrail(objects: readonly KubernetesObject[]): KubernetesObject[] {
    const copy = structuredClone(objects) as KubernetesObject[];
    const { podSpec, container } = gatewayWorkload(copy);
    const volumes = podSpec.volumes as Volume[];
    const added = volumes
      .filter(
        (volume) =>
          (volume.persistentVolumeClaim as { claimName?: string } | undefined)?.claimName === AUDIT_CLAIM ||
          volume.secret?.secretName === AUDIT_SIGNING_KEY_SECRET,
      )
      .map((v) => v.name);
    podSpec.volumes = volumes.filter((volume) => !added.includes(volume.name));
    container.volumeMounts = container.volumeMounts?.filter((mount) => !added.includes(mount.name));
    container.env = container.env?.filter(
      (variable) => variable.name !== POD_NAME && !variable.name.startsWith(AUDIT_VARIABLES),
    );
    return copy;
  }

  it.each(OVERLAYS)(
    'audit-trail: turns the trail on in the %s overlay, each pod in its own directory of the claim, the signing key from a Secret',
    (overlay) => {
      const { objects, rendered } = renderWithComponent(overlay, KUSTOMIZE_COMPONENTS.auditTrail);
      const { gateway } = rendered;
      const audit = rendered.config.audit;
      expect(audit.enabled).toBe(true);

      // POD_NAME (the downward API's pod name) comes before the directory that expands it.
      const env = gateway.container.env ?? [];
      const podName = env.findIndex((variable) => variable.name === POD_NAME);
      const directory = env.findIndex((variable) => variable.name === `${AUDIT_VARIABLES}DIRECTORY`);
      expect(env[podName]?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.name');
      expect(env[directory]?.value).toContain(`$(${POD_NAME})`);
      expect(podName, 'POD_NAME precedes its use').toBeLessThan(directory);

      // Each pod writes its own directory, at the root of the claim's writable mount.
      const trail = (gateway.container.volumeMounts ?? []).filter((m) => audit.directory.startsWith(`${m.mountPath}/`));
      expect(trail.length, `mounts above ${audit.directory}`).toBe(1);
      expect(audit.directory).toBe(`${trail[0]!.mountPath}/${DOWNWARD_API_TEST_VALUES['metadata.name']}`);
      expect(trail[0]!.readOnly ?? false).toBe(false);
      expect(trail[0]!.subPath ?? trail[0]!.subPathExpr).toBeUndefined();
      const volume = (gateway.podSpec.volumes as Volume[]).find((v) => v.name === trail[0]!.name);
      expect(volume?.persistentVolumeClaim).toEqual({ claimName: AUDIT_CLAIM });
      // A read-only root filesystem and a non-root user: the volume is writable through the pod's fsGroup.
      expect(gateway.container.securityContext?.readOnlyRootFilesystem).toBe(true);
      expect(gateway.podSpec.securityContext?.fsGroup).toBeGreaterThan(0);

      // The signing key is the Secret's key `private.pem`, mounted read-only without subPath, apart from the trail.
      const key = mountedFile(gateway.podSpec.volumes as Volume[], gateway.container, audit.signingKeyFile!);
      expect(key.volume.secret?.secretName).toBe(AUDIT_SIGNING_KEY_SECRET);
      expect(key.key).toBe('private.pem');
      expect(key.projected).toEqual(['private.pem']);
      expect(key.mount.readOnly).toBe(true);
      expect(key.volume.secret?.defaultMode).toBe(0o440);
      expect(key.volume.secret?.optional ?? false, 'the pod waits for the Secret').toBe(false);
      expect(key.mount.mountPath.startsWith(`${trail[0]!.mountPath}/`)).toBe(false);
      expectComponentLeavesTheRest(overlay, { objects, rendered }, withoutAuditTrail);
    },
    60_000,
  );

  it('audit-trail: gives the gateway the same container in both overlays', () => {
    expectSameContainerInBothOverlays(KUSTOMIZE_COMPONENTS.auditTrail, AUDIT_VARIABLES, 3);
  }, 60_000);
});
