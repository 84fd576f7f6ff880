// The bench's profile summary (npm run bench -- --profile) on a profile whose answer is known.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { summarizeProfile } from '../../bench/profile-summary.mjs';

const frame = (functionName: string, url: string, lineNumber = 0) => ({
  functionName,
  url,
  lineNumber,
  columnNumber: 0,
  scriptId: '0',
});

/**
 * (root) -> handler (dist/app.js) -> request (undici) ; handler -> hash (node:internal/crypto/hash)
 * Samples after the first second: handler self 2, request 5, hash 3; idle 4 (left out).
 */
function writeProfile(): string {
  const nodes = [
    { id: 1, callFrame: frame('(root)', ''), children: [2, 5, 6] },
    { id: 2, callFrame: frame('handler', 'file:///srv/gateway/dist/app.js', 175), children: [3, 4] },
    {
      id: 3,
      callFrame: frame('request', 'file:///srv/gateway/node_modules/undici/lib/api/api-request.js', 189),
      children: [],
    },
    { id: 4, callFrame: frame('hash', 'node:internal/crypto/hash', 292), children: [] },
    { id: 5, callFrame: frame('(idle)', ''), children: [] },
    { id: 6, callFrame: frame('loadModule', 'node:internal/modules/esm/loader', 10), children: [] },
  ];
  // Start-up: 5 samples of module loading in the first second, then the load.
  const samples = [6, 6, 6, 6, 6, 2, 2, 3, 3, 3, 3, 3, 4, 4, 4, 5, 5, 5, 5];
  const timeDeltas = samples.map((_, index) => (index === 5 ? 1_000_000 : 1_000));
  const file = join(mkdtempSync(join(tmpdir(), 'profile-')), 'CPU.test.cpuprofile');
  writeFileSync(file, JSON.stringify({ nodes, startTime: 0, endTime: 2_000_000, samples, timeDeltas }));
  return file;
}

describe('summarizeProfile', () => {
  it('ranks self time and sums inclusive time by package and own file, start-up and idle left out', () => {
    const lines = summarizeProfile(writeProfile(), { skipSeconds: 0.5 });
    expect(lines[0]).toBe('profile: 10 busy samples (19 in all)');
    const self = lines.slice(
      lines.indexOf('self time, top 25:') + 1,
      lines.findIndex((line) => line.startsWith('inclusive')),
    );
    expect(self).toEqual([
      '   50.0%  request  pkg undici:190',
      '   30.0%  hash  node:internal/crypto/hash:293',
      '   20.0%  handler  dist/app.js:176',
    ]);
    const inclusive = lines.slice(lines.findIndex((line) => line.startsWith('inclusive')) + 1);
    expect(inclusive).toEqual(['  100.0%  dist/app.js', '   50.0%  pkg undici', '   30.0%  node:internal']);
  });

  it('says so when nothing was busy after the start-up', () => {
    expect(summarizeProfile(writeProfile(), { skipSeconds: 60 })).toEqual([
      'profile: no busy samples after the start-up was left out',
    ]);
  });
});
