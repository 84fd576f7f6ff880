// A directory laid out and updated the way the kubelet lays out a ConfigMap, Secret or projected
// volume (Kubernetes pkg/volume/util/atomic_writer.go, AtomicWriter.Write): the files live in a
// hidden timestamped directory `..2006_01_02_15_04_05.<random>`, the symlink `..data` points at it,
// and each visible name is a symlink `<name> -> ..data/<name>`. An update writes a new timestamped
// directory, renames a fresh `..data_tmp` symlink over `..data` (atomic), then removes the old one:
// the visible files themselves are never written.
import { randomInt } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';

const DATA = '..data';
const DATA_TMP = '..data_tmp';

/** Go's time layout `..2006_01_02_15_04_05.` in UTC, then os.MkdirTemp's random digits. */
function timestampedName(now: Date): string {
  const two = (value: number) => String(value).padStart(2, '0');
  const stamp = [
    now.getUTCFullYear(),
    two(now.getUTCMonth() + 1),
    two(now.getUTCDate()),
    two(now.getUTCHours()),
    two(now.getUTCMinutes()),
    two(now.getUTCSeconds()),
  ].join('_');
  return `..${stamp}.${randomInt(2 ** 31)}`;
}

function isLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/**
 * Projects `files` (name -> content) into `directory` as the kubelet does; the first call creates the
 * volume, later calls update it. Unchanged content is not written again (the kubelet skips it too).
 * Names are flat (no `/`), as the ConfigMap and Secret keys the gateway's volumes project.
 */
export function writeKubeletVolume(directory: string, files: Record<string, string>, mode = 0o644): void {
  mkdirSync(directory, { recursive: true });
  const dataLink = join(directory, DATA);
  const previous = existsSync(dataLink) ? readlinkSync(dataLink) : undefined;
  const removed =
    previous === undefined ? [] : readdirSync(join(directory, previous)).filter((name) => !(name in files));
  if (previous !== undefined && removed.length === 0) {
    const same = Object.entries(files).every(
      ([name, text]) =>
        existsSync(join(directory, previous, name)) && readFileSync(join(directory, previous, name), 'utf8') === text,
    );
    if (same) return;
  }
  let timestamped = timestampedName(new Date());
  while (existsSync(join(directory, timestamped))) timestamped = timestampedName(new Date());
  mkdirSync(join(directory, timestamped));
  chmodSync(join(directory, timestamped), 0o755);
  for (const [name, text] of Object.entries(files)) {
    if (name.includes('/') || name.startsWith('..')) throw new Error(`not a volume key: ${name}`);
    writeFileSync(join(directory, timestamped, name), text);
    chmodSync(join(directory, timestamped, name), mode);
  }
  for (const name of Object.keys(files)) {
    if (!isLink(join(directory, name))) symlinkSync(join(DATA, name), join(directory, name));
  }
  symlinkSync(timestamped, join(directory, DATA_TMP));
  renameSync(join(directory, DATA_TMP), dataLink);
  for (const name of removed) rmSync(join(directory, name), { force: true });
  if (previous !== undefined) rmSync(join(directory, previous), { recursive: true, force: true });
}
