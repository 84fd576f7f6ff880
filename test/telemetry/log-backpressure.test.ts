// A stdout nobody reads (a blocked pipe, a stalled log collector): the gateway's log buffer stays
// bounded (lines beyond it are dropped and counted) and the process still exits. Runs the built
// logger (dist/, built once by the global setup) in a child process whose stdout this test never reads.
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildDist } from '../helpers/process.js';

const NODE = resolve('node_modules/.bin/node');
const LOGGING = resolve('dist/telemetry/logging.js');

/** The child: a logger bounded at 256 KB on its stdout, 40,000 lines (~4 MB), then exit(0). */
const CHILD = `
import { createLogger, droppedLogLines, logDestination } from ${JSON.stringify(LOGGING)};
const logger = createLogger('info', logDestination(1, 256 * 1024));
for (let i = 0; i < 40000; i++) logger.info({ i, padding: 'x'.repeat(60) }, 'line');
setTimeout(() => {
  process.stderr.write(JSON.stringify({ dropped: droppedLogLines(), heapMiB: process.memoryUsage().heapUsed / 1048576 }) + '\\n');
  process.exit(0);
}, 300);
`;

describe('a stdout that takes nothing', () => {
  it('bounds what the logger holds (dropped lines counted) and lets the process exit within the exit flush bound', async () => {
    buildDist();
    const child = spawn(NODE, ['--input-type=module', '-e', CHILD], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.pause(); // never read: the pipe fills (64 KB) and the child's writes meet EAGAIN
    let stderr = '';
    child.stderr.on('data', (data: Buffer) => {
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
    child.stdout.destroy();
    expect(exited, `the child did not exit (or not with 0); stderr: ${stderr}`).toBe(0);
    expect(Date.now() - started).toBeLessThan(10_000); // 300 ms, then at most the 2 s exit flush bound
    const report = JSON.parse(stderr.split('\n').find((line) => line.startsWith('{"dropped"')) ?? '{}') as { dropped?: number };
    // ~4 MB of lines against 64 KB of pipe and 256 KB of buffer: most were dropped, and counted.
    expect(report.dropped).toBeGreaterThan(20_000);
    expect(report.dropped).toBeLessThan(40_000);
  });
});
