// The allocation sampler (bench/alloc-sampler.mjs) in a real Node process: SIGUSR2 starts V8's
// sampling heap profiler, the next SIGUSR2 writes the profile, and the summary finds the function
// that allocated although everything it made was already collected.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { summarizeAllocations } from '../../bench/alloc-summary.mjs';

const SAMPLER = new URL('../../bench/alloc-sampler.mjs', import.meta.url).pathname;

// Allocates 64 short-lived 1 KB strings every millisecond, keeps none of them.
const CHILD = `
function churn() { let kept = 0; for (let i = 0; i < 64; i++) kept += ('x'.repeat(1024) + i).length; return kept; }
setInterval(churn, 1);
process.stdout.write('ready\\n');
`;

async function until(check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await sleep(20);
  }
}

describe('alloc-sampler', () => {
  it('samples between two SIGUSR2 and writes a profile that names the allocating function', async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'alloc-sampler-')), 'profile.heapprofile');
    const child = spawn(process.execPath, ['--import', SAMPLER, '-e', CHILD], {
      env: { ...process.env, ALLOC_PROFILE_OUT: out },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      let output = '';
      child.stdout.on('data', (chunk) => {
        output += chunk;
      });
      await until(() => output.includes('ready'), 10_000);
      child.kill('SIGUSR2');
      await sleep(500);
      expect(existsSync(out)).toBe(false); // nothing is written while sampling
      child.kill('SIGUSR2');
      await until(() => existsSync(out) && readFileSync(out, 'utf8').endsWith('}'), 10_000);
      const lines = summarizeAllocations(JSON.parse(readFileSync(out, 'utf8')), 1, { top: 5 });
      // About 64 KB a millisecond for ~0.5 s: far more than one sampling interval, all of it garbage.
      const perRequest = Number(/allocated per request: ([\d,]+) B/.exec(lines[0]!)?.[1]?.replaceAll(',', ''));
      expect(perRequest).toBeGreaterThan(1_000_000);
      const top = lines
        .slice(
          lines.findIndex((line) => line.startsWith('by function')) + 1,
          lines.findIndex((line) => line.startsWith('by function')) + 3,
        )
        .join('\n');
      expect(top).toContain('churn');
    } finally {
      child.kill('SIGKILL');
    }
  });
});
