// A real Redis (Debian's redis-server, installed by .ci/run) on a loopback port, started and
// stopped by the test. Persistence off: nothing is written to disk.
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';

export interface RedisServer {
  readonly port: number;
  readonly password: string;
  /** redis://:<password>@127.0.0.1:<port> */
  readonly url: string;
  /** Stops the server (SIGTERM) and waits for it to exit. */
  stop(): Promise<void>;
  /** Starts it again on the same port (empty: no persistence). */
  start(): Promise<void>;
  /** SIGSTOP / SIGCONT: a server that holds connections open and answers nothing. */
  pause(): void;
  resume(): void;
}

export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A throwaway node on a loopback port: nothing saved to disk, a password required. */
export function ephemeralNodeArgs(port: number, password: string): string[] {
  return ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--requirepass', password];
}

function launch(port: number, password: string): Promise<ChildProcess> {
  return launchRedis(ephemeralNodeArgs(port, password));
}

/** Runs redis-server with `args` and resolves once its log says `readyText`. */
export function launchRedis(args: readonly string[], readyText = 'Ready to accept connections'): Promise<ChildProcess> {
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`redis-server did not start within 10 s:\n${output}`));
    }, 10_000);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`cannot run redis-server (is the redis-server package installed?): ${error.message}`));
    });
    const onEarlyExit = (code: number | null) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited with ${code}:\n${output}`));
    };
    child.once('exit', onEarlyExit);
    const onData = (data: Buffer) => {
      output += data.toString();
      if (!output.includes(readyText)) return;
      clearTimeout(timer);
      child.off('exit', onEarlyExit);
      child.stdout.off('data', onData).resume();
      child.stderr.off('data', onData).resume();
      resolve(child);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
  });
}

/** A password-protected server: the URL carries a credential, which must never reach a log. */
export async function startRedisServer(password = `test-secret-${process.pid}`): Promise<RedisServer> {
  const port = await freePort();
  let child: ChildProcess | undefined = await launch(port, password);
  return {
    port,
    password,
    url: `redis://:${password}@127.0.0.1:${port}`,
    async stop() {
      const running = child;
      child = undefined;
      if (running === undefined || running.exitCode !== null) return;
      running.kill('SIGCONT');
      const exited = new Promise<void>((resolve) => running.once('exit', () => resolve()));
      running.kill('SIGTERM');
      const timer = setTimeout(() => running.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    },
    async start() {
      if (child !== undefined) return;
      child = await launch(port, password);
    },
    pause() {
      child?.kill('SIGSTOP');
    },
    resume() {
      child?.kill('SIGCONT');
    },
  };
}
