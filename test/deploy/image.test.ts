// The container image (deploy/Dockerfile). No Docker engine runs here, so the image itself is not
// built: the Dockerfile's stages are checked as text, and its entry command line (ENTRYPOINT + CMD,
// parsed from the file so the two cannot drift) runs outside a container, the way each overlay's
// pod would run it: the ConfigMap's config file, the container's environment, the image's ENV.
// Only what a cluster provides is stood in for, on 127.0.0.1:
//  - the mounts: the ConfigMap's and the Secret's volumes are laid out under a temporary root as the
//    kubelet lays them out (pod-filesystem.ts), and the paths /etc/ledger-gateway/... point there;
//  - the participant: the embedded sandbox (LEDGER_GATEWAY_UPSTREAM_URL=sandbox);
//  - the identity provider's JWKS URL and the OpenTelemetry collector: local servers;
//  - the listeners: 127.0.0.1 on free ports (LEDGER_GATEWAY_[ADMIN_]HOST/PORT), so tests can run side by side.
import { generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { ROOT, buildDist, startProcess, type GatewayProcess } from '../helpers/process.js';
import {
  DOWNWARD_API_TEST_VALUES,
  configPathOf,
  containerArgv,
  containerConfigPath,
  containerEnvironment,
  effectiveConfig,
  findObject,
  gatewayWorkload,
  readDockerfile,
  renderKustomization,
  type Volume,
} from './manifests.js';
import { podFilesystem, type PodFilesystem } from './pod-filesystem.js';
import { describeNeeding } from '../helpers/tool-groups.js';

describe('Dockerfile', () => {
  const dockerfile = readDockerfile();
  const final = dockerfile.stages.at(-1)!;
  const stageNamed = (name: string) => dockerfile.stages.find((stage) => stage.name === name);

  it('builds in a Node 24 stage with the dev dependencies and runs on a Node 24 slim or distroless image', () => {
    expect(final.from).toMatch(/^(gcr\.io\/distroless\/nodejs24-debian\d+(:[\w.-]+)?|node:24[\w.-]*-slim)$/);
    const build = dockerfile.stages.find((stage) => stage.lines.some((line) => /npm run build/.test(line)));
    expect(build?.from).toMatch(/^node:24[\w.-]*-slim$/);
    expect(build!.lines.some((line) => /\bnpm ci\b/.test(line) && !line.includes('--omit=dev'))).toBe(true);
  });

  it('copies production dependencies only into the runtime stage', () => {
    const copies = final.lines.filter((line) => line.startsWith('COPY --from='));
    const modules = copies.find((line) => line.includes('node_modules'));
    const source = stageNamed(/--from=(\S+)/.exec(modules ?? '')?.[1] ?? '');
    expect(source?.lines.some((line) => /\bnpm ci\b.*--omit=dev/.test(line))).toBe(true);
    // The `node` devDependency (the Node binary npm scripts use) and the test tools are dev-only in
    // the lockfile, so --omit=dev leaves them out.
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dev?: boolean }>;
    };
    for (const name of ['node', 'typescript', 'vitest', 'kubernetes-models']) {
      expect(lock.packages[`node_modules/${name}`]?.dev, name).toBe(true);
    }
    // Only the build output and the package manifest join them.
    expect(copies.filter((line) => line !== modules).map((line) => line.split(/\s+/).at(-1))).toEqual([
      './package.json',
      './dist',
    ]);
  });

  it('runs as a numeric non-root user, with an exec-form entry command that loads the OpenTelemetry bootstrap first', () => {
    expect(dockerfile.user).toMatch(/^[1-9]\d*(:[1-9]\d*)?$/);
    const [node, ...args] = dockerfile.argv;
    expect(node).toMatch(/\/node$|^node$/);
    const main = args.indexOf('dist/main.js');
    const preload = args.indexOf('--import');
    expect(preload).toBeGreaterThanOrEqual(0);
    expect(preload).toBeLessThan(main);
    expect(args[preload + 1]).toMatch(/^\.\/dist\/telemetry\/.+\.js$/);
    expect(configPathOf(dockerfile.argv)).toBe('/etc/ledger-gateway/config/config.yaml');
    expect(final.lines.some((line) => line.startsWith('HEALTHCHECK'))).toBe(false); // Kubernetes probes instead
  });

  it("sends only the build's inputs as context (.dockerignore)", () => {
    const ignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'));
    expect(ignore[0]).toBe('*');
    const included = ignore.filter((line) => line.startsWith('!')).map((line) => line.slice(1).replace(/\/$/, ''));
    for (const excluded of ['node_modules', 'dist', '.git', 'test', 'deploy', '.dev'])
      expect(included).not.toContain(excluded);
    const contextSources = dockerfile.stages
      .flatMap((stage) => stage.lines)
      .filter((line) => line.startsWith('COPY ') && !line.includes('--from='))
      .flatMap((line) => line.split(/\s+/).slice(1, -1));
    for (const source of contextSources)
      expect(included, `${source} is in the build context`).toContain(source.replace(/\/$/, ''));
  });
});

// Local stand-ins for the cluster's identity provider and OpenTelemetry collector.

interface JwksServer {
  readonly url: string;
  close(): Promise<void>;
}

function listen(server: Server): Promise<string> {
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)),
  );
}

const closeServer = (server: Server) => new Promise<void>((resolve) => server.close(() => resolve()));

async function startJwksServer(publicKey: KeyObject, kid: string): Promise<JwksServer> {
  const body = JSON.stringify({ keys: [{ ...publicKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' }] });
  const server = createServer((_request, response) =>
    response.writeHead(200, { 'content-type': 'application/json' }).end(body),
  );
  const url = await listen(server);
  return { url: `${url}/realms/canton/protocol/openid-connect/certs`, close: () => closeServer(server) };
}

interface Collector {
  readonly url: string;
  readonly exports: Array<{ path: string; contentType: string | undefined; body: Buffer }>;
  close(): Promise<void>;
}

async function startCollector(): Promise<Collector> {
  const exports: Collector['exports'] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      exports.push({
        path: request.url ?? '',
        contentType: request.headers['content-type'],
        body: Buffer.concat(chunks),
      });
      response.writeHead(200, { 'content-type': request.headers['content-type'] ?? 'application/x-protobuf' }).end();
    });
  });
  const url = await listen(server);
  return { url, exports, close: () => closeServer(server) };
}

/** What a pod of the overlay is given: its ConfigMap's config text, the container's env, the config path it is told. */
function podOf(overlay: 'ingress' | 'sidecar') {
  const objects = renderKustomization(overlay);
  const gateway = gatewayWorkload(objects);
  const env = containerEnvironment(gateway.container, DOWNWARD_API_TEST_VALUES);
  const configPath = containerConfigPath(gateway.container, env, readDockerfile());
  const volumes = gateway.podSpec.volumes as Volume[];
  const configMaps = volumes
    .filter((volume) => volume.configMap !== undefined)
    .map((volume) => ({
      volume: volume.name,
      data: findObject(objects, 'ConfigMap', volume.configMap!.name).data ?? {},
    }));
  const texts = configMaps.flatMap(({ data }) => Object.values(data));
  expect(texts.length, "the gateway's ConfigMaps hold its config file alone").toBe(1);
  const configText = texts[0]!;
  return { gateway, volumes, configMaps, configPath, configText, env, config: effectiveConfig(configText, env) };
}

interface StartedPod {
  readonly pod: ReturnType<typeof podOf>;
  readonly process: GatewayProcess;
  readonly files: PodFilesystem;
  /** The config as the ConfigMap holds it, with the cluster's stand-ins. */
  readonly config: { log: { level: string }; [section: string]: unknown };
  /** Kubernetes updates the ConfigMap with this config: the kubelet's sync of the volume. */
  readonly updateConfig: (config: object) => void;
  readonly token: () => Promise<string>;
}

/**
 * A pod of the overlay started outside a container: its ConfigMap and Secret mounts laid out by
 * the kubelet's rules under a temporary root, the identity provider's JWKS URL on 127.0.0.1, then the
 * image's entry command (ENTRYPOINT + CMD, or the container's command and args) with the paths mapped.
 */
async function startPod(
  overlay: 'ingress' | 'sidecar',
  running: Array<() => Promise<unknown>>,
  env: Record<string, string>,
): Promise<StartedPod> {
  const dockerfile = readDockerfile();
  const pod = podOf(overlay);
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const kid = 'deploy-test-key';
  const root = mkdtempSync(join(tmpdir(), 'ledger-gateway-pod-'));
  running.push(async () => rmSync(root, { recursive: true, force: true }));

  // The Secret's files: the issuer's public key where the config names it.
  const secretsVolume = pod.volumes.find((volume) => volume.secret?.secretName === 'ledger-gateway-secrets')!;
  const secretsMount = pod.gateway.container.volumeMounts!.find((m) => m.name === secretsVolume.name)!.mountPath;
  const secretData: Record<string, string> = {};
  const config = parse(pod.configText) as StartedPod['config'] & { auth: { issuers: Array<Record<string, string>> } };
  for (const issuer of config.auth.issuers) {
    if (issuer.publicKeyFile !== undefined) {
      expect(issuer.publicKeyFile.startsWith(`${secretsMount}/`)).toBe(true);
      secretData[issuer.publicKeyFile.slice(secretsMount.length + 1)] = publicKey
        .export({ type: 'spki', format: 'pem' })
        .toString();
      issuer.publicKeyFile = join(root, issuer.publicKeyFile);
    }
    if (issuer.jwksUrl !== undefined) {
      const jwks = await startJwksServer(publicKey, kid);
      running.push(() => jwks.close());
      issuer.jwksUrl = jwks.url;
    }
  }
  const configMapData = (text: string) =>
    Object.fromEntries(pod.configMaps.map(({ volume, data }) => [volume, { [Object.keys(data)[0]!]: text }]));
  const files = podFilesystem(root, pod.volumes, pod.gateway.container, {
    ...configMapData(stringify(config)),
    [secretsVolume.name]: secretData,
  });
  // The path the gateway is told holds the ConfigMap's config.
  expect(readFileSync(files.at(pod.configPath), 'utf8')).toBe(stringify(config));

  const [, ...args] = containerArgv(pod.gateway.container, dockerfile);
  const configIndex = args.indexOf(pod.configPath);
  const mappedConfig = configIndex === -1 ? { LEDGER_GATEWAY_CONFIG: files.at(pod.configPath) } : {};
  if (configIndex !== -1) args[configIndex] = files.at(pod.configPath);
  const preload = args[args.indexOf('--import') + 1]!;
  expect(existsSync(join(ROOT, preload)), `${preload} is built`).toBe(true);
  const process = await startProcess(
    args,
    {
      ...dockerfile.env,
      ...pod.env,
      ...mappedConfig,
      LEDGER_GATEWAY_UPSTREAM_URL: 'sandbox',
      LEDGER_GATEWAY_HOST: '127.0.0.1',
      LEDGER_GATEWAY_PORT: '0',
      LEDGER_GATEWAY_ADMIN_HOST: '127.0.0.1',
      LEDGER_GATEWAY_ADMIN_PORT: '0',
      ...env,
    },
    30_000,
  );
  running.push(async () => {
    if (process.child.exitCode === null) process.child.kill('SIGKILL');
    await process.exited;
  });

  const issuer = pod.config.auth.issuers[0]!;
  const token = async () => {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ iss: issuer.issuer, aud: issuer.audience, sub: 'alice', iat: now, exp: now + 120 })
      .setProtectedHeader({ alg: 'RS256', kid })
      .sign(privateKey);
  };
  return {
    pod,
    process,
    files,
    config,
    updateConfig: (next) => {
      for (const [volume, data] of Object.entries(configMapData(stringify(next)))) files.update(volume, data);
    },
    token,
  };
}

/** One sample of a metric with these labels on the admin listener's /metrics. */
async function metricValue(admin: string, name: string, labels: string): Promise<number | undefined> {
  const text = await (await fetch(`${admin}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

async function runningFingerprint(admin: string): Promise<string | undefined> {
  const text = await (await fetch(`${admin}/metrics`)).text();
  return /^ledger_gateway_config_info\{fingerprint="([^"]+)"\} 1$/m.exec(text)?.[1];
}

beforeAll(() => buildDist(), 120_000);

describeNeeding('kubectl').each(['ingress', 'sidecar'] as const)(
  "the image's entry command with the %s overlay's config",
  (overlay) => {
    const running: Array<() => Promise<unknown>> = [];
    afterEach(async () => {
      for (const stop of running.splice(0).reverse()) await stop();
    });

    it('gets /readyz 200 against the sandbox, forwards an authorized call, exports its span, and exits 0 on SIGTERM', async () => {
      const collector = await startCollector();
      running.push(() => collector.close());
      const {
        pod,
        process: gateway,
        token,
      } = await startPod(overlay, running, {
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      });

      await expect
        .poll(async () => (await fetch(`${gateway.admin}/readyz`)).status, { timeout: 15_000, interval: 200 })
        .toBe(200);
      expect((await fetch(`${gateway.admin}/livez`)).status).toBe(200);

      // A token of the configured issuer passes; the caller's sampled trace is continued and exported.
      const traceId = randomBytes(16).toString('hex');
      const traceparent = `00-${traceId}-${randomBytes(8).toString('hex')}-01`;
      const refused = await fetch(`${gateway.api}/v2/version`);
      expect(refused.status).toBe(401);
      const answer = await fetch(`${gateway.api}/v2/version`, {
        headers: { authorization: `Bearer ${await token()}`, traceparent },
      });
      expect(answer.status).toBe(200);
      expect(((await answer.json()) as { version: string }).version).toMatch(/^3\./);

      gateway.child.kill('SIGTERM');
      expect(await gateway.exited).toBe(0);
      expect(gateway.output.join('\n')).toContain('shutdown complete');

      // The spans went to the collector named by OTEL_EXPORTER_OTLP_ENDPOINT, with the pod's resource attributes.
      const traces = collector.exports.filter((exported) => exported.path === '/v1/traces');
      expect(traces.length).toBeGreaterThan(0);
      const body = Buffer.concat(traces.map((exported) => exported.body));
      expect(body.includes(Buffer.from(traceId, 'hex'))).toBe(true);
      expect(body.includes(Buffer.from(DOWNWARD_API_TEST_VALUES['metadata.name']!))).toBe(true);
      expect(body.includes(Buffer.from(pod.env.OTEL_SERVICE_NAME!))).toBe(true);
    }, 90_000);

    it('reloads its config, without a restart, when the kubelet updates the mounted ConfigMap', async () => {
      const {
        process: gateway,
        config,
        updateConfig,
      } = await startPod(overlay, running, {
        OTEL_TRACES_EXPORTER: 'none',
      });
      const reloads = () => metricValue(gateway.admin, 'ledger_gateway_config_reloads_total', 'result="success"');
      const before = await runningFingerprint(gateway.admin);
      expect(before).toBeDefined();
      expect(await reloads()).toBe(0);

      // kubectl apply of a changed ConfigMap (same name); the kubelet's next sync swaps the volume's ..data.
      expect(config.log.level).not.toBe('debug');
      updateConfig({ ...config, log: { ...config.log, level: 'debug' } });
      await expect.poll(reloads, { timeout: 10_000, interval: 100 }).toBe(1);
      expect(await runningFingerprint(gateway.admin)).not.toBe(before);
      expect(await metricValue(gateway.admin, 'ledger_gateway_config_reloads_total', 'result="invalid"')).toBe(0);
      const reloaded = () => gateway.output.find((line) => line.includes('configuration reloaded'));
      await expect.poll(reloaded, { timeout: 5_000, interval: 100 }).toBeDefined(); // the log is written asynchronously
      expect(JSON.parse(reloaded()!) as { trigger: string }).toMatchObject({ trigger: 'file' });

      gateway.child.kill('SIGTERM');
      expect(await gateway.exited).toBe(0);
    }, 60_000);
  },
);
