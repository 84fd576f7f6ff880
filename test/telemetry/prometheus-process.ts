// A real Prometheus (Debian's `prometheus` package) on a loopback port, scraping one target every
// second from a temporary directory; and promtool. CI installs the package: when the binaries are
// missing the tests fail and say so, they are never skipped.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const PROMETHEUS_BIN = process.env.PROMETHEUS_BIN ?? '/usr/bin/prometheus';
export const PROMTOOL_BIN = process.env.PROMTOOL_BIN ?? '/usr/bin/promtool';

export function requireExecutable(path: string): void {
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(
      `${path} is not installed: these tests need Debian's "prometheus" package (apt-get install prometheus; .ci/run installs it), or PROMETHEUS_BIN/PROMTOOL_BIN pointing at the binaries.`,
    );
  }
}

export interface PromtoolResult {
  readonly code: number;
  readonly output: string;
}

/** Runs promtool with `input` on stdin; resolves with its exit code and combined output. */
export function promtool(args: readonly string[], input?: string): Promise<PromtoolResult> {
  requireExecutable(PROMTOOL_BIN);
  return new Promise((resolve, reject) => {
    const child = execFile(PROMTOOL_BIN, args, { timeout: 20_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
      // execFile's error is an Error at run time; its declared type (an Omit<> of ErrnoException) is not seen as one.
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
      if (error !== null && typeof error.code !== 'number') reject(error);
      else resolve({ code, output: `${stdout}${stderr}` });
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export interface QueryResult {
  readonly metric: Record<string, string>;
  readonly value: [number, string];
}

export interface RunningPrometheus {
  readonly url: string;
  /** An instant query through /api/v1/query; throws on a query Prometheus rejects. */
  query(expression: string): Promise<QueryResult[]>;
  stop(): Promise<void>;
}

export async function startPrometheus(target: URL, job = 'ledger-gateway'): Promise<RunningPrometheus> {
  requireExecutable(PROMETHEUS_BIN);
  const directory = await mkdtemp(join(tmpdir(), 'ledger-gateway-prometheus-'));
  const configFile = join(directory, 'prometheus.yml');
  await writeFile(
    configFile,
    [
      'global:',
      '  scrape_interval: 1s',
      '  scrape_timeout: 1s',
      '  evaluation_interval: 1s',
      'scrape_configs:',
      `  - job_name: ${job}`,
      `    metrics_path: ${target.pathname}`,
      '    static_configs:',
      `      - targets: ['${target.host}']`,
      '',
    ].join('\n'),
  );
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const output: string[] = [];
  const child: ChildProcess = spawn(
    PROMETHEUS_BIN,
    [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${join(directory, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  child.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  async function stop(): Promise<void> {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const killed = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(killed);
    }
    await rm(directory, { recursive: true, force: true });
  }

  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`prometheus exited with ${child.exitCode}:\n${output.join('')}`);
    }
    try {
      if ((await fetch(`${url}/-/ready`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`prometheus did not become ready within 15 s:\n${output.join('')}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  return {
    url,
    async query(expression) {
      const response = await fetch(`${url}/api/v1/query?${new URLSearchParams({ query: expression }).toString()}`);
      const answer = (await response.json()) as {
        status: string;
        error?: string;
        data?: { resultType: string; result: QueryResult[] };
      };
      if (answer.status !== 'success') throw new Error(`query ${expression} failed: ${answer.error}`);
      return answer.data?.resultType === 'vector' ? answer.data.result : [];
    },
    stop,
  };
}
