// What the deploy tests read and check in any rendered gateway pod, whether the Kustomize overlays
// or the Helm chart rendered it: the gateway's workload, its environment and the config it mounts
// (validated as the gateway validates it), the files the config names, the live config mount.
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { expect } from 'vitest';
import type { GatewayConfig } from '../../src/config/schema.js';
import {
  DOWNWARD_API_TEST_VALUES,
  containerConfigPath,
  containerEnvironment,
  effectiveConfig,
  findObject,
  gatewayWorkload,
  mountedConfigFile,
  mountedFile,
  readDockerfile,
  type Container,
  type GatewayWorkload,
  type KubernetesObject,
  type Volume,
} from './manifests.js';

export interface Rendered {
  readonly objects: KubernetesObject[];
  readonly gateway: GatewayWorkload;
  readonly env: Record<string, string>;
  readonly config: GatewayConfig;
}

/**
 * The gateway's workload, environment and config among rendered objects. A config that names
 * listener TLS files is validated with `secretFiles` (file name in the Secret -> a test file) in
 * place of the Secret's mount, as the gateway reads them at start; paths are reported as mounted.
 */
export function readRendered(objects: KubernetesObject[], secretFiles: Record<string, string> = {}): Rendered {
  const gateway = gatewayWorkload(objects);
  const env = containerEnvironment(gateway.container, DOWNWARD_API_TEST_VALUES);
  const text = mountedConfigFile(objects, gateway, containerConfigPath(gateway.container, env, readDockerfile()));
  if (Object.keys(secretFiles).length === 0) return { objects, gateway, env, config: effectiveConfig(text, env) };
  const volumes = gateway.podSpec.volumes as Volume[];
  const mount = gateway.container.volumeMounts!.find(
    (m) => volumes.find((v) => v.name === m.name)?.secret?.secretName === 'ledger-gateway-secrets',
  )!.mountPath;
  const directory = mkdtempSync(join(tmpdir(), 'ledger-gateway-secrets-'));
  try {
    for (const [name, source] of Object.entries(secretFiles)) copyFileSync(source, join(directory, name));
    const config = effectiveConfig(text.replaceAll(`${mount}/`, `${directory}/`), env);
    return {
      objects,
      gateway,
      env,
      config: JSON.parse(JSON.stringify(config).replaceAll(`${directory}/`, `${mount}/`)) as GatewayConfig,
    };
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

/** Files the config names: issuers' public keys, upstream and listener TLS files, the participant-admin token, the audit signing key. */
export function configFiles(config: GatewayConfig): string[] {
  return [
    config.auth.participantIdentityProviders.tokenFile,
    config.audit.signingKeyFile,
    ...config.auth.issuers.flatMap((issuer) => (issuer.publicKeyFile === undefined ? [] : [issuer.publicKeyFile])),
    ...[config.upstream.tls.caFile, config.upstream.tls.certFile, config.upstream.tls.keyFile],
    ...[config.server.tls.certFile, config.server.tls.keyFile, config.server.tls.clientCaFile],
  ].filter((file): file is string => file !== undefined);
}

export function expectConfigFilesFromSecrets(rendered: Rendered): void {
  const container = rendered.gateway.container;
  const volumes = rendered.gateway.podSpec.volumes as Array<{
    name: string;
    secret?: { secretName: string; defaultMode?: number };
  }>;
  const secretMounts = (container.volumeMounts ?? []).filter(
    (mount) => volumes.find((v) => v.name === mount.name)?.secret !== undefined,
  );
  for (const file of configFiles(rendered.config)) {
    expect(
      secretMounts.some((mount) => file.startsWith(`${mount.mountPath}/`)),
      `${file} lies under a Secret mount`,
    ).toBe(true);
  }
  for (const mount of secretMounts) {
    expect(mount.readOnly).toBe(true);
    // Files without the "others" read bit are readable through the pod's fsGroup only.
    const mode = volumes.find((v) => v.name === mount.name)!.secret!.defaultMode ?? 0o644;
    if ((mode & 0o004) === 0)
      expect(
        rendered.gateway.podSpec.securityContext?.fsGroup,
        'fsGroup for group-readable secret files',
      ).toBeGreaterThan(0);
  }
}

/**
 * The config file the container is told (--config, else LEDGER_GATEWAY_CONFIG) lies at the root of a
 * read-only directory mount of a ConfigMap or Secret volume that projects it alone: the kubelet's
 * update (a `..data` symlink swap in that directory) reaches it, and the gateway, which watches the
 * file's directory, sees it. `keysOf` gives a volume's object's keys (undefined: unknown, so the
 * volume must list its `items`).
 */
export function expectLiveConfigMount(
  volumes: readonly Volume[],
  container: Container,
  keysOf: (volume: Volume) => string[] | undefined,
): { path: string; key: string; volume: Volume } {
  const env = containerEnvironment(container, DOWNWARD_API_TEST_VALUES);
  const path = containerConfigPath(container, env, readDockerfile());
  const file = mountedFile(volumes, container, path);
  const directory = file.mount.mountPath.replace(/\/$/, '');
  expect(dirname(path), 'the config file lies at the root of its volume').toBe(directory);
  expect(file.mount.readOnly).toBe(true);
  expect(file.projected ?? keysOf(file.volume), `what ${file.volume.name} projects into ${directory}`).toEqual([
    basename(path),
  ]);
  const nested = (container.volumeMounts ?? []).filter((m) => m.mountPath.startsWith(`${directory}/`));
  expect(
    nested.map((m) => m.mountPath),
    `mounts inside ${directory}`,
  ).toEqual([]);
  return { path, key: file.key, volume: file.volume };
}

/** The keys of the ConfigMap a volume projects, among rendered objects. */
export function configMapKeys(objects: readonly KubernetesObject[]): (volume: Volume) => string[] | undefined {
  return (volume) =>
    volume.configMap === undefined
      ? undefined
      : Object.keys(findObject(objects, 'ConfigMap', volume.configMap.name).data ?? {});
}

/** The pod specs of every workload among rendered objects. */
export function podSpecs(objects: readonly KubernetesObject[]): Array<{ volumes?: Volume[]; [list: string]: unknown }> {
  return objects
    .filter((o) => ['Deployment', 'StatefulSet', 'DaemonSet'].includes(o.kind))
    .map((o) => o.spec.template.spec as { volumes?: Volume[] });
}

/** Bytes of a Kubernetes quantity such as 512Mi or 1Gi. */
export function bytesOf(quantity: string): number {
  const match = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|K|M|G)?$/.exec(quantity);
  if (match === null) throw new Error(`unexpected memory quantity ${quantity}`);
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, K: 1e3, M: 1e6, G: 1e9 }[match[2] as 'Ki'] ?? 1;
  return Number(match[1]) * unit;
}
