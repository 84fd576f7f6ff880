// The container image (deploy/Dockerfile). No Docker engine runs here, so the image itself is not
// built: the Dockerfile's stages are checked as text, and its entry command line (ENTRYPOINT + CMD,
// parsed from the file so the two cannot drift) runs outside a container, the way each overlay's
// pod would run it: the ConfigMap's config file, the container's environment, the image's ENV.
// Only what a cluster provides is stood in for, on 127.0.0.1:
//  - the mounts: the config file and the Secret's files are written to a temporary directory and
//    the paths /etc/ledger-gateway/... point there;
//  - the participant: the embedded sandbox (LEDGER_GATEWAY_UPSTREAM_URL=sandbox);
//  - the identity provider's JWKS URL and the OpenTelemetry collector: local servers;
//  - the listeners: 127.0.0.1 on free ports (LEDGER_GATEWAY_[ADMIN_]HOST/PORT), so tests can run side by side.
import { generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
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
  containerEnvironment,
  effectiveConfig,
  gatewayWorkload,
  mountedConfigMapFile,
  readDockerfile,
  renderKustomization,
} from './manifests.js';

const SECRETS_MOUNT = '/etc/ledger-gateway/secrets/';

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
    expect(configPathOf(dockerfile.argv)).toBe('/etc/ledger-gateway/config.yaml');
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

/** What a pod of the overlay is given: config text, container env, the config path it reads. */
function podOf(overlay: 'ingress' | 'sidecar') {
  const objects = renderKustomization(overlay);
  const gateway = gatewayWorkload(objects);
  const configPath = configPathOf(readDockerfile().argv);
  const configText = mountedConfigMapFile(objects, gateway, configPath);
  const env = containerEnvironment(gateway.container, DOWNWARD_API_TEST_VALUES);
  return { configText, env, config: effectiveConfig(configText, env) };
}

beforeAll(() => buildDist(), 120_000);

describe.each(['ingress', 'sidecar'] as const)("the image's entry command with the %s overlay's config", (overlay) => {
  const running: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const stop of running.splice(0).reverse()) await stop();
  });

  it('gets /readyz 200 against the sandbox, forwards an authorized call, exports its span, and exits 0 on SIGTERM', async () => {
    const dockerfile = readDockerfile();
    const pod = podOf(overlay);
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const kid = 'deploy-test-key';

    // The mounts: /etc/ledger-gateway/config.yaml and the Secret's files under a temporary directory.
    const mounts = mkdtempSync(join(tmpdir(), 'ledger-gateway-pod-'));
    const secrets = join(mounts, 'secrets');
    mkdirSync(secrets);
    const config = parse(pod.configText) as { auth: { issuers: Array<Record<string, string>> } };
    for (const issuer of config.auth.issuers) {
      if (issuer.publicKeyFile !== undefined) {
        expect(issuer.publicKeyFile.startsWith(SECRETS_MOUNT)).toBe(true);
        const file = join(secrets, issuer.publicKeyFile.slice(SECRETS_MOUNT.length));
        writeFileSync(file, publicKey.export({ type: 'spki', format: 'pem' }), { mode: 0o440 });
        issuer.publicKeyFile = file;
      }
      if (issuer.jwksUrl !== undefined) {
        const jwks = await startJwksServer(publicKey, kid);
        running.push(() => jwks.close());
        issuer.jwksUrl = jwks.url;
      }
    }
    const configFile = join(mounts, 'config.yaml');
    writeFileSync(configFile, stringify(config));

    const collector = await startCollector();
    running.push(() => collector.close());

    // The entry command: ENTRYPOINT + CMD, with the image's node binary as this Node and the mount path mapped.
    const [, ...args] = dockerfile.argv;
    const configIndex = args.indexOf(configPathOf(dockerfile.argv));
    args[configIndex] = configFile;
    const preload = args[args.indexOf('--import') + 1]!;
    expect(existsSync(join(ROOT, preload)), `${preload} is built`).toBe(true);

    const env = {
      ...dockerfile.env,
      ...pod.env,
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      LEDGER_GATEWAY_UPSTREAM_URL: 'sandbox',
      LEDGER_GATEWAY_HOST: '127.0.0.1',
      LEDGER_GATEWAY_PORT: '0',
      LEDGER_GATEWAY_ADMIN_HOST: '127.0.0.1',
      LEDGER_GATEWAY_ADMIN_PORT: '0',
    };
    const gateway: GatewayProcess = await startProcess(args, env, 30_000);
    running.push(async () => {
      if (gateway.child.exitCode === null) gateway.child.kill('SIGKILL');
      await gateway.exited;
    });

    await expect
      .poll(async () => (await fetch(`${gateway.admin}/readyz`)).status, { timeout: 15_000, interval: 200 })
      .toBe(200);
    expect((await fetch(`${gateway.admin}/livez`)).status).toBe(200);

    // A token of the configured issuer passes; the caller's sampled trace is continued and exported.
    const issuer = pod.config.auth.issuers[0]!;
    const now = Math.floor(Date.now() / 1000);
    const token = await new SignJWT({
      iss: issuer.issuer,
      aud: issuer.audience,
      sub: 'alice',
      iat: now,
      exp: now + 120,
    })
      .setProtectedHeader({ alg: 'RS256', kid })
      .sign(privateKey);
    const traceId = randomBytes(16).toString('hex');
    const traceparent = `00-${traceId}-${randomBytes(8).toString('hex')}-01`;
    const refused = await fetch(`${gateway.api}/v2/version`);
    expect(refused.status).toBe(401);
    const answer = await fetch(`${gateway.api}/v2/version`, {
      headers: { authorization: `Bearer ${token}`, traceparent },
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
});
