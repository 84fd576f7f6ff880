// Rendering the Kustomize overlays (deploy/kubernetes) with `kubectl kustomize` and reading what
// the pods would see: the gateway container, its environment, the config in its ConfigMap.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join, relative } from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { validateGatewayConfig } from '../../src/config/load.js';
import type { GatewayConfig } from '../../src/config/schema.js';
import { ROOT } from '../helpers/process.js';

export const DEPLOY = join(ROOT, 'deploy');
export const KUSTOMIZE_DIRS = {
  base: join(DEPLOY, 'kubernetes/base'),
  ingress: join(DEPLOY, 'kubernetes/overlays/ingress'),
  sidecar: join(DEPLOY, 'kubernetes/overlays/sidecar'),
} as const;
export type KustomizeDir = keyof typeof KUSTOMIZE_DIRS;
export const KUSTOMIZE_COMPONENTS = {
  monitoring: join(DEPLOY, 'kubernetes/components/monitoring'),
  backendTls: join(DEPLOY, 'kubernetes/components/backend-tls'),
  participantIdentityProviders: join(DEPLOY, 'kubernetes/components/participant-identity-providers'),
  auditTrail: join(DEPLOY, 'kubernetes/components/audit-trail'),
} as const;

export const GATEWAY_CONTAINER = 'ledger-gateway';
const RENDER_TIMEOUT_MS = 60_000;

// Loose shapes of what the checks read; the objects are validated against the real schemas first.
export interface KubernetesObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  // Parsed YAML, walked freely by the assertions: a wrong path fails the test that takes it.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  spec?: any;
  data?: Record<string, string>;
  [key: string]: unknown;
}

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string }; secretKeyRef?: unknown; configMapKeyRef?: unknown };
}

export interface Probe {
  httpGet?: { path: string; port: number | string };
  periodSeconds?: number;
  timeoutSeconds?: number;
  failureThreshold?: number;
}

export interface VolumeMount {
  name: string;
  mountPath: string;
  subPath?: string;
  subPathExpr?: string;
  readOnly?: boolean;
}

/** A ConfigMap's or Secret's keys projected as files: all of them, or `items` (key -> path). */
interface KeyProjection {
  items?: Array<{ key: string; path: string; mode?: number }>;
  defaultMode?: number;
  optional?: boolean;
}

export interface Volume {
  name: string;
  configMap?: KeyProjection & { name: string };
  secret?: KeyProjection & { secretName: string };
  projected?: unknown;
  [source: string]: unknown;
}

export interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  restartPolicy?: string;
  ports?: Array<{ name?: string; containerPort: number }>;
  env?: EnvVar[];
  volumeMounts?: VolumeMount[];
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  lifecycle?: { preStop?: { sleep?: { seconds: number }; exec?: unknown; httpGet?: unknown } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: {
    readOnlyRootFilesystem?: boolean;
    allowPrivilegeEscalation?: boolean;
    privileged?: boolean;
    runAsNonRoot?: boolean;
    capabilities?: { drop?: string[]; add?: string[] };
    seccompProfile?: { type?: string };
    [key: string]: unknown;
  };
}

const KUBECTL_NEEDED =
  'the deploy tests render the overlays with `kubectl kustomize` and need kubectl 1.27+ (built-in Kustomize v5; Debian\'s kubernetes-client 1.20 is too old). Install kubectl (deploy/README.md "Tests").';
let kubectlChecked = false;

function runKubectl(args: string[]): string {
  const result = spawnSync('kubectl', args, {
    encoding: 'utf8',
    timeout: RENDER_TIMEOUT_MS,
    maxBuffer: 16 * 1024 * 1024,
  });
  if (result.error !== undefined) {
    const missing = (result.error as NodeJS.ErrnoException).code === 'ENOENT';
    throw new Error(
      missing
        ? `kubectl is not installed: ${KUBECTL_NEEDED}`
        : `kubectl ${args.join(' ')} failed: ${result.error.message}`,
    );
  }
  if (result.status !== 0) throw new Error(`kubectl ${args.join(' ')} exited ${result.status}:\n${result.stderr}`);
  return result.stdout;
}

/** kubectl with a built-in Kustomize v5 (the kustomizations use `labels`, inline patches, `$patch: delete`). */
function requireKubectl(): void {
  if (kubectlChecked) return;
  const version = JSON.parse(runKubectl(['version', '--client', '-o', 'json'])) as {
    kustomizeVersion?: string;
    clientVersion?: { gitVersion?: string };
  };
  const major = Number(/^v(\d+)/.exec(version.kustomizeVersion ?? '')?.[1] ?? 0);
  if (major < 5)
    throw new Error(
      `kubectl ${version.clientVersion?.gitVersion ?? '?'} has no Kustomize v5 (reports ${version.kustomizeVersion ?? 'none'}): ${KUBECTL_NEEDED}`,
    );
  kubectlChecked = true;
}

function renderDirectory(directory: string, name: string): KubernetesObject[] {
  requireKubectl();
  const stdout = runKubectl(['kustomize', directory]);
  const documents = parseAllDocuments(stdout);
  if (!Array.isArray(documents)) throw new Error(`kubectl kustomize ${name}: no documents`);
  return documents.map((document, index) => {
    if (document.errors.length > 0)
      throw new Error(`kubectl kustomize ${name}: document ${index}: ${document.errors[0]!.message}`);
    return document.toJS() as KubernetesObject;
  });
}

/** `kubectl kustomize <dir>`, bounded; a missing or old kubectl fails loudly (never a skip). */
export function renderKustomization(dir: KustomizeDir): KubernetesObject[] {
  return renderDirectory(KUSTOMIZE_DIRS[dir], dir);
}

/**
 * An operator's own overlay, as deploy/README.md shows them: `kustomization` (its `resources` and
 * `components` given as absolute paths) and the `files` beside it, written to a temporary
 * directory and rendered. Kustomize wants relative paths to other directories, so they are made so.
 */
export function renderOwnOverlay(
  kustomization: Record<string, unknown>,
  files: Record<string, string> = {},
): KubernetesObject[] {
  const directory = mkdtempSync(join(tmpdir(), 'ledger-gateway-overlay-'));
  try {
    const relativeTo = (paths: unknown) =>
      (paths as string[] | undefined)?.map((path) => (isAbsolute(path) ? relative(directory, path) : path));
    const written = {
      ...kustomization,
      resources: relativeTo(kustomization.resources),
      components: relativeTo(kustomization.components),
    };
    for (const key of ['resources', 'components'] as const) if (written[key] === undefined) delete written[key];
    writeFileSync(join(directory, 'kustomization.yaml'), stringify(written));
    for (const [name, text] of Object.entries(files)) writeFileSync(join(directory, name), text);
    return renderDirectory(directory, 'overlay');
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

export function findObject(objects: readonly KubernetesObject[], kind: string, name: string): KubernetesObject {
  const found = objects.find((object) => object.kind === kind && object.metadata.name === name);
  if (found === undefined)
    throw new Error(`no ${kind} ${name} among ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')}`);
  return found;
}

export function objectsOfKind(objects: readonly KubernetesObject[], kind: string): KubernetesObject[] {
  return objects.filter((object) => object.kind === kind);
}

export interface GatewayWorkload {
  readonly workload: KubernetesObject;
  // The pod template's spec, parsed YAML like KubernetesObject.spec.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly podSpec: any;
  readonly podLabels: Record<string, string>;
  readonly container: Container;
  /** 'containers' (own Deployment) or 'initContainers' (native sidecar). */
  readonly list: 'containers' | 'initContainers';
}

/** The one workload whose pod runs the gateway container, wherever it sits. */
export function gatewayWorkload(objects: readonly KubernetesObject[]): GatewayWorkload {
  const found: GatewayWorkload[] = [];
  for (const workload of objects.filter((o) => ['Deployment', 'StatefulSet', 'DaemonSet'].includes(o.kind))) {
    const podSpec = workload.spec.template.spec;
    for (const list of ['containers', 'initContainers'] as const) {
      const container = (podSpec[list] as Container[] | undefined)?.find((c) => c.name === GATEWAY_CONTAINER);
      if (container !== undefined)
        found.push({ workload, podSpec, podLabels: workload.spec.template.metadata?.labels ?? {}, container, list });
    }
  }
  if (found.length !== 1)
    throw new Error(`expected exactly one workload running the ${GATEWAY_CONTAINER} container, found ${found.length}`);
  return found[0]!;
}

/** The file at `path` in the container, as a key of the ConfigMap or Secret volume that projects it. */
export interface MountedFile {
  readonly mount: VolumeMount;
  readonly volume: Volume;
  /** The ConfigMap's or Secret's key that the file holds. */
  readonly key: string;
  /** Every file name the volume projects into the mount's directory; undefined: one per key of the object. */
  readonly projected: readonly string[] | undefined;
}

/** The volumes the kubelet updates in place when their object changes (never through a subPath mount). */
export const UPDATED_VOLUME_SOURCES = ['configMap', 'secret', 'projected', 'downwardAPI'] as const;

/**
 * Where `path` comes from: the deepest mount above it, which must mount its volume as a directory
 * (no subPath: the kubelet never updates a subPath mount), and the key its volume projects there.
 */
export function mountedFile(volumes: readonly Volume[], container: Container, path: string): MountedFile {
  const mount = (container.volumeMounts ?? [])
    .filter((m) => path === m.mountPath || path.startsWith(`${m.mountPath.replace(/\/$/, '')}/`))
    .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
  if (mount === undefined) throw new Error(`nothing is mounted at or above ${path} in the ${container.name} container`);
  if (mount.subPath !== undefined || mount.subPathExpr !== undefined || mount.mountPath === path)
    throw new Error(`${path} is mounted as a single file (subPath): the kubelet never updates it`);
  const volume = volumes.find((v) => v.name === mount.name);
  if (volume === undefined) throw new Error(`no volume ${mount.name} for the mount at ${mount.mountPath}`);
  const source = volume.configMap ?? volume.secret;
  if (source === undefined) throw new Error(`${mount.mountPath} is mounted from neither a ConfigMap nor a Secret`);
  const relativePath = path.slice(mount.mountPath.replace(/\/$/, '').length + 1);
  if (source.items === undefined) return { mount, volume, key: relativePath, projected: undefined };
  const item = source.items.find((i) => i.path === relativePath);
  if (item === undefined) throw new Error(`volume ${volume.name} projects no file ${relativePath}`);
  return { mount, volume, key: item.key, projected: source.items.map((i) => i.path) };
}

/** The text of the ConfigMap's or Secret's key the container reads at `path` (mounted as a directory). */
export function mountedConfigFile(
  objects: readonly KubernetesObject[],
  gateway: GatewayWorkload,
  path: string,
): string {
  const file = mountedFile(gateway.podSpec.volumes as Volume[], gateway.container, path);
  if (file.volume.configMap !== undefined) {
    const configMap = findObject(objects, 'ConfigMap', file.volume.configMap.name);
    const text = configMap.data?.[file.key];
    if (text === undefined) throw new Error(`ConfigMap ${configMap.metadata.name} has no key ${file.key}`);
    return text;
  }
  const secret = findObject(objects, 'Secret', file.volume.secret!.secretName);
  const encoded = secret.data?.[file.key];
  const text = (secret.stringData as Record<string, string> | undefined)?.[file.key];
  if (encoded === undefined && text === undefined)
    throw new Error(`Secret ${secret.metadata.name} has no key ${file.key}`);
  return text ?? Buffer.from(encoded!, 'base64').toString('utf8');
}

/** Every mount of a ConfigMap, Secret, projected or downward API volume through subPath, in every container. */
export function subPathMounts(podSpec: { volumes?: Volume[]; [list: string]: unknown }): string[] {
  const updated = (podSpec.volumes ?? [])
    .filter((volume) => UPDATED_VOLUME_SOURCES.some((source) => volume[source] !== undefined))
    .map((volume) => volume.name);
  return (['containers', 'initContainers'] as const).flatMap((list) =>
    ((podSpec[list] as Container[] | undefined) ?? []).flatMap((container) =>
      (container.volumeMounts ?? [])
        .filter((m) => updated.includes(m.name) && (m.subPath !== undefined || m.subPathExpr !== undefined))
        .map((m) => `${container.name}: ${m.mountPath} (volume ${m.name}, subPath ${m.subPath ?? m.subPathExpr})`),
    ),
  );
}

/**
 * The container's environment as Kubernetes sets it: literal values, the downward API fields
 * given, and $(VAR) references to earlier variables expanded.
 */
export function containerEnvironment(container: Container, fields: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const variable of container.env ?? []) {
    if (variable.value !== undefined) {
      env[variable.name] = variable.value.replace(
        /\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g,
        (whole, name: string) => env[name] ?? whole,
      );
    } else if (variable.valueFrom?.fieldRef !== undefined) {
      const value = fields[variable.valueFrom.fieldRef.fieldPath];
      if (value === undefined)
        throw new Error(`env ${variable.name}: no test value for fieldRef ${variable.valueFrom.fieldRef.fieldPath}`);
      env[variable.name] = value;
    } else {
      throw new Error(
        `env ${variable.name}: only literal values and fieldRefs are expected (secrets belong in mounted files)`,
      );
    }
  }
  return env;
}

export const DOWNWARD_API_TEST_VALUES: Record<string, string> = {
  'metadata.name': 'ledger-gateway-7d9f-test',
  'metadata.namespace': 'ledger',
  'spec.nodeName': 'node-1',
};

/** The config the gateway would run with: the mounted file, validated, with the container's env overrides. */
export function effectiveConfig(configText: string, env: Record<string, string>): GatewayConfig {
  return validateGatewayConfig(parse(configText, { uniqueKeys: true }), 'ConfigMap config.yaml', env);
}

/** A container port by number or name. */
export function resolveContainerPort(container: Container, port: number | string): number {
  if (typeof port === 'number') return port;
  const named = container.ports?.find((p) => p.name === port);
  if (named === undefined) throw new Error(`container ${container.name} has no port named ${port}`);
  return named.containerPort;
}

export function selectorMatches(selector: Record<string, string> | undefined, labels: Record<string, string>): boolean {
  if (selector === undefined || Object.keys(selector).length === 0) return false; // empty selects everything: never intended here
  return Object.entries(selector).every(([key, value]) => labels[key] === value);
}

// The image's entry command (deploy/Dockerfile).

export interface EntryCommand {
  /** ENTRYPOINT + CMD of the final stage, exec form. */
  readonly argv: string[];
  readonly entrypoint: string[];
  readonly cmd: string[];
  /** ENV of the final stage. */
  readonly env: Record<string, string>;
  readonly workdir: string | undefined;
  readonly user: string | undefined;
  readonly stages: Array<{ from: string; name: string | undefined; lines: string[] }>;
}

export function readDockerfile(): EntryCommand {
  const text = readFileSync(join(DEPLOY, 'Dockerfile'), 'utf8');
  const args = new Map<string, string>();
  const stages: EntryCommand['stages'] = [];
  // Join continuation lines, drop comments.
  const instructions = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  for (const line of instructions) {
    const [instruction, ...rest] = line.split(/\s+/);
    const operand = rest.join(' ');
    if (instruction === 'ARG' && stages.length === 0) {
      const [name, value] = operand.split('=');
      if (value !== undefined) args.set(name!, value);
    } else if (instruction === 'FROM') {
      const [image, as, name] = operand.split(/\s+/);
      const resolved = image!.replace(/\$\{(\w+)\}/g, (_whole, name: string) => args.get(name) ?? '');
      stages.push({ from: resolved, name: as?.toUpperCase() === 'AS' ? name : undefined, lines: [] });
    } else {
      stages.at(-1)?.lines.push(line);
    }
  }
  const final = stages.at(-1);
  if (final === undefined) throw new Error('deploy/Dockerfile has no FROM');
  const execForm = (instruction: string): string[] => {
    const line = final.lines.filter((l) => l.startsWith(`${instruction} `)).at(-1);
    if (line === undefined) return [];
    const parsed: unknown = JSON.parse(line.slice(instruction.length + 1));
    if (!Array.isArray(parsed) || !parsed.every((item) => typeof item === 'string'))
      throw new Error(`${instruction} must be in exec form (a JSON array)`);
    return parsed;
  };
  const env: Record<string, string> = {};
  for (const line of final.lines.filter((l) => l.startsWith('ENV '))) {
    for (const pair of line.slice(4).trim().split(/\s+/)) {
      const [name, ...value] = pair.split('=');
      if (value.length === 0) throw new Error(`ENV ${pair}: use the KEY=value form`);
      env[name!] = value.join('=');
    }
  }
  const user = final.lines
    .filter((l) => l.startsWith('USER '))
    .at(-1)
    ?.slice(5)
    .trim();
  const workdir = final.lines
    .filter((l) => l.startsWith('WORKDIR '))
    .at(-1)
    ?.slice(8)
    .trim();
  const entrypoint = execForm('ENTRYPOINT');
  const cmd = execForm('CMD');
  return { argv: [...entrypoint, ...cmd], entrypoint, cmd, env, workdir, user, stages };
}

/** The value of `--config` (or `-c`) in a command line, if any. */
export function configArgumentOf(argv: readonly string[]): string | undefined {
  for (const [index, arg] of argv.entries()) {
    if (arg === '--config' || arg === '-c') return argv[index + 1];
    if (arg.startsWith('--config=')) return arg.slice('--config='.length);
  }
  return undefined;
}

/** The value after `--config` in the entry command. */
export function configPathOf(argv: readonly string[]): string {
  const path = configArgumentOf(argv);
  if (path === undefined) throw new Error('the entry command has no --config <file>');
  return path;
}

/**
 * The command line the container runs: Kubernetes' `command` replaces the image's ENTRYPOINT and
 * `args` its CMD; with a `command` and no `args`, the image's CMD is dropped too.
 */
export function containerArgv(container: Container, image: EntryCommand): string[] {
  if (container.command !== undefined) return [...container.command, ...(container.args ?? [])];
  return [...image.entrypoint, ...(container.args ?? image.cmd)];
}

/** The config file the gateway in `container` reads: --config on its command line, else LEDGER_GATEWAY_CONFIG. */
export function containerConfigPath(container: Container, env: Record<string, string>, image: EntryCommand): string {
  const path = configArgumentOf(containerArgv(container, image)) ?? env.LEDGER_GATEWAY_CONFIG;
  if (path === undefined) throw new Error(`the ${container.name} container is told no config file`);
  return path;
}
