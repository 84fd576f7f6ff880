// The Helm chart (deploy/helm/ledger-gateway): its generated files current; `helm lint` and
// `helm template` for each mode and switch (its ci/ values files), every object validated against the
// Kubernetes, Gateway API and Prometheus Operator schemas after kubectl has read it, the config the
// pods mount valid for the gateway, the pods sound; values refused by values.schema.json with their key
// path where `--check` refuses the config; the sidecar added to a Splice-shaped participant by the
// post-renderer; and the chart's objects equal to the Kustomize overlays' for the same settings.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { beforeEach, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { checkConfiguration } from '../../src/cli/check.js';
import { ConfigError } from '../../src/config/schema.js';
import { staleFiles, valueDescriptions, valuesSchema } from '../../scripts/helm-chart-files.js';
import { ROOT } from '../helpers/process.js';
import { describeNeeding } from '../helpers/tool-groups.js';
import {
  bytesOf,
  expectConfigFilesFromSecrets,
  expectLiveConfigMount,
  podSpecs,
  readRendered,
  type Rendered,
} from './gateway-pod.js';
import {
  CHART,
  CI_VALUES,
  POST_RENDERER,
  helmLint,
  helmTemplate,
  normalObjects,
  parseDocuments,
  postRender,
  renderChart,
  renderSidecarDocument,
  schemaRefusals,
  withoutGatewayParts,
  type Values,
} from './helm.js';
import {
  DEPLOY,
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
import { schemaProblems, unknownFieldProblems } from './schemas.js';

const describeRendered = describeNeeding('helm', 'kubectl');
const describeHelm = describeNeeding('helm');

// The renders block the worker (kubectl, TypeScript); a turn of its event loop between tests lets it
// answer its runner, whose calls time out after 60 s without one (a failed run on a loaded machine).
beforeEach(() => new Promise<void>((resolve) => setImmediate(resolve)));

const VALUES_TEXT = readFileSync(join(CHART, 'values.yaml'), 'utf8');
const CHART_VALUES = parse(VALUES_TEXT) as Values;
const SPLICE_PARTICIPANT = parseDocuments(
  readFileSync(join(ROOT, 'test/deploy/fixtures/splice-participant.yaml'), 'utf8'),
  'fixtures/splice-participant.yaml',
);
const fixture = (name: string) => join(ROOT, 'test/proxy/fixtures', name);

/** Helm's merge of values: maps key by key, anything else replaced, null removes the key. */
function mergeValues(base: unknown, override: unknown): unknown {
  const isMap = (value: unknown): value is Values =>
    value !== null && typeof value === 'object' && !Array.isArray(value);
  if (!isMap(base) || !isMap(override)) return override;
  const merged: Values = { ...base };
  for (const [key, value] of Object.entries(override)) {
    if (value === null) delete merged[key];
    else merged[key] = mergeValues(base[key], value);
  }
  return merged;
}

const ciValues = (file: string) => parse(readFileSync(join(CHART, 'ci', file), 'utf8')) as Values;
const valueAt = (values: unknown, path: string) =>
  path.split('.').reduce<unknown>((node, key) => (node as Values | undefined)?.[key], values);

/** The sidecar mode's pods: the post-renderer's output for the Splice-shaped participant. */
async function postRendered(
  participant: readonly KubernetesObject[],
  ...values: Array<Values | string>
): Promise<KubernetesObject[]> {
  const result = await postRender(participant, ...values);
  if (result.status !== 0) throw new Error(`post-renderer.sh failed:\n${result.stderr}`);
  return parseDocuments(result.stdout, 'post-renderer.sh');
}

/** What the chart renders for a values file, with the participant's pods in sidecar mode. */
async function renderMode(...values: Array<Values | string>): Promise<KubernetesObject[]> {
  const objects = await renderChart(...values);
  const merged = values.reduce<unknown>(
    (all, value) => mergeValues(all, typeof value === 'string' ? ciValues(value) : value),
    CHART_VALUES,
  );
  if (valueAt(merged, 'mode') !== 'sidecar') return objects;
  return [...objects, ...(await postRendered(SPLICE_PARTICIPANT, ...values))];
}

/**
 * The gateway's pod among rendered objects, its config validated as the gateway validates it:
 * `${file:...}` references (Redis passwords) read stand-in files from a temporary directory, each
 * reference checked to be a file of a read-only Secret mount; `secretFiles` as in readRendered.
 */
function readGateway(objects: KubernetesObject[], secretFiles: Record<string, string> = {}): Rendered {
  const { podSpec, container } = gatewayWorkload(objects);
  const configSecret = findObject(objects, 'Secret', 'ledger-gateway-config');
  const text = Buffer.from(configSecret.data!['config.yaml']!, 'base64').toString('utf8');
  const references = [...text.matchAll(/\$\{file:([^}]*)\}/g)].map(([, path]) => path!);
  if (references.length === 0) return readRendered(objects, secretFiles);
  const directory = mkdtempSync(join(tmpdir(), 'ledger-gateway-references-'));
  try {
    let rewritten = text;
    for (const [index, path] of references.entries()) {
      const file = mountedFile(podSpec.volumes as Volume[], container, path);
      expect(file.volume.secret, `${path} comes from a Secret`).toBeDefined();
      expect(file.mount.readOnly).toBe(true);
      const standIn = join(directory, `reference-${index}`);
      writeFileSync(standIn, 'a-test-only-password');
      rewritten = rewritten.replaceAll(`\${file:${path}}`, `\${file:${standIn}}`);
    }
    const copy = structuredClone(objects);
    findObject(copy, 'Secret', 'ledger-gateway-config').data!['config.yaml'] =
      Buffer.from(rewritten).toString('base64');
    return { ...readRendered(copy, secretFiles), objects };
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

/** Files the values files' configs need in the Secret ledger-gateway-secrets, read at start. */
const SECRET_FILES: Record<string, Record<string, string>> = {
  'backend-tls-values.yaml': {
    'listener.crt': fixture('test-participant.pem'),
    'listener.key': fixture('test-only-participant-key.pem'),
  },
};

/** What every render's gateway pod must be, whatever the switches: the checks the overlays pass. */
function expectSoundGatewayPod(rendered: Rendered): void {
  const { gateway, config, env, objects } = rendered;
  const container = gateway.container;
  for (const pod of podSpecs(objects)) expect(pod.enableServiceLinks, 'no Service links').toBe(false);
  expect(podSpecs(objects).flatMap((pod) => subPathMounts(pod))).toEqual([]);
  expectConfigFilesFromSecrets(rendered);
  expectLiveConfigMount(gateway.podSpec.volumes as Volume[], container, () => undefined);
  for (const probe of [container.startupProbe, container.livenessProbe, container.readinessProbe])
    expect(resolveContainerPort(container, probe!.httpGet!.port)).toBe(config.admin.port);
  expect(resolveContainerPort(container, 'gateway-http')).toBe(config.server.port);
  // The pod outlasts the gateway's stop: preStop, drain, the last span export.
  const stopSeconds =
    container.lifecycle!.preStop!.sleep!.seconds +
    (config.shutdown.drainDelayMs + config.shutdown.graceMs + Number(env.OTEL_BSP_EXPORT_TIMEOUT)) / 1000;
  expect(gateway.podSpec.terminationGracePeriodSeconds).toBeGreaterThan(stopSeconds);
  // The memory rule (docs/operations.md "Memory"): 25% over the old space + 64 MiB + the body budget.
  const oldSpaceMiB = Number(/--max-old-space-size=(\d+)/.exec(env.NODE_OPTIONS ?? '')?.[1]);
  const reservedMiB = oldSpaceMiB + 64 + Math.ceil(config.limits.bufferedBodyBytes / 2 ** 20);
  expect(reservedMiB * 1.25 * 2 ** 20).toBeLessThanOrEqual(bytesOf(container.resources!.limits!.memory!));
  const security = container.securityContext!;
  expect([security.runAsNonRoot, security.readOnlyRootFilesystem, security.allowPrivilegeEscalation]).toEqual([
    true,
    true,
    false,
  ]);
  expect(security.capabilities?.drop).toEqual(['ALL']);
}

/** Services, routes and monitors reach the ports they should, and the alerts are the shipped ones. */
function expectExposureAndMonitoring(rendered: Rendered, values: unknown): void {
  const { gateway, config, objects } = rendered;
  const targets = (service: KubernetesObject) =>
    (service.spec.ports as Array<{ name: string; port: number; targetPort: string }>).map((port) => ({
      name: port.name,
      port: port.port,
      target: resolveContainerPort(gateway.container, port.targetPort),
    }));
  // The chart's Services (in sidecar mode the participant chart's own select the same pods).
  const services = objectsOfKind(objects, 'Service').filter(
    (s) =>
      s.metadata.labels?.['app.kubernetes.io/part-of'] === 'ledger-gateway' &&
      selectorMatches(s.spec.selector, gateway.podLabels),
  );
  for (const service of services) {
    const ports = targets(service).map((port) => port.target);
    expect([[config.server.port], [config.admin.port]], service.metadata.name).toContainEqual(ports);
  }
  const apiService = services.find((s) => targets(s)[0]!.target === config.server.port)!;
  for (const route of objectsOfKind(objects, 'HTTPRoute'))
    for (const backend of route.spec.rules.flatMap((rule: { backendRefs: unknown[] }) => rule.backendRefs))
      expect(backend).toMatchObject({ name: apiService.metadata.name, port: apiService.spec.ports[0].port });
  for (const ingress of objectsOfKind(objects, 'Ingress'))
    for (const rule of ingress.spec.rules)
      for (const path of rule.http.paths)
        expect(path.backend.service).toEqual({
          name: apiService.metadata.name,
          port: { name: apiService.spec.ports[0].name },
        });

  const alerts = parse(readFileSync(join(DEPLOY, 'prometheus/alerts.yaml'), 'utf8')) as {
    groups: Array<{ rules: Array<{ annotations?: Record<string, string> }> }>;
  };
  const base = valueAt(values, 'monitoring.prometheusRule.runbookBaseUrl') as string;
  for (const rule of alerts.groups.flatMap((group) => group.rules))
    if (rule.annotations?.runbook_url !== undefined)
      rule.annotations.runbook_url = `${base}#${rule.annotations.runbook_url.split('#')[1]}`;
  const rules = objectsOfKind(objects, 'PrometheusRule');
  expect(rules.map((rule) => rule.spec.groups)).toEqual(
    valueAt(values, 'monitoring.prometheusRule.enabled') === true ? [alerts.groups] : [],
  );
  const dashboards = objectsOfKind(objects, 'ConfigMap').filter((c) => c.data?.['ledger-gateway.json'] !== undefined);
  const dashboard = JSON.parse(readFileSync(join(DEPLOY, 'grafana/ledger-gateway.json'), 'utf8')) as unknown;
  expect(dashboards.map((c) => JSON.parse(c.data!['ledger-gateway.json']!) as unknown)).toEqual(
    valueAt(values, 'monitoring.dashboard.enabled') === true ? [dashboard] : [],
  );
  for (const configMap of dashboards)
    expect(configMap.metadata.labels).toMatchObject(valueAt(values, 'monitoring.dashboard.labels') as Values);
  // The participant's own policy (ingress mode): its JSON API port, the upstream's, from gateway pods only.
  for (const policy of objectsOfKind(objects, 'NetworkPolicy')) {
    if (selectorMatches(policy.spec.podSelector.matchLabels, gateway.podLabels)) continue;
    const [jsonApi] = policy.spec.ingress as Array<{
      from: Array<{ podSelector: { matchLabels: Record<string, string> } }>;
      ports: Array<{ port: number }>;
    }>;
    expect(jsonApi!.ports.map((p) => p.port)).toEqual([Number(new URL(config.upstream.url).port)]);
    expect(jsonApi!.from.every((peer) => selectorMatches(peer.podSelector.matchLabels, gateway.podLabels))).toBe(true);
  }
  for (const monitor of [...objectsOfKind(objects, 'ServiceMonitor'), ...objectsOfKind(objects, 'PodMonitor')]) {
    expect(monitor.metadata.labels?.release).toBe(valueAt(values, 'monitoring.release'));
    if (monitor.kind === 'PodMonitor') {
      expect(selectorMatches(monitor.spec.selector.matchLabels, gateway.podLabels)).toBe(true);
      expect(resolveContainerPort(gateway.container, monitor.spec.podMetricsEndpoints[0].port)).toBe(config.admin.port);
    } else {
      const [admin] = objectsOfKind(objects, 'Service').filter((s) =>
        selectorMatches(monitor.spec.selector.matchLabels, s.metadata.labels ?? {}),
      );
      expect(targets(admin!)).toEqual([
        { name: monitor.spec.endpoints[0].port, port: config.admin.port, target: config.admin.port },
      ]);
    }
  }
}

describe("the chart's generated files", () => {
  it('are current: values.schema.json, the config defaults, the copies of the alerts and the dashboard, the values table (npm run helm:chart)', () => {
    expect(staleFiles()).toEqual([]);
  });

  it('describe every value of values.yaml, and the schema knows every one', () => {
    const descriptions = valueDescriptions(VALUES_TEXT);
    const schema = valuesSchema(VALUES_TEXT) as { properties: Record<string, { properties?: unknown }> };
    for (const [path, description] of descriptions) {
      const node = path
        .split('.')
        .reduce<{ properties?: Record<string, unknown> } | undefined>(
          (parent, key) => parent?.properties?.[key] as { properties?: Record<string, unknown> } | undefined,
          schema,
        );
      expect(node, `${path} is in the schema`).toBeDefined();
      // A section's keys carry the descriptions; a value carries its own.
      if (node!.properties === undefined || path === 'config') expect(description, `${path} is described`).toBeTruthy();
    }
    expect([...descriptions.keys()]).toContain('sidecar.participant.shutdownSeconds');
    // Every value the schema names is in values.yaml, with its default.
    for (const key of Object.keys(schema.properties).filter((k) => k !== 'global'))
      expect(descriptions.has(key), key).toBe(true);
  });
});

describeRendered('helm lint and helm template, each mode and switch', () => {
  it.each(['(the defaults)', ...CI_VALUES])(
    '%s: passes helm lint --strict; every object, read by kubectl, validates; the config is valid; the pod is sound',
    async (file) => {
      const values = file.startsWith('(') ? [] : [file];
      const lint = await helmLint(...values);
      expect(lint.stderr + lint.stdout).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
      const objects = await renderMode(...values);
      // kubectl reads every object (Kubernetes' own parsing; a name given twice is refused).
      expect(() =>
        renderOwnOverlay(
          { resources: ['chart.yaml'] },
          { 'chart.yaml': objects.map((o) => stringify(o)).join('---\n') },
        ),
      ).not.toThrow();
      expect(schemaProblems(objects)).toEqual([]);
      expect(unknownFieldProblems(objects)).toEqual([]);
      const rendered = readGateway(objects, SECRET_FILES[file] ?? {});
      expectSoundGatewayPod(rendered);
      const merged = values.reduce<unknown>((all, value) => mergeValues(all, ciValues(value)), CHART_VALUES);
      // The redis values are the config's Redis: one node's URL, the sentinels or the cluster's nodes.
      const mode = valueAt(merged, 'redis.mode');
      const redis = rendered.config.protection.redis;
      expect({ node: redis.url, sentinel: redis.sentinel?.masterName, cluster: redis.cluster?.nodes.length }).toEqual({
        node: mode === 'node' ? expect.stringMatching(/^rediss:\/\/:a-test-only-password@/) : undefined,
        sentinel: mode === 'sentinel' ? 'mymaster' : undefined,
        cluster: mode === 'cluster' ? 2 : undefined,
      });
      expectExposureAndMonitoring(rendered, merged);
    },
    120_000,
  );

  it('takes every switch of values.yaml both ways (every value of its choices) in some values file', () => {
    const renders = [CHART_VALUES, ...CI_VALUES.map((file) => mergeValues(CHART_VALUES, ciValues(file)))];
    const booleans = [...valueDescriptions(VALUES_TEXT).keys()].filter(
      (path) => typeof valueAt(CHART_VALUES, path) === 'boolean',
    );
    expect(booleans.length).toBeGreaterThan(15);
    const choices: Record<string, unknown[]> = {
      ...Object.fromEntries(booleans.map((path) => [path, [false, true]])),
      mode: ['ingress', 'sidecar'],
      'redis.mode': ['', 'node', 'sentinel', 'cluster'],
      'monitoring.monitor.kind': ['auto', 'ServiceMonitor', 'PodMonitor'],
    };
    for (const [path, wanted] of Object.entries(choices)) {
      const taken = new Set(renders.map((values) => valueAt(values, path)));
      expect([...taken].sort(), path).toEqual([...wanted].sort());
    }
  });
});

/** Helm's key path (`config.auth.issuers.0`) as the gateway names keys (`auth.issuers[0]`). */
const gatewayKey = (helmPath: string) => helmPath.replace(/^config\./, '').replace(/\.(\d+)(?=\.|$)/g, '[$1]');

/** What --check says of the chart's config with `config` merged over it as Helm merges values. */
function checkProblems(config: Values): string[] {
  const directory = mkdtempSync(join(tmpdir(), 'ledger-gateway-check-'));
  try {
    const file = join(directory, 'config.yaml');
    writeFileSync(file, stringify(mergeValues(CHART_VALUES.config, config)));
    checkConfiguration(file, {});
    return [];
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return [...error.problems];
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

describeHelm('values checked like the config (values.schema.json)', () => {
  /** Configs --check refuses, and the key path Helm names. */
  const REFUSED: Array<{ what: string; config: Values; path: string }> = [
    { what: 'a port that is no number', config: { server: { port: 'eighty' } }, path: 'config.server.port' },
    { what: 'an unknown key', config: { server: { prot: 8080 } }, path: 'config.server' },
    { what: 'a log level not among the levels', config: { log: { level: 'loud' } }, path: 'config.log.level' },
    { what: 'a timeout below its minimum', config: { upstream: { timeoutMs: 0 } }, path: 'config.upstream.timeoutMs' },
    {
      what: 'an issuer without its required issuer',
      config: { auth: { issuers: [{ jwksUrl: 'https://idp.example.com/certs', audience: 'x' }] } },
      path: 'config.auth.issuers.0',
    },
    {
      what: 'a Redis URL of another scheme',
      config: { protection: { redis: { url: 'http://redis:6379' } } },
      path: 'config.protection.redis.url',
    },
    {
      what: 'a timeout for an operation that does not exist',
      config: { upstream: { operationTimeoutsMs: { submitAndWait: 60000 } } },
      path: 'config.upstream.operationTimeoutsMs',
    },
    {
      what: 'an audit level for an operation that writes nothing',
      config: { audit: { policy: { levels: { getVersion: 'body' } } } },
      path: 'config.audit.policy.levels',
    },
    {
      what: 'a public operation that does not exist',
      config: { auth: { publicOperations: ['getVersions'] } },
      path: 'config.auth.publicOperations.0',
    },
    {
      what: 'a share of 0 (exclusive minimum)',
      config: { protection: { principalShare: 0 } },
      path: 'config.protection.principalShare',
    },
    {
      what: 'an access field given twice',
      config: { log: { access: { fields: ['path', 'path'] } } },
      path: 'config.log.access.fields',
    },
    {
      what: 'a purge token too short',
      config: { admin: { purgeToken: 'too-short' } },
      path: 'config.admin.purgeToken',
    },
  ];

  it.each(REFUSED)(
    'refuses $what with its key path, as --check refuses the config',
    async ({ config, path }) => {
      const result = await helmTemplate({ config });
      expect(result.status).not.toBe(0);
      const refusals = schemaRefusals(result.stderr);
      expect(
        refusals.some((line) => line.startsWith(`${path}:`)),
        refusals.join('\n'),
      ).toBe(true);
      const problems = checkProblems(config);
      expect(
        problems.some((problem) => problem.startsWith(gatewayKey(path))),
        `--check names ${gatewayKey(path)}: ${problems.join('; ')}`,
      ).toBe(true);
    },
    60_000,
  );

  it('accepts what --check accepts: config/default.yaml (every key), the policy example, file references in checked strings', async () => {
    for (const file of ['config/default.yaml', 'config/policy.example.yaml']) {
      const config = parse(readFileSync(join(ROOT, file), 'utf8')) as Values;
      const result = await helmTemplate({ config });
      expect(result.stderr, file).toBe('');
      expect(checkProblems(config), file).toEqual([]);
    }
    // A file reference shorter than the 16 characters a token needs: the file's text is judged, at start.
    const reference = '${file:/t}';
    expect(reference.length).toBeLessThan(16);
    expect((await helmTemplate({ config: { admin: { purgeToken: reference } } })).stderr).toBe('');
    const directory = mkdtempSync(join(tmpdir(), 'ledger-gateway-token-'));
    try {
      const token = join(directory, 'token');
      writeFileSync(token, 'a-purge-token-of-enough-length');
      expect(checkProblems({ admin: { purgeToken: `\${file:${token}}` } })).toEqual([]);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  }, 60_000);

  it.each([
    { what: 'a mode that does not exist', values: { mode: 'both' }, path: 'mode' },
    {
      what: 'a memory limit the memory rule cannot read',
      values: { resources: { limits: { memory: '320M' } } },
      path: 'resources.limits.memory',
    },
    { what: 'a Redis node without its address', values: { redis: { mode: 'node' } }, path: 'redis.address' },
    {
      what: 'Redis Sentinel without sentinels',
      values: { redis: { mode: 'sentinel', masterName: 'm' } },
      path: 'redis.nodes',
    },
    { what: 'an image digest that is none', values: { image: { digest: 'latest' } }, path: 'image.digest' },
    { what: 'an unknown value', values: { replicas: 3 }, path: '(root)' },
  ])("refuses $what among the chart's own values, with its key path", async ({ values, path }) => {
    const result = await helmTemplate(values);
    expect(result.status).not.toBe(0);
    const refusals = schemaRefusals(result.stderr);
    expect(
      refusals.some((line) => line.startsWith(`${path}:`)),
      refusals.join('\n'),
    ).toBe(true);
  });

  /** NODE_OPTIONS' old space for the values, from the rendered Deployment. */
  const oldSpaceMiB = async (values: Values) => {
    const { container } = gatewayWorkload(await renderChart(values));
    const options = container.env!.find((variable) => variable.name === 'NODE_OPTIONS')!.value!;
    return Number(/--max-old-space-size=(\d+)/.exec(options)![1]);
  };

  it('gives V8 the old space of the memory rule (docs/operations.md "Memory") for the memory limit and the body budget', async () => {
    expect(await oldSpaceMiB({}), 'the shipped 416Mi and 32 MiB: 236').toBe(236);
    for (const [memory, limitMiB] of [
      ['512Mi', 512],
      ['1Gi', 1024],
    ] as const) {
      for (const budgetMiB of [16, 64]) {
        const values = {
          resources: { limits: { memory } },
          config: { limits: { bufferedBodyBytes: budgetMiB * 2 ** 20 } },
        };
        expect(await oldSpaceMiB(values), `${memory}, ${budgetMiB} MiB`).toBe(
          Math.floor(limitMiB / 1.25) - 64 - budgetMiB,
        );
      }
    }
    const refused = await helmTemplate({
      resources: { limits: { memory: '200Mi' } },
      config: { limits: { bufferedBodyBytes: 64 * 2 ** 20 } },
    });
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toContain(
      'resources.limits.memory: 200Mi leaves V8 an old space of 32 MiB by the memory rule',
    );
  }, 60_000);

  it("refuses a grace period that does not cover the gateway's stop (after the participant's, as a sidecar)", async () => {
    expect((await helmTemplate({ terminationGracePeriodSeconds: 41 })).status).toBe(0);
    const ingress = await helmTemplate({ terminationGracePeriodSeconds: 40 });
    expect(ingress.stderr).toContain("terminationGracePeriodSeconds: 40 s does not cover the gateway's stop, 40 s");
    const sidecar = await helmTemplate('sidecar-values.yaml', {
      sidecar: { render: 'patch', participant: { terminationGracePeriodSeconds: 60 } },
    });
    expect(sidecar.stderr).toContain(
      "sidecar.participant.terminationGracePeriodSeconds: 60 s does not cover the gateway's stop, 60 s",
    );
  }, 60_000);

  it('refuses Redis given both in the redis values and in the config', async () => {
    const result = await helmTemplate('redis-cluster-values.yaml', {
      config: { protection: { redis: { url: 'redis://redis:6379' } } },
    });
    expect(result.stderr).toContain('redis.mode: config.protection.redis.url is set too; give Redis in one place');
  });
});

describeRendered('the sidecar mode', () => {
  it("adds the gateway to a Splice-shaped participant's Deployment through post-renderer.sh, and changes nothing else", async () => {
    const objects = await postRendered(SPLICE_PARTICIPANT, 'sidecar-values.yaml');
    expect(schemaProblems(objects)).toEqual([]);
    expect(unknownFieldProblems(objects)).toEqual([]);
    const [deployment] = objectsOfKind(objects, 'Deployment');
    const pod = deployment!.spec.template.spec;
    const gateway = (pod.initContainers as Container[]).find((c) => c.name === GATEWAY_CONTAINER)!;
    expect(gateway.restartPolicy, 'a native sidecar').toBe('Always');
    expect((pod.initContainers as Container[]).map((c) => c.name).sort()).toEqual([GATEWAY_CONTAINER, 'pg-init']);
    expect(pod.enableServiceLinks).toBe(false);
    expect(pod.terminationGracePeriodSeconds).toBe(70);
    const participant = (pod.containers as Container[]).find((c) => c.name === 'participant')!;
    expect(participant.env?.find((v) => v.name === 'ADDITIONAL_CONFIG_JSON_API_LOOPBACK')?.value).toBe(
      'canton.participants.participant.http-ledger-api.address = "127.0.0.1"',
    );
    // The gateway's volumes, its config from the release's Secret; the chart's own parts unchanged.
    const volumes = pod.volumes as Volume[];
    expect(mountedFile(volumes, gateway, '/etc/ledger-gateway/config/config.yaml').volume.secret?.secretName).toBe(
      'ledger-gateway-config',
    );
    const [original] = objectsOfKind(SPLICE_PARTICIPANT, 'Deployment');
    expect(withoutGatewayParts(deployment!)).toEqual(parseDocuments(stringify(original), 'original')[0]);
    expect(objectsOfKind(objects, 'Service')).toEqual(objectsOfKind(SPLICE_PARTICIPANT, 'Service'));
    // The same container as the chart's own Deployment, but for the restartPolicy.
    const { restartPolicy: _restartPolicy, ...sidecar } = gateway;
    expect(sidecar).toEqual(gatewayWorkload(await renderChart('sidecar-values.yaml', { mode: 'ingress' })).container);
  }, 60_000);

  it('refuses a participant chart without the Deployment it names, naming it', async () => {
    const result = await postRender(SPLICE_PARTICIPANT, 'sidecar-values.yaml', {
      sidecar: { participant: { deployment: 'validator' } },
    });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain('validator');
  }, 60_000);

  it("renders the Splice values fragment with the post-renderer's sidecar, as overlays/sidecar/splice-participant-values.yaml has it", async () => {
    const fragment = (await renderSidecarDocument('spliceValues', 'sidecar-values.yaml')) as {
      additionalEnvVars: unknown[];
      extraInitContainers: Container[];
      extraVolumes: Volume[];
    };
    const shipped = parse(
      readFileSync(join(DEPLOY, 'kubernetes/overlays/sidecar/splice-participant-values.yaml'), 'utf8'),
      {
        version: '1.1',
      },
    ) as typeof fragment;
    expect(fragment.additionalEnvVars).toEqual(shipped.additionalEnvVars);
    expect(fragment.extraInitContainers).toEqual(shipped.extraInitContainers);
    // The Splice chart renders a volume's name and its secretName or claimName only.
    const rendered = (volumes: Volume[]) => volumes.map((v) => ({ name: v.name, secretName: v.secret?.secretName }));
    expect(rendered(fragment.extraVolumes)).toEqual(rendered(shipped.extraVolumes));
    const patched = await postRendered(SPLICE_PARTICIPANT, 'sidecar-values.yaml');
    const sidecar = gatewayWorkload(patched).container;
    expect(fragment.extraInitContainers).toEqual([sidecar]);
  }, 60_000);
});

describeRendered("one source of truth: the chart renders the Kustomize overlays' objects for the same settings", () => {
  /** The sidecar overlay's objects against the chart's and the post-renderer's on the overlay's participant without the gateway. */
  async function sidecarRenders(
    values: Array<Values | string>,
    overlay: KubernetesObject[],
  ): Promise<[unknown[], unknown[]]> {
    const participant = findObject(overlay, 'Deployment', 'participant');
    const chart = [
      ...(await renderChart('sidecar-values.yaml', ...values)),
      ...(await postRendered([withoutGatewayParts(participant)], 'sidecar-values.yaml', ...values)),
    ];
    // The overlay's ServiceAccount comes from the base and serves no pod of the sidecar overlay.
    const used = overlay.filter((o) => !(o.kind === 'ServiceAccount' && o.metadata.name === 'ledger-gateway'));
    return [normalObjects(chart), normalObjects(used)];
  }

  it('ingress: the defaults and overlays/ingress', async () => {
    expect(normalObjects(await renderChart())).toEqual(normalObjects(renderKustomization('ingress')));
  }, 60_000);

  it('sidecar: ci/sidecar-values.yaml with post-renderer.sh, and overlays/sidecar', async () => {
    const [chart, overlay] = await sidecarRenders([], renderKustomization('sidecar'));
    expect(chart).toEqual(overlay);
  }, 60_000);

  it('the comparison sees a difference (it can fail)', async () => {
    const chart = normalObjects(
      await renderChart({ httpRoute: { requestTimeout: '1h' }, replicaCount: 3, autoscaling: { enabled: false } }),
    );
    const overlay = normalObjects(renderKustomization('ingress'));
    expect(chart).not.toEqual(overlay);
    const keyOf = (object: unknown) => {
      const { kind, name, metadata } = object as { kind: string; name?: string; metadata?: { name: string } };
      return `${kind}/${name ?? metadata?.name}`;
    };
    const byKey = (objects: unknown[]) => new Map(objects.map((object) => [keyOf(object), object]));
    const [chartObjects, overlayObjects] = [byKey(chart), byKey(overlay)];
    const differing = [...new Set([...chartObjects.keys(), ...overlayObjects.keys()])].filter(
      (key) => !isDeepStrictEqual(chartObjects.get(key), overlayObjects.get(key)),
    );
    // The Deployment's replicas (no autoscaler any more), the autoscaler gone, the route's timeout.
    expect(differing.sort()).toEqual([
      'Deployment/ledger-gateway',
      'HTTPRoute/ledger-gateway',
      'HorizontalPodAutoscaler/ledger-gateway',
    ]);
  }, 60_000);

  it('monitoring: the values of components/monitoring (release, Prometheus namespace, runbook links)', async () => {
    const overlay = renderOwnOverlay({
      resources: [KUSTOMIZE_DIRS.ingress],
      components: [KUSTOMIZE_COMPONENTS.monitoring],
      configMapGenerator: [
        {
          name: 'ledger-gateway-monitoring',
          options: { disableNameSuffixHash: true, annotations: { 'config.kubernetes.io/local-config': 'true' } },
          literals: [
            'release=prometheus-grafana-monitoring',
            'prometheusNamespace=observability',
            'runbookBaseUrl=https://git.example.com/ops/ledger-gateway/blob/main/docs/alerts.md',
          ],
        },
      ],
    });
    const chart = await renderChart({
      monitoring: {
        release: 'prometheus-grafana-monitoring',
        prometheusRule: { runbookBaseUrl: 'https://git.example.com/ops/ledger-gateway/blob/main/docs/alerts.md' },
      },
      networkPolicy: { prometheus: { namespace: 'observability' } },
    });
    expect(normalObjects(chart)).toEqual(normalObjects(overlay));
  }, 60_000);

  it('backend-tls: backendTls and components/backend-tls, with the listener TLS in the config', async () => {
    const config = parse(readFileSync(join(KUSTOMIZE_DIRS.base, 'config.yaml'), 'utf8')) as { server: Values };
    config.server.tls = {
      certFile: '/etc/ledger-gateway/secrets/listener.crt',
      keyFile: '/etc/ledger-gateway/secrets/listener.key',
    };
    const overlay = renderOwnOverlay(
      {
        resources: [KUSTOMIZE_DIRS.ingress],
        components: [KUSTOMIZE_COMPONENTS.backendTls],
        configMapGenerator: [{ name: 'ledger-gateway-config', behavior: 'replace', files: ['config.yaml'] }],
      },
      { 'config.yaml': stringify(config) },
    );
    const chart = await renderChart('backend-tls-values.yaml');
    // The listener's files are read when the config is validated: compared with test files in their place.
    const files = {
      '/etc/ledger-gateway/secrets/listener.crt': fixture('test-participant.pem'),
      '/etc/ledger-gateway/secrets/listener.key': fixture('test-only-participant-key.pem'),
    };
    expect(normalObjects(chart, files)).toEqual(normalObjects(overlay, files));
  }, 60_000);

  const COMPONENT_SWITCHES = [
    { component: 'participantIdentityProviders', values: { participantIdentityProviders: { enabled: true } } },
    { component: 'auditTrail', values: { auditTrail: { enabled: true } } },
  ] as const;

  it.each(COMPONENT_SWITCHES)(
    'ingress: $component and its component',
    async ({ component, values }) => {
      const overlay = renderOwnOverlay({
        resources: [KUSTOMIZE_DIRS.ingress],
        components: [KUSTOMIZE_COMPONENTS[component]],
      });
      expect(normalObjects(await renderChart(values))).toEqual(normalObjects(overlay));
    },
    60_000,
  );

  it.each(COMPONENT_SWITCHES)(
    'sidecar: $component and its component',
    async ({ component, values }) => {
      const overlay = renderOwnOverlay({
        resources: [KUSTOMIZE_DIRS.sidecar],
        components: [KUSTOMIZE_COMPONENTS[component]],
      });
      const [chart, expected] = await sidecarRenders([values], overlay);
      expect(chart).toEqual(expected);
    },
    60_000,
  );
});

describeHelm('deploy/README.md', () => {
  const readme = readFileSync(join(DEPLOY, 'README.md'), 'utf8');

  it("installs the chart, and the sidecar with the chart's post-renderer", () => {
    expect(readme).toContain('helm install ledger-gateway deploy/helm/ledger-gateway');
    expect(readme).toContain('--post-renderer deploy/helm/ledger-gateway/post-renderer.sh');
    expect(POST_RENDERER.startsWith(`${CHART}/`)).toBe(true);
  });

  it('shows values files the chart renders, in each mode', async () => {
    const examples = [...readme.matchAll(/```yaml\n(# gateway-values\.yaml[\s\S]*?)```/g)].map(
      ([, text]) => parse(text!) as Values,
    );
    expect(examples.map((values) => values.mode ?? 'ingress')).toEqual(['ingress', 'sidecar']);
    for (const values of examples) expect((await helmTemplate(values)).stderr).toBe('');
  }, 60_000);
});
