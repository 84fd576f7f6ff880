// Every process the bench starts: pinned to a core, in its own process group, and stopped on
// every way out (normal end, error, Ctrl-C, SIGTERM), group and all (nginx's workers too).
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import net from 'node:net';

const started = new Set();

/** The absolute path of a command on PATH, or undefined. */
export function which(command) {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir !== '' && existsSync(`${dir}/${command}`)) return `${dir}/${command}`;
  }
  return undefined;
}

const TASKSET = which('taskset');

export function canPin() {
  return TASKSET !== undefined;
}

/**
 * Starts `command args` on `core` (undefined: no pinning). stdout/stderr go to files (or
 * /dev/null), never through this process, so the bench does not pay for its children's output.
 */
export function startProcess(name, command, args, { core, cwd, env, stdout = '/dev/null', stderr = '/dev/null' } = {}) {
  const out = openSync(stdout, 'a');
  const err = stderr === stdout ? out : openSync(stderr, 'a');
  const [file, argv] =
    core !== undefined && TASKSET !== undefined ? [TASKSET, ['-c', String(core), command, ...args]] : [command, args];
  const child = spawn(file, argv, { cwd, env, stdio: ['ignore', out, err], detached: true });
  closeSync(out);
  if (err !== out) closeSync(err);
  const handle = {
    name,
    pid: child.pid,
    child,
    stderr,
    exited: new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal }))),
  };
  started.add(handle);
  child.once('exit', () => started.delete(handle));
  return handle;
}

function signalGroup(pid, signal) {
  try {
    process.kill(-pid, signal); // detached: the child leads its own group
  } catch {
    /* already gone */
  }
}

/** SIGTERM, then SIGKILL after `graceMs`, for one process group. */
export async function stopProcess(handle, graceMs = 3_000) {
  if (handle.child.exitCode !== null || handle.child.signalCode !== null) return;
  signalGroup(handle.pid, 'SIGTERM');
  const timer = setTimeout(() => signalGroup(handle.pid, 'SIGKILL'), graceMs);
  await handle.exited;
  clearTimeout(timer);
  signalGroup(handle.pid, 'SIGKILL'); // stragglers of the group (workers), if any
}

export async function stopAll() {
  await Promise.all([...started].map((handle) => stopProcess(handle)));
}

/** Last resort from the 'exit' event: synchronous, so SIGKILL at once. */
function killAllNow() {
  for (const handle of started) signalGroup(handle.pid, 'SIGKILL');
}

/** Installs the handlers that stop every child however this process ends; `onStop` runs once first. */
export function stopChildrenOnExit(onStop) {
  let stopping = false;
  const stopThenExit = (code) => {
    if (stopping) {
      killAllNow();
      process.exit(code);
    }
    stopping = true;
    Promise.resolve()
      .then(onStop)
      .catch(() => undefined)
      .then(stopAll)
      .finally(() => process.exit(code));
  };
  process.on('SIGINT', () => {
    console.error('\ninterrupted: stopping every process the bench started');
    stopThenExit(130);
  });
  process.on('SIGTERM', () => stopThenExit(143));
  process.on('SIGHUP', () => stopThenExit(129));
  process.on('uncaughtException', (error) => {
    console.error(error);
    stopThenExit(1);
  });
  process.on('unhandledRejection', (error) => {
    console.error(error);
    stopThenExit(1);
  });
  process.on('exit', killAllNow);
}

/** A free loopback port (closed again before use: a small race, fine on a quiet machine). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `check` until it returns true; fails with the process's stderr if it exits or time runs out. */
export async function waitUntil(handle, what, check, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void handle.exited.then(() => {
    exited = true;
  });
  while (Date.now() < deadline) {
    if (exited) break;
    try {
      if (await check()) return;
    } catch {
      /* not yet */
    }
    await sleep(100);
  }
  const log =
    handle.stderr !== '/dev/null' && existsSync(handle.stderr) ? readFileSync(handle.stderr, 'utf8').slice(-3000) : '';
  throw new Error(
    `${handle.name}: ${exited ? 'exited' : 'timed out'} before ${what}${log ? `\n--- ${handle.stderr} ---\n${log}` : ''}`,
  );
}

export function portAccepts(port) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Runs a command to completion and returns its stdout (throws on a non-zero exit). */
export function run(command, args, options = {}) {
  return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...options });
}

/** Pins this process (the WebSocket client, the JWKS server, the bookkeeping) to `core`. */
export function pinSelf(core) {
  if (TASKSET === undefined) return false;
  try {
    run(TASKSET, ['-a', '-p', '-c', String(core), String(process.pid)]);
    return true;
  } catch {
    return false;
  }
}
