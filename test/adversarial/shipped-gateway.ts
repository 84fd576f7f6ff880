// The gateway as the image runs it, for the red-team tests and the hostile soak: the built process,
// started with the image's entry command (the tracing bootstrap, then dist/main.js), the image's ENV and
// the base Deployment's NODE_OPTIONS and OTEL_* (spans sent to a sink on loopback), its output drained (a
// flood logs a line per request: only the last lines are kept), and what the drivers of
// ./drivers/ need around it: the pod's memory limit, resident memory, metrics, and a caller whose
// rate is measured while a driver runs in a process of its own.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseAllDocuments } from 'yaml';
import { readDockerfile } from '../deploy/manifests.js';
import { ROOT, writeConfig } from '../helpers/process.js';

const MiB = 1024 * 1024;

interface Container {
  readonly name: string;
  readonly env: ReadonlyArray<{ readonly name: string; readonly value?: string }>;
  readonly resources: { readonly limits: { readonly memory: string } };
}

function shippedContainer(): Container {
  const text = readFileSync(`${ROOT}/deploy/kubernetes/base/deployment.yaml`, 'utf8');
  const deployment = parseAllDocuments(text)
    .map((document) => document.toJS() as { kind?: string; spec?: { template: { spec: { containers: Container[] } } } })
    .find((object) => object?.kind === 'Deployment');
  return deployment!.spec!.template.spec.containers.find((container) => container.name === 'ledger-gateway')!;
}

/** The image's ENV, the base Deployment's NODE_OPTIONS and OTEL_*, and its memory limit. */
export function shipped(): { readonly env: Record<string, string>; readonly memoryLimitBytes: number } {
  const container = shippedContainer();
  const env: Record<string, string> = {
    ...readDockerfile().env,
    K8S_POD_NAME: 'red-team',
    K8S_NAMESPACE: 'red-team',
    K8S_NODE_NAME: 'red-team',
  };
  for (const { name, value } of container.env) {
    if (value === undefined || !(name === 'NODE_OPTIONS' || name.startsWith('OTEL_'))) continue;
    env[name] = value.replace(/\$\((\w+)\)/g, (_, variable: string) => env[variable] ?? '');
  }
  const memory = /^(\d+)Mi$/.exec(container.resources.limits.memory)!;
  return { env, memoryLimitBytes: Number(memory[1]) * MiB };
}

export interface ShippedGateway {
  readonly child: ChildProcess;
  readonly api: string;
  readonly admin: string;
  readonly pid: number;
  /** The last lines it printed. */
  readonly lastLines: string[];
  /** Whether it is still running (neither exited nor killed by a signal). */
  alive(): boolean;
  close(): Promise<void>;
}

/** A sink for the OTLP exports the shipped environment asks for (kept on loopback, thrown away). */
async function spanSink(): Promise<http.Server> {
  const sink = http.createServer((request, response) => request.resume().on('end', () => response.end()));
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
  return sink;
}

/**
 * Starts the built gateway (dist/: build it first) as the image does, in front of `upstreamUrl`,
 * trusting `issuerConfig`; `extra` adds config lines. `prefix` runs before node in a shell (e.g. to
 * enter a memory cgroup).
 */
export async function startShippedGateway(
  upstreamUrl: string,
  issuerConfig: object,
  participantId: string,
  options: {
    readonly extra?: string[];
    /** More keys of the auth section (auth.publicOperations, ...). */
    readonly auth?: Record<string, unknown>;
    readonly env?: Record<string, string>;
    readonly prefix?: string;
  } = {},
): Promise<ShippedGateway> {
  const auth = { participantId, issuers: [issuerConfig], ...options.auth };
  const config = writeConfig(
    [
      `auth: ${JSON.stringify(auth)}`,
      `upstream: { url: "${upstreamUrl}" }`,
      'server: { host: 127.0.0.1, port: 0 }',
      'admin: { host: 127.0.0.1, port: 0 }',
      'log: { level: info }',
      ...(options.extra ?? []),
    ].join('\n'),
  );
  const sink = await spanSink();
  const env = {
    ...process.env,
    ...shipped().env,
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(sink.address() as AddressInfo).port}`,
    ...options.env,
  };
  const args = ['--import', './dist/telemetry/register.js', 'dist/main.js', '--config', config];
  const [command, argv] =
    options.prefix === undefined
      ? [process.execPath, args]
      : ['/bin/sh', ['-c', `${options.prefix} exec "$0" "$@"`, process.execPath, ...args]];
  const child = spawn(command, argv, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lastLines: string[] = [];
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const listening = new Promise<{ api: string; admin: string }>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no listening line within 60 s:\n${lastLines.join('\n')}`)),
      60_000,
    );
    let buffered = '';
    const onData = (data: Buffer) => {
      buffered += data.toString();
      let newline: number;
      while ((newline = buffered.indexOf('\n')) !== -1) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        lastLines.push(line.slice(0, 2_000));
        if (lastLines.length > 50) lastLines.shift();
        if (line.includes('ledger-gateway listening')) {
          clearTimeout(timer);
          resolve(JSON.parse(line) as { api: string; admin: string });
        }
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    void exited.then(() => reject(new Error(`the gateway exited before listening:\n${lastLines.join('\n')}`)));
  });
  const { api, admin } = await listening;
  return {
    child,
    api,
    admin,
    pid: child.pid!,
    lastLines,
    alive: () => child.exitCode === null && child.signalCode === null,
    async close() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
      await new Promise((resolve) => sink.close(resolve));
    },
  };
}

/** A process's resident memory now (VmRSS) and at its peak so far (VmHWM), in bytes. */
export function residentMemory(pid: number): { now: number; peak: number } {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return { now: NaN, peak: NaN }; // the process is gone
  }
  const kib = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)![1]) * 1024;
  return { now: kib('VmRSS'), peak: kib('VmHWM') };
}

/** A metric's value on the admin listener (its first series, or the one whose labels match `labels`). */
export async function metricValue(admin: string, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(`${admin}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
  const pattern = new RegExp(`^${name}(?:\\{[^}]*${labels}[^}]*\\})? (\\S+)`, 'm');
  const match = pattern.exec(text);
  return match === null ? NaN : Number(match[1]);
}

/** The CPUs a process may run on (`taskset -p -c`: "0,1", "0-3,6"). */
function allowedCpus(pid: number): number[] {
  const output = execFileSync('taskset', ['-p', '-c', String(pid)], { encoding: 'utf8' });
  return /list: (\S+)/
    .exec(output)![1]!
    .split(',')
    .flatMap((range) => {
      const [from, to = from] = range.split('-').map(Number) as [number, number?];
      return Array.from({ length: to - from + 1 }, (_, index) => from + index);
    });
}

function pin(pid: number, cpus: readonly number[]): void {
  execFileSync('taskset', ['-a', '-p', '-c', cpus.join(','), String(pid)], { stdio: 'ignore' });
}

export interface CoreSplit {
  /** startShippedGateway's `prefix` that puts the gateway on the core kept for it. */
  readonly gatewayPrefix: string;
  /** Gives this process back the cores it had. */
  readonly release: () => void;
}

/**
 * The shipped pod has a CPU of its own (its limit is one) and its callers run elsewhere; on a machine
 * of two cores, a driver's own CPU would count against the gateway. So a test comparing another
 * caller's rate with and without a driver keeps the first core for the gateway, and moves this process
 * (the caller, the stand-in participant, and the drivers it starts from now on) to the others.
 */
export function splitCores(): CoreSplit {
  const cpus = allowedCpus(process.pid);
  if (cpus.length < 2)
    throw new Error(`a core for the gateway and one for its callers: this process may use only CPU ${cpus.join(',')}`);
  pin(process.pid, cpus.slice(1));
  return {
    gatewayPrefix: `taskset -p -c ${cpus[0]} $$ >/dev/null;`,
    release: () => pin(process.pid, cpus),
  };
}

export interface DriverRun {
  /** The driver's process. */
  readonly pid: number;
  /** Holds the driver still (SIGSTOP), or lets it go on (SIGCONT): what it holds in the gateway stays. */
  hold(held: boolean): void;
  /** Stops the driver (SIGTERM) and resolves with what it reported. */
  stop(): Promise<unknown>;
  /** Resolves with what it reported once it ends of itself. */
  readonly finished: Promise<unknown>;
}

/** Runs one driver of ./drivers/ (by its name in drivers/index.mjs) in a process of its own. */
export function runDriver(name: string, options: object): DriverRun {
  const child = spawn(process.execPath, [`${ROOT}/test/adversarial/drivers/run.mjs`, name, JSON.stringify(options)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout.on('data', (data: Buffer) => (output += data.toString()));
  const done = new Promise<unknown>((resolve) =>
    child.once('close', () => {
      const line = output.trim().split('\n').at(-1) ?? '';
      resolve(line.startsWith('{') ? (JSON.parse(line) as { result: unknown }).result : { output });
    }),
  );
  return {
    pid: child.pid!,
    hold(held) {
      if (child.exitCode === null) child.kill(held ? 'SIGSTOP' : 'SIGCONT');
    },
    stop() {
      if (child.exitCode === null) child.kill('SIGCONT');
      if (child.exitCode === null) child.kill('SIGTERM');
      const forced = setTimeout(() => child.kill('SIGKILL'), 10_000);
      return done.finally(() => clearTimeout(forced));
    },
    finished: done,
  };
}

export interface SteadyCaller {
  /**
   * Successful answers (200) per second from `fromMs` to `toMs` (Date.now() times), every status in
   * that window, and the 99th percentile of how long its calls took, in ms.
   */
  window(
    fromMs: number,
    toMs: number,
  ): { readonly rate: number; readonly statuses: Record<number, number>; readonly p99Ms: number };
  /** The longest any one call took, in ms. */
  readonly longestMs: number;
  stop(): Promise<void>;
}

/**
 * Another caller, served while a driver runs: `connections` keep-alive connections, each calling
 * `path` with `token` in a closed loop (the next call once the last is answered).
 */
export function steadyCaller(api: string, token: string, connections = 4, path = '/v2/state/ledger-end'): SteadyCaller {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const answered: Array<{ at: number; status: number; ms: number }> = [];
  let longestMs = 0;
  let running = true;
  const call = () =>
    new Promise<number>((resolve) => {
      const request = http.get(
        `${api}${path}`,
        { agent, headers: { authorization: `Bearer ${token}` }, timeout: 30_000 },
        (response) => {
          response.resume();
          response.on('end', () => resolve(response.statusCode!));
          response.on('error', () => resolve(0));
        },
      );
      request.on('timeout', () => request.destroy());
      request.on('error', () => resolve(0));
    });
  const loop = async () => {
    while (running) {
      const started = Date.now();
      const status = await call();
      const at = Date.now();
      longestMs = Math.max(longestMs, at - started);
      answered.push({ at, status, ms: at - started });
      if (status === 0) await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  const loops = Array.from({ length: connections }, loop);
  return {
    window(fromMs, toMs) {
      const within = answered.filter(({ at }) => at >= fromMs && at < toMs);
      const statuses: Record<number, number> = {};
      for (const { status } of within) statuses[status] = (statuses[status] ?? 0) + 1;
      const times = within.map(({ ms }) => ms).sort((a, b) => a - b);
      const p99Ms = times[Math.min(times.length - 1, Math.floor(times.length * 0.99))] ?? NaN;
      return { rate: (statuses[200] ?? 0) / ((toMs - fromMs) / 1000), statuses, p99Ms };
    },
    get longestMs() {
      return longestMs;
    },
    async stop() {
      running = false;
      await Promise.all(loops);
      agent.destroy();
    },
  };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The caller's rate with the driver held still and with it running, in alternating windows (held,
 * running, running, held per round, so that a drift of the shared machine's load cancels out), each
 * `windowMs` long: answers per second over all held windows and over all running ones, and the
 * statuses the caller got while the driver ran.
 */
export async function rateAgainstDriver(
  caller: SteadyCaller,
  driver: DriverRun,
  rounds = 3,
  windowMs = 1_500,
): Promise<{ alone: number; driven: number; drivenStatuses: Record<number, number> }> {
  const seconds = { alone: 0, driven: 0 };
  const answers = { alone: 0, driven: 0 };
  const drivenStatuses: Record<number, number> = {};
  const measure = async (held: boolean) => {
    driver.hold(held);
    await sleep(300); // the change takes effect
    const from = Date.now();
    await sleep(windowMs);
    const window = caller.window(from, Date.now());
    const key = held ? 'alone' : 'driven';
    seconds[key] += windowMs / 1000;
    answers[key] += window.rate * (windowMs / 1000);
    if (!held)
      for (const [status, count] of Object.entries(window.statuses))
        drivenStatuses[Number(status)] = (drivenStatuses[Number(status)] ?? 0) + count;
  };
  for (let round = 0; round < rounds; round++) {
    for (const held of [true, false, false, true]) await measure(held);
  }
  driver.hold(false);
  return { alone: answers.alone / seconds.alone, driven: answers.driven / seconds.driven, drivenStatuses };
}

/** What a hashing upstream received: a call's path, its body's length and sha256. */
export interface HashedRequest {
  readonly url: string;
  readonly bytes: number;
  readonly sha256: string;
}

/** A stand-in participant on a loopback port, keeping connections as a participant would; `close` cuts them. */
async function listenOnLoopback(server: http.Server): Promise<{ url: string; close: () => Promise<void> }> {
  server.keepAliveTimeout = 120_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * A participant that answers every call with a small JSON body once its body has arrived, and keeps
 * of each only its path, length and sha256 (large bodies compared byte for byte without holding them).
 */
export async function hashingUpstream(): Promise<{
  readonly url: string;
  readonly received: HashedRequest[];
  close(): Promise<void>;
}> {
  const received: HashedRequest[] = [];
  const server = http.createServer((request, response) => {
    const hash = createHash('sha256');
    let bytes = 0;
    request.on('data', (chunk: Buffer) => {
      hash.update(chunk);
      bytes += chunk.length;
    });
    request.on('end', () => {
      if (request.method === 'POST') received.push({ url: request.url!, bytes, sha256: hash.digest('hex') });
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': 12 });
      response.end('{"offset":1}');
    });
  });
  return { ...(await listenOnLoopback(server)), received };
}

/**
 * A participant that answers every call at once with a small JSON body and keeps nothing (a
 * recording upstream would hold every request of a flood in the test's memory).
 */
export async function plainUpstream(): Promise<{
  readonly url: string;
  readonly calls: number;
  close(): Promise<void>;
}> {
  let calls = 0;
  const server = http.createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      calls += 1;
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': 12 });
      response.end('{"offset":1}');
    });
  });
  const { url, close } = await listenOnLoopback(server);
  return {
    url,
    get calls() {
      return calls;
    },
    close,
  };
}
