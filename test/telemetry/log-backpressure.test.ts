// A stdout nobody reads (a blocked pipe, a stalled log collector): the gateway's log buffer stays
// bounded (lines beyond it are dropped and counted) and the process still exits. Runs the built
// logger (dist/, built once by the global setup) in a child process whose stdout this test never reads.
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildDist } from '../helpers/process.js';

const NODE = resolve('node_modules/.bin/node');
const LOGGING = resolve('dist/telemetry/logging.js');

/** The child: a logger bounded at 256 KB on its (non-blocking) stdout, 40,000 lines (~4 MB), then exit(0). */
const CHILD = `
void process.stdout; // a non-blocking pipe, as libuv makes one for process.stdout (a blocking one blocks the write itself)
import { createLogger, droppedLogLines, logDestination } from ${JSON.stringify(LOGGING)};
const logger = createLogger('info', logDestination(1, 256 * 1024));
for (let i = 0; i < 40000; i++) logger.info({ i, padding: 'x'.repeat(60) }, 'line');
setTimeout(() => {
  process.stderr.write(JSON.stringify({ dropped: droppedLogLines(), heapMiB: process.memoryUsage().heapUsed / 1048576 }) + '\\n');
  process.exit(0);
}, 300);
`;

describe('a stdout that takes nothing', () => {
  it('bounds what the logger holds (dropped lines counted) and, on a non-blocking stdout, lets the process exit within the exit flush bound', async () => {
    buildDist();
    // The child's stdout: a real pipe (a FIFO) whose read end is open here and never read, so it
    // fills at 64 KB. (A stdio 'pipe' is a socket pair, which this process would go on reading.)
    const dir = mkdtempSync(join(tmpdir(), 'log-backpressure-'));
    const fifo = join(dir, 'stdout');
    execFileSync('mkfifo', [fifo]);
    const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const writer = openSync(fifo, constants.O_WRONLY);
    const child = spawn(NODE, ['--input-type=module', '-e', CHILD], { stdio: ['ignore', writer, 'pipe'] });
    closeSync(writer);
    let stderr = '';
    // stdio[2] is 'pipe'; @types/node's typed-stdio overloads take no file descriptor (stdout here).
    child.stderr!.on('data', (data: Buffer) => {
      stderr += data.toString();
    });
    const started = Date.now();
    const exited = await new Promise<number | null>((done) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        done(null);
      }, 15_000);
      child.once('exit', (code) => {
        clearTimeout(timer);
        done(code);
      });
    });
    closeSync(reader);
    rmSync(dir, { recursive: true, force: true });
    expect(exited, `the child did not exit (or not with 0); stderr: ${stderr}`).toBe(0);
    expect(Date.now() - started).toBeLessThan(10_000); // 300 ms, then at most the 2 s exit flush bound
    const report = JSON.parse(stderr.split('\n').find((line) => line.startsWith('{"dropped"')) ?? '{}') as {
      dropped?: number;
    };
    // ~4 MB of lines against 64 KB of pipe and 256 KB of buffer: most were dropped, and counted.
    expect(report.dropped).toBeGreaterThan(20_000);
    expect(report.dropped).toBeLessThan(40_000);
  });
});
