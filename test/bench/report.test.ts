// The bench's ratio list (bench/report.mjs) for a memory soak, which has no measured runs.
import { describe, expect, it } from 'vitest';
import { ratios } from '../../bench/report.mjs';

describe('ratios for a memory soak', () => {
  it("takes the token cache's figure from the soak's own count", () => {
    const list = ratios([], { requests: 1_000_000, verifications: 6, growthPercent: -4.9 });
    const tokenCache = list.find((entry: { name: string }) => entry.name.startsWith('token cache'));
    expect(tokenCache).toMatchObject({ value: 0.000006, pass: true });
    expect(tokenCache!.name).toContain('the soak');
    expect(list.find((entry: { name: string }) => entry.name.startsWith('resident memory'))).toMatchObject({
      value: -4.9,
      pass: true,
    });
  });

  it('fails the token cache when the soak verified too often, and says "not measured" without a count', () => {
    expect(
      ratios([], { requests: 1_000, verifications: 5, growthPercent: 0 }).find((entry: { name: string }) =>
        entry.name.startsWith('token cache'),
      ),
    ).toMatchObject({ value: 0.005, pass: false });
    expect(
      ratios([], { requests: 1_000, growthPercent: 0 }).find((entry: { name: string }) =>
        entry.name.startsWith('token cache'),
      ),
    ).toMatchObject({ value: undefined, pass: undefined });
  });
});
