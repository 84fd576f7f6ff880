// The files a pod's container sees, laid out under a temporary root the way the kubelet mounts them:
// a ConfigMap or Secret volume mounted as a directory is a kubelet volume (test/helpers/kubelet-volume.ts)
// that an update of the object changes in place; one mounted through subPath is the file as it was
// when the container started (the kubelet bind-mounts the file itself, and its later updates write new
// files elsewhere), so an update never reaches it.
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { writeKubeletVolume } from '../helpers/kubelet-volume.js';
import type { Container, Volume } from './manifests.js';

export interface PodFilesystem {
  /** The host path of a path in the container. */
  readonly at: (containerPath: string) => string;
  /** The object behind `volume` (a ConfigMap's or Secret's data, key -> text) changed: the kubelet's sync. */
  readonly update: (volume: string, data: Record<string, string>) => void;
  readonly remove: () => void;
}

/** What a volume projects: each key as a file of its own name, or `items` (key -> path). */
function projection(volume: Volume, data: Record<string, string>): Record<string, string> {
  const source = volume.configMap ?? volume.secret;
  if (source === undefined) throw new Error(`volume ${volume.name}: only ConfigMap and Secret volumes are laid out`);
  if (source.items === undefined) return { ...data };
  return Object.fromEntries(
    source.items.map((item) => {
      const text = data[item.key];
      if (text === undefined) throw new Error(`volume ${volume.name}: no key ${item.key}`);
      return [item.path, text];
    }),
  );
}

/**
 * Lays out under `root` the ConfigMap and Secret mounts of `container` with `data` (volume name -> its
 * object's data). Mounts of other volumes are left out.
 */
export function podFilesystem(
  root: string,
  volumes: readonly Volume[],
  container: Container,
  data: Record<string, Record<string, string>>,
): PodFilesystem {
  const at = (containerPath: string) => join(root, containerPath);
  // Where the kubelet keeps each volume (the pod's volume directory on the node).
  const volumeDirectory = (name: string) => join(root, '.kubelet-volumes', name);
  const mounted = (container.volumeMounts ?? []).filter((mount) => data[mount.name] !== undefined);
  const volumeOf = (name: string) => {
    const volume = volumes.find((v) => v.name === name);
    if (volume === undefined) throw new Error(`no volume ${name}`);
    return volume;
  };
  const write = (name: string, objectData: Record<string, string>) => {
    const volume = volumeOf(name);
    const mode = (volume.secret ?? volume.configMap)?.defaultMode ?? 0o644;
    writeKubeletVolume(volumeDirectory(name), projection(volume, objectData), mode);
    for (const mount of mounted.filter((m) => m.name === name && m.subPath === undefined))
      writeKubeletVolume(at(mount.mountPath), projection(volume, objectData), mode);
  };
  for (const name of new Set(mounted.map((mount) => mount.name))) write(name, data[name]!);
  // A subPath mount: the file as it is now, fixed for the container's life.
  for (const mount of mounted.filter((m) => m.subPath !== undefined)) {
    mkdirSync(dirname(at(mount.mountPath)), { recursive: true });
    copyFileSync(join(volumeDirectory(mount.name), mount.subPath!), at(mount.mountPath));
  }
  return {
    at,
    update: (name, objectData) => write(name, objectData),
    remove: () => rmSync(root, { recursive: true, force: true }),
  };
}
