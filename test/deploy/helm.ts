// Rendering the Helm chart (deploy/helm/ledger-gateway) with `helm lint` and `helm template`, running
// its post-renderer on a participant chart's output, and bringing the chart's objects and the Kustomize
// overlays' to one form so that the two can be compared.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { DEPLOY, effectiveConfig, gatewayWorkload, type KubernetesObject, type Volume } from './manifests.js';

export const CHART = join(DEPLOY, 'helm/ledger-gateway');
export const POST_RENDERER = join(CHART, 'post-renderer.sh');
/** The release name of every render: the chart's objects then carry the overlays' names. */
export const RELEASE = 'ledger-gateway';
const RUN_TIMEOUT_MS = 60_000;

/** The chart's values files for its modes and switches (chart-testing's ci/ folder). */
export const CI_VALUES = readdirSync(join(CHART, 'ci'))
  .filter((name) => name.endsWith('-values.yaml'))
  .sort();

export type Values = Record<string, unknown>;

interface Run {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** The program's outcome; asynchronous, so that the test worker keeps answering its runner meanwhile. */
function run(command: string, args: readonly string[], input?: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], timeout: RUN_TIMEOUT_MS });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
    child.on('error', (error) => reject(new Error(`${command} ${args.join(' ')}: ${error.message}`)));
    child.on('close', (status) =>
      resolve({
        status,
        stdout: Buffer.concat(stdout).toString('utf8'),
        stderr: Buffer.concat(stderr).toString('utf8'),
      }),
    );
    child.stdin.end(input ?? '');
  });
}

/** Values objects as files in a temporary directory, and ci/ files by name, in order (Helm merges them so). */
async function withValueFiles<T>(
  values: ReadonlyArray<Values | string>,
  use: (files: string[]) => Promise<T>,
): Promise<T> {
  const directory = mkdtempSync(join(tmpdir(), 'ledger-gateway-values-'));
  try {
    const files = values.map((value, index) => {
      if (typeof value === 'string') return join(CHART, 'ci', value);
      const file = join(directory, `values-${index}.yaml`);
      writeFileSync(file, stringify(value));
      return file;
    });
    return await use(files);
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

const valuesArguments = (files: readonly string[]) => files.map((file) => `--values=${file}`);

/** `helm template` with the values given; its outcome, whether it rendered or was refused. */
export function helmTemplate(...values: ReadonlyArray<Values | string>): Promise<Run> {
  return withValueFiles(values, (files) =>
    run('helm', ['template', RELEASE, CHART, '--namespace', 'ledger', ...valuesArguments(files)]),
  );
}

/** `helm lint --strict` with the values given. */
export function helmLint(...values: ReadonlyArray<Values | string>): Promise<Run> {
  return withValueFiles(values, (files) => run('helm', ['lint', '--strict', CHART, ...valuesArguments(files)]));
}

/** Manifests parsed as Kubernetes reads them: YAML 1.1, where `defaultMode: 0440` is octal. */
export function parseDocuments(text: string, source: string): KubernetesObject[] {
  return parseAllDocuments(text, { version: '1.1' })
    .map((document, index) => {
      if (document.errors.length > 0) throw new Error(`${source}: document ${index}: ${document.errors[0]!.message}`);
      return document.toJS() as KubernetesObject | null;
    })
    .filter((object): object is KubernetesObject => object !== null);
}

/** The chart's objects for the values; a refusal throws with Helm's message. */
export async function renderChart(...values: ReadonlyArray<Values | string>): Promise<KubernetesObject[]> {
  const result = await helmTemplate(...values);
  if (result.status !== 0) throw new Error(`helm template refused the values:\n${result.stderr}`);
  return parseDocuments(result.stdout, 'helm template');
}

/** The one document `helm template` prints for sidecar.render (the post-renderer's Kustomization, the Splice values). */
export async function renderSidecarDocument(
  render: 'patch' | 'spliceValues',
  ...values: ReadonlyArray<Values | string>
): Promise<Values> {
  const [document, ...others] = await renderChart(...values, { mode: 'sidecar', sidecar: { render } });
  if (document === undefined || others.length > 0) throw new Error(`sidecar.render=${render}: expected one document`);
  return document;
}

/** Runs post-renderer.sh as Helm would: the participant chart's manifests on stdin, the gateway's values as its arguments. */
export function postRender(
  participantManifests: readonly KubernetesObject[],
  ...values: ReadonlyArray<Values | string>
): Promise<Run> {
  return withValueFiles(values, (files) =>
    run(POST_RENDERER, valuesArguments(files), participantManifests.map((object) => stringify(object)).join('---\n')),
  );
}

/** The `- <key path>: <problem>` lines of Helm's schema refusal. */
export function schemaRefusals(stderr: string): string[] {
  return stderr
    .split('\n')
    .filter((line) => line.startsWith('- '))
    .map((line) => line.slice(2));
}

// The chart and the overlays in one form. What differs by design is brought together here, each
// for a reason a reader can check:
//  - the config: a ConfigMap whose name carries a content hash (Kustomize) or the Secret
//    `<release>-config` (the chart: a config may hold secrets), mounted alike; compared as the config
//    the gateway runs with (Helm merges a values file's config over the chart's, so a key the chart
//    sets to its default may be written where the overlay leaves it out);
//  - Helm's own labels (chart, version, managed-by, instance) on every object's metadata (not the
//    selectors: those are compared, and the overlays' select the instance too), and the config's
//    checksum on the pod template (the chart's way to roll pods on a change, Kustomize's is the hash);
//  - `replicas` under an autoscaler: the chart leaves it out, so that an upgrade does not reset the
//    autoscaler's count;
//  - the order of env, volumeMounts and volumes: a Kustomize patch puts a component's entries first,
//    the chart after the base's (a $(VAR) reference needs its variable earlier, which
//    containerEnvironment checks on the objects themselves);
//  - comments and key order (parsed YAML).

const HELM_LABELS = [
  'helm.sh/chart',
  'app.kubernetes.io/managed-by',
  'app.kubernetes.io/version',
  'app.kubernetes.io/instance',
];
const CONFIG_CHECKSUM = 'checksum/ledger-gateway-config';

/** A config object as both render it: its name and the config the gateway runs with (defaults filled). */
interface ConfigObject {
  readonly kind: 'GatewayConfig';
  readonly name: string;
  readonly config: unknown;
}

/** `files`: paths in the container -> stand-in files, for a config whose files are read when it is validated. */
function configOf(object: KubernetesObject, files: Readonly<Record<string, string>>): ConfigObject | undefined {
  let text: string | undefined;
  if (object.kind === 'ConfigMap') text = object.data?.['config.yaml'];
  else if (object.kind === 'Secret' && object.data?.['config.yaml'] !== undefined)
    text = Buffer.from(object.data['config.yaml'], 'base64').toString('utf8');
  if (text === undefined) return undefined;
  for (const [path, standIn] of Object.entries(files)) text = text.replaceAll(path, standIn);
  let config = JSON.stringify(effectiveConfig(text, {}));
  for (const [path, standIn] of Object.entries(files)) config = config.replaceAll(standIn, path);
  return { kind: 'GatewayConfig', name: 'ledger-gateway-config', config: JSON.parse(config) };
}

function byName<T extends { name: string }>(entries: readonly T[] | undefined): T[] | undefined {
  return entries === undefined ? undefined : [...entries].sort((a, b) => a.name.localeCompare(b.name));
}

/** The config volume as one form: the object it projects and the keys, whatever the kind. */
function normalVolume(volume: Volume): Volume {
  const source = volume.configMap ?? volume.secret;
  const name = volume.configMap?.name ?? volume.secret?.secretName;
  if (source === undefined || !/^ledger-gateway-config(-[a-z0-9]{10})?$/.test(name ?? '')) return volume;
  return { name: volume.name, config: { items: source.items } };
}

function normalPodSpec(podSpec: { [key: string]: unknown }): void {
  for (const list of ['containers', 'initContainers'] as const) {
    for (const container of (podSpec[list] as Array<Record<string, unknown>> | undefined) ?? []) {
      if (container.env !== undefined) container.env = byName(container.env as Array<{ name: string }>);
      if (container.volumeMounts !== undefined)
        container.volumeMounts = byName(container.volumeMounts as Array<{ name: string }>);
    }
  }
  if (podSpec.volumes !== undefined) podSpec.volumes = byName((podSpec.volumes as Volume[]).map(normalVolume));
}

/** One object in the form both renders share. */
function normalObject(
  object: KubernetesObject,
  autoscaled: ReadonlySet<string>,
  files: Readonly<Record<string, string>>,
): unknown {
  const config = configOf(object, files);
  if (config !== undefined) return config;
  const copy = structuredClone(object);
  const labels = copy.metadata.labels;
  if (labels !== undefined) for (const label of HELM_LABELS) delete labels[label];
  delete (copy.metadata as { namespace?: string }).namespace;
  if (['Deployment', 'StatefulSet', 'DaemonSet'].includes(copy.kind)) {
    const template = copy.spec.template;
    const annotations = template.metadata?.annotations as Record<string, string> | undefined;
    if (annotations !== undefined) {
      delete annotations[CONFIG_CHECKSUM];
      if (Object.keys(annotations).length === 0) delete template.metadata.annotations;
    }
    if (autoscaled.has(copy.metadata.name)) delete copy.spec.replicas;
    normalPodSpec(template.spec);
  }
  return copy;
}

/** Every object in the form both renders share, sorted by kind and name; `files` as configOf's. */
export function normalObjects(
  objects: readonly KubernetesObject[],
  files: Readonly<Record<string, string>> = {},
): unknown[] {
  const autoscaled = new Set(
    objects.filter((o) => o.kind === 'HorizontalPodAutoscaler').map((o) => o.spec.scaleTargetRef.name as string),
  );
  const key = (object: unknown) => {
    const { kind, name, metadata } = object as { kind: string; name?: string; metadata?: { name: string } };
    return `${kind}/${name ?? metadata?.name}`;
  };
  return objects.map((object) => normalObject(object, autoscaled, files)).sort((a, b) => key(a).localeCompare(key(b)));
}

/**
 * The overlays' participant Deployment without the four parts it adds to a participant's own
 * (overlays/sidecar/participant.yaml): the gateway sidecar and its volumes, the JSON API on loopback,
 * the grace period, no Service links. What an operator's participant chart renders before the post-renderer.
 */
export function withoutGatewayParts(participant: KubernetesObject): KubernetesObject {
  const copy = structuredClone(participant);
  const podSpec = copy.spec.template.spec;
  const { container } = gatewayWorkload([copy]);
  podSpec.initContainers = (podSpec.initContainers as Array<{ name: string }>).filter((c) => c.name !== container.name);
  if (podSpec.initContainers.length === 0) delete podSpec.initContainers;
  podSpec.volumes = (podSpec.volumes as Volume[]).filter((volume) => !volume.name.startsWith('ledger-gateway-'));
  if (podSpec.volumes.length === 0) delete podSpec.volumes;
  for (const other of podSpec.containers as Array<{ env?: Array<{ name: string }> }>) {
    other.env = other.env?.filter((variable) => variable.name !== 'ADDITIONAL_CONFIG_JSON_API_LOOPBACK');
    if (other.env?.length === 0) delete other.env;
  }
  delete podSpec.terminationGracePeriodSeconds;
  delete podSpec.enableServiceLinks;
  return copy;
}
