import { describe, expect, it } from 'vitest';
import {
  expectCantonError,
  expectDecodeFailure,
  getWithJsonBody,
  postJson,
  readJson,
  TRACE_ID,
  TRACEPARENT,
  withSandbox,
} from './helpers.js';

describe('sandbox HTTP conventions', () => {
  it('answers an unknown route with the legacy v1 404 shape', async () => {
    await withSandbox(async ({ url, app }) => {
      const response = await fetch(`${url}/v2/nope?x=1`);
      expect(response.status).toBe(404);
      const host = new URL(url).host;
      expect(await readJson(response)).toEqual({ errors: [`GET, uri: http://${host}/v2/nope?x=1`], status: 404 });
      const wrongMethod = await fetch(`${url}/v2/version`, { method: 'DELETE' });
      expect(await readJson(wrongMethod)).toEqual({ errors: [`DELETE, uri: http://${host}/v2/version`], status: 404 });
      expect(app.sandbox.receivedRequests.map((received) => received.url)).toEqual(['/v2/nope?x=1', '/v2/version']);
    });
  });

  it('serves everything under a path prefix of its own, as Canton does with http-ledger-api.path-prefix', async () => {
    await withSandbox(
      async ({ url, app }) => {
        const served = await fetch(`${url}/participant/json/v2/state/ledger-end`);
        expect(served.status).toBe(200);
        expect(await readJson(served)).toEqual({ offset: 1 });
        // Outside it, pekko's own rejection: 404 text/plain, no route ran.
        for (const path of ['/v2/state/ledger-end', '/participant/jsonx/v2/version', '/participant']) {
          const outside = await fetch(`${url}${path}`);
          expect(outside.status, path).toBe(404);
          expect(outside.headers.get('content-type')).toMatch(/^text\/plain/);
          expect(await outside.text()).toBe('The requested resource could not be found.');
        }
        // Its own 404 for an unknown route under the prefix is the legacy shape, as without one.
        const unknown = await fetch(`${url}/participant/json/v2/nope`);
        expect(unknown.status).toBe(404);
        expect(await readJson(unknown)).toMatchObject({ status: 404 });
        expect(app.sandbox.receivedRequests.map((r) => r.url)).toEqual([
          '/participant/json/v2/state/ledger-end',
          '/participant/json/v2/nope',
        ]);
      },
      { pathPrefix: '/participant/json' },
    );
  });

  it('answers malformed JSON with 400 text/plain like tapir', async () => {
    await withSandbox(async ({ url }) => {
      for (const path of [
        '/v2/updates/update-by-offset',
        '/v2/package-vetting/update',
        '/v2/idps',
        '/v2/commands/submit-and-wait-for-transaction',
      ]) {
        await expectDecodeFailure(await postJson(`${url}${path}`, '{"offset": 1,'));
      }
      await expectDecodeFailure(await postJson(`${url}/v2/updates/update-by-offset`, '[1, 2]'));
      await expectDecodeFailure(await postJson(`${url}/v2/updates/update-by-offset`, '{"offset": "one"}'));
    });
  });

  it('reads JSON bodies sent without a content type and ignores bodies on routes without body input', async () => {
    await withSandbox(async ({ url }) => {
      const noContentType = await fetch(`${url}/v2/updates/update-by-offset`, {
        method: 'POST',
        body: new TextEncoder().encode('{"offset": 0}'),
      });
      await expectCantonError(noContentType, { status: 400, code: 'NON_POSITIVE_OFFSET', category: 8 });
      const formContentType = await fetch(`${url}/v2/updates/update-by-offset`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: '{"offset": 0}',
      });
      await expectCantonError(formContentType, { status: 400, code: 'NON_POSITIVE_OFFSET', category: 8 });
      const version = await getWithJsonBody(`${url}/v2/version`, 'not json at all');
      expect(version.status).toBe(200);
    });
  });

  it('takes the error traceId from the W3C traceparent header, else makes one up', async () => {
    await withSandbox(async ({ url }) => {
      const traced = await expectCantonError(
        await postJson(`${url}/v2/updates/update-by-offset`, { offset: 0 }, { traceparent: TRACEPARENT }),
        { status: 400, code: 'NON_POSITIVE_OFFSET', category: 8 },
      );
      expect(traced['traceId']).toBe(TRACE_ID);
      expect(traced['context']['tid']).toBe(TRACE_ID);
      const untraced = await expectCantonError(await postJson(`${url}/v2/updates/update-by-offset`, { offset: 0 }), {
        status: 400,
        code: 'NON_POSITIVE_OFFSET',
        category: 8,
      });
      expect(untraced['traceId']).not.toBe(TRACE_ID);
    });
  });

  it('records what it received so proxy tests can assert the upstream side', async () => {
    await withSandbox(async ({ url, app }) => {
      await getWithJsonBody(`${url}/v2/package-vetting`, { pageSize: 5 }, { 'x-probe': 'yes' });
      const last = app.sandbox.receivedRequests.at(-1);
      expect(last).toMatchObject({ method: 'GET', url: '/v2/package-vetting', body: '{"pageSize":5}' });
      expect(last?.headers['x-probe']).toBe('yes');
    });
  });

  it('serves /livez and /readyz like Canton', async () => {
    await withSandbox(async ({ url }) => {
      const livez = await fetch(`${url}/livez`);
      expect(livez.status).toBe(200);
      expect(await livez.text()).toBe('');
      const readyz = await fetch(`${url}/readyz`);
      expect(readyz.status).toBe(200);
      expect(readyz.headers.get('content-type')).toMatch(/^text\/plain/);
      expect(await readyz.text()).toBe('[+] ledger ok (SERVING)\nreadyz check passed\n');
    });
  });

  it('reports the configured version with the full feature descriptor', async () => {
    await withSandbox(
      async ({ url }) => {
        const body = await readJson(await fetch(`${url}/v2/version`));
        expect(body).toEqual({
          version: '3.4.12',
          features: {
            experimental: { staticTime: { supported: false }, commandInspectionService: { supported: true } },
            userManagement: { supported: true, maxRightsPerUser: 1000, maxUsersPageSize: 1000 },
            partyManagement: { maxPartiesPageSize: 10000 },
            offsetCheckpoint: {
              maxOffsetCheckpointEmissionDelay: { seconds: 75, nanos: 0, unknownFields: { fields: {} } },
            },
            packageFeature: { maxVettedPackagesPageSize: 100 },
          },
        });
      },
      { version: '3.4.12' },
    );
    await withSandbox(async ({ url }) => {
      expect((await readJson(await fetch(`${url}/v2/version`))).version).toBe('3.5.10');
    });
  });
});
