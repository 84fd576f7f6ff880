import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { readJson } from './helpers.js';

const require = createRequire(import.meta.url);
const viteNode = require.resolve('vite-node/vite-node.mjs');
const mainScript = fileURLToPath(new URL('../../src/sandbox/main.ts', import.meta.url));

describe('sandbox CLI', () => {
  it('listens on the requested port, prints its URL and closes cleanly on SIGTERM', async () => {
    const child = spawn(
      process.execPath,
      [viteNode, mainScript, '--port', '0', '--host', '127.0.0.1', '--version', '3.4.12'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    try {
      let output = '';
      const url = await new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          output += chunk.toString();
          const match = /sandbox listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
          if (match?.[1] !== undefined) resolve(match[1]);
        });
        child.once('exit', (code) => reject(new Error(`sandbox exited early (${code}): ${output}`)));
      });
      expect((await readJson(await fetch(`${url}/v2/version`))).version).toBe('3.4.12');
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const [code] = await exited;
      expect(code).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, 30_000);

  it('refuses a bad option with exit code 2', async () => {
    const child = spawn(process.execPath, [viteNode, mainScript, '--port', 'eighty'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const [code] = await once(child, 'exit');
    expect(code).toBe(2);
    expect(stderr).toContain('--port must be a non-negative integer');
  }, 30_000);
});
