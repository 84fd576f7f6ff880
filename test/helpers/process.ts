// Runs the built gateway (dist/main.js) as its own process, as `npm start` and the image do.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const ROOT = new URL('../..', import.meta.url).pathname;

/**
 * Compiles src/ to dist/ as `npm start` does (`tsc --build`: nothing is compiled when dist/ is up to
 * date); a no-op when the global setup already did.
 */
export function buildDist(): void {
  if (process.env.LEDGER_GATEWAY_DIST_BUILT === '1') return;
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '--build', join(ROOT, 'tsconfig.json')], { cwd: ROOT, stdio: 'pipe' });
}

export function writeConfig(yaml: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'ledger-gateway-'));
  const file = join(dir, 'config.yaml');
  writeFileSync(file, yaml);
  return file;
}

/**
 * A config file for a gateway process on 127.0.0.1 port 0 (API and admin) in front of `upstreamUrl`,
 * trusting `issuer` (an `auth.issuers[]` entry); `extra` adds YAML lines (other sections).
 */
export function writeGatewayConfig(
  upstreamUrl: string,
  issuer: object,
  participantId: string,
  extra: string[] = [],
): string {
  return writeConfig(
    [
      `auth: { participantId: ${participantId}, issuers: [${JSON.stringify(issuer)}] }`,
      `upstream: { url: "${upstreamUrl}" }`,
      'server: { host: 127.0.0.1, port: 0 }',
      'admin: { host: 127.0.0.1, port: 0 }',
      ...extra,
    ].join('\n'),
  );
}

export interface GatewayProcess {
  readonly child: ChildProcess;
  readonly api: string;
  readonly admin: string;
  /** Every line the process printed so far (stdout and stderr). */
  readonly output: string[];
  /** Resolves with the exit code. */
  readonly exited: Promise<number | null>;
  /** Kills it (SIGKILL) unless it has exited already, and waits for it to be gone. */
  close(): Promise<number | null>;
}

/**
 * Starts `node dist/main.js ...args` and waits (bounded) for its "listening" log line. `shellPrefix`
 * runs shell commands first in the process that becomes node (e.g. `ulimit -f 128; trap '' XFSZ;`).
 */
export function startProcess(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  timeoutMs = 15_000,
  shellPrefix?: string,
): Promise<GatewayProcess> {
  const [command, argv] =
    shellPrefix === undefined
      ? [process.execPath, [...args]]
      : ['/bin/sh', ['-c', `${shellPrefix} exec "$0" "$@"`, process.execPath, ...args]];
  const child = spawn(command, argv, {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  // 'close', not 'exit': the process can exit before its last output is read.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`gateway did not start within ${timeoutMs} ms:\n${output.join('\n')}`));
    }, timeoutMs);
    const onLine = (line: string) => {
      output.push(line);
      if (!line.includes('ledger-gateway listening')) return;
      const parsed = JSON.parse(line) as { api: string; admin: string };
      clearTimeout(timer);
      const close = () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
        return exited;
      };
      resolve({ child, api: parsed.api, admin: parsed.admin, output, exited, close });
    };
    let buffered = '';
    const onData = (data: Buffer) => {
      buffered += data.toString();
      let newline: number;
      while ((newline = buffered.indexOf('\n')) !== -1) {
        onLine(buffered.slice(0, newline));
        buffered = buffered.slice(newline + 1);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited with ${code} before listening:\n${output.join('\n')}`));
    });
  });
}

/** Runs the CLI to completion (bounded) and returns its exit code and output. */
export function runToExit(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  timeoutMs = 15_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => {
      stdout += d;
    });
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`did not exit within ${timeoutMs} ms`));
    }, timeoutMs);
    child.once('close', (code) => {
      // after the output is read, not merely after the exit
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
