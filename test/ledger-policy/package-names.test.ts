// Package ids resolved to names through the participant's vetting list (the sandbox on 127.0.0.1),
// asked once per id however many calls wait, and failing closed when the participant cannot answer.
import { describe, expect, it } from 'vitest';
import { createPackageNameResolver, vettedPackageLookup } from '../../src/ledger-policy/package-names.js';
import { SANDBOX_SEED } from '../../src/sandbox/app.js';
import { unsignedJwt, withSandbox } from '../sandbox/helpers.js';

const authorization = `Bearer ${unsignedJwt({ sub: 'alice' })}`;

describe('package names', () => {
  it("asks the participant's POST /v2/package-vetting/list, once per package id, with the caller's token", async () => {
    await withSandbox(async ({ url, app }) => {
      const resolver = createPackageNameResolver({
        lookup: vettedPackageLookup({ baseUrl: url, timeoutMs: 2_000 }),
        cacheEntries: 100,
        unknownRetryMs: 60_000,
      });
      const id = SANDBOX_SEED.packages.iouV2.packageId;
      const names = await Promise.all([resolver.resolve(id, authorization), resolver.resolve(id, authorization)]);
      expect(names).toEqual(['sandbox-iou', 'sandbox-iou']);
      expect(resolver.cached(id)).toBe('sandbox-iou');
      expect(await resolver.resolve('0'.repeat(64), authorization)).toBeUndefined();
      expect(await resolver.resolve('0'.repeat(64), authorization)).toBeUndefined(); // remembered as unknown
      const asked = app.sandbox.receivedRequests.filter((request) => request.url === '/v2/package-vetting/list');
      expect(asked).toHaveLength(2);
      expect(JSON.parse(asked[0]!.body)).toEqual({ packageMetadataFilter: { packageIds: [id] }, pageSize: 100 });
      expect(asked[0]!.headers.authorization).toBe(authorization);
    });
  });

  it('rejects when the participant cannot answer (a closed port, a timeout), and asks again later', async () => {
    let url = '';
    await withSandbox(async (sandbox) => {
      url = sandbox.url;
    });
    const resolver = createPackageNameResolver({
      lookup: vettedPackageLookup({ baseUrl: url, timeoutMs: 500 }),
      cacheEntries: 10,
      unknownRetryMs: 60_000,
    });
    const id = SANDBOX_SEED.packages.iouV1.packageId;
    await expect(resolver.resolve(id)).rejects.toThrow();
    expect(resolver.cached(id)).toBeUndefined();
  });
});
