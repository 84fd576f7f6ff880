// server.pathPrefix: a call or WebSocket upgrade under the client-facing prefix is served as its
// unprefixed path and put behind the upstream's own base path (upstream.url with a path, as a
// participant that serves under Canton's http-ledger-api.path-prefix needs); any other target gets
// the participant's 404 for a path it does not serve; metrics and the route catalogue see the
// canonical path; the admin listener is not affected.
import http, { type IncomingMessage } from 'node:http';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { normalizedPathPrefix, outsidePathPrefix, stripPathPrefix } from '../../src/exchange/path-prefix.js';
import { MetricNames } from '../../src/telemetry/metrics.js';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { answerJson, startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startSandbox } from '../sandbox/helpers.js';

const PREFIX = '/api/json-api';

function target(url: string): IncomingMessage {
  return { url } as IncomingMessage;
}

describe('stripPathPrefix', () => {
  it('serves a target under the prefix as its unprefixed path, the query kept', () => {
    const cases: Array<[string, string]> = [
      ['/api/json-api/v2/version', '/v2/version'],
      ['/api/json-api/v2/updates?limit=5', '/v2/updates?limit=5'],
      ['/api/json-api', '/'],
      ['/api/json-api/', '/'],
      ['/api/json-api?x=1', '/?x=1'],
      ['/api/json-api/v2/parties/Alice%3A%3A1220', '/v2/parties/Alice%3A%3A1220'],
    ];
    for (const [url, stripped] of cases) {
      const request = target(url);
      expect(stripPathPrefix(request, PREFIX), url).toBe(stripped);
      expect(request.url).toBe(stripped);
      expect(outsidePathPrefix(request), url).toBe(false);
    }
  });

  it('marks any other target, a longer segment and an encoded spelling included, and leaves it as it came', () => {
    for (const url of ['/v2/version', '/api/json-apis/v2/version', '/api/json%2Dapi/v2/version', '/api', '/']) {
      const request = target(url);
      expect(stripPathPrefix(request, PREFIX), url).toBe(url);
      expect(outsidePathPrefix(request), url).toBe(true);
    }
  });

  it('strips once: an upgrade handed on as a plain call is not stripped again', () => {
    const request = target('/api/json-api/api/json-api/v2/version');
    stripPathPrefix(request, PREFIX);
    expect(stripPathPrefix(request, PREFIX)).toBe('/api/json-api/v2/version');
  });

  it('reads a configured trailing slash as none', () => {
    expect(normalizedPathPrefix('/api/json-api/')).toBe('/api/json-api');
    expect(normalizedPathPrefix('/api/json-api')).toBe('/api/json-api');
    expect(normalizedPathPrefix(undefined)).toBeUndefined();
  });
});

/** A GET with `path` sent as written (fetch and undici resolve dot segments before sending). */
function rawGet(base: string, path: string, headers: Record<string, string>) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }>((resolve, reject) => {
    const { hostname, port } = new URL(base);
    http
      .get({ hostname, port, path, headers }, (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString()));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, headers: response.headers, text }));
      })
      .on('error', reject);
  });
}

async function requestsCounted(gw: RunningGateway): Promise<Array<Record<string, string | number>>> {
  const metric = await gw.registry.getSingleMetric(MetricNames.requests)!.get();
  return metric.values.map((v) => ({ ...v.labels, value: v.value }));
}

describe('a gateway with server.pathPrefix', () => {
  const current = perTest();

  async function behindPrefix(upstreamPath: string, pathPrefix: string | undefined) {
    const upstream: RecordingUpstream = await startRecordingUpstream(answerJson(200, { offset: 7 }));
    current.upstream = upstream;
    const gw = await startGateway(`${upstream.url}${upstreamPath}`, {
      ...(pathPrefix !== undefined && { server: { pathPrefix } }),
    });
    current.gw = gw;
    const get = (path: string) => rawGet(gw.url, path, gw.auth());
    return { upstream, gw, get };
  }

  for (const [name, clientPrefix, upstreamPath] of [
    ['a client prefix alone', PREFIX, ''],
    ["the participant's own prefix alone (upstream.url with a path)", undefined, '/ledger'],
    ['a client prefix in front of a participant with a prefix of its own', `${PREFIX}/`, '/ledger'],
  ] as const) {
    it(`${name}: the participant gets its own path, the query and encoding kept`, async () => {
      const { upstream, gw, get } = await behindPrefix(upstreamPath, clientPrefix);
      const client = clientPrefix === undefined ? '' : PREFIX;
      expect((await get(`${client}/v2/state/ledger-end`)).status).toBe(200);
      expect((await get(`${client}/v2/updates/transaction-tree-by-id/a%2Fb?verbose=true`)).status).toBe(200);
      expect(upstream.requests.map((r) => r.url)).toEqual([
        `${upstreamPath}/v2/state/ledger-end`,
        `${upstreamPath}/v2/updates/transaction-tree-by-id/a%2Fb?verbose=true`,
      ]);
      // The readiness probe asks the participant under its own path too, never under the client's.
      await expect.poll(() => upstream.probes.length).toBeGreaterThan(0);
      expect(new Set(upstream.probes.map((r) => r.url))).toEqual(new Set([`${upstreamPath}/v2/version`]));
      // The operation is the canonical route's, whatever the client called it under.
      expect(await requestsCounted(gw)).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ operation: 'getV2StateLedger-end', status: '200', value: 1 }),
          expect.objectContaining({ operation: 'getV2UpdatesTransaction-tree-by-idUpdate-id', status: '200' }),
        ]),
      );
    });
  }

  it('answers a target outside the prefix as the participant answers a path it does not serve, and sends it nowhere', async () => {
    const { upstream, gw, get } = await behindPrefix('/ledger', PREFIX);
    for (const path of ['/v2/state/ledger-end', '/api/json-apis/v2/state/ledger-end', '/api/v2/version?token=x']) {
      const answer = await get(path);
      expect(answer.status, path).toBe(404);
      expect(answer.headers['content-type']).toMatch(/^application\/json/);
      const host = new URL(gw.url).host;
      expect(JSON.parse(answer.text), path).toEqual({
        errors: [`GET, uri: http://${host}${path.split('?')[0]}`],
        status: 404,
      });
      expect(answer.headers['x-request-id']).toMatch(/./);
    }
    expect(upstream.requests).toHaveLength(0);
    expect(await requestsCounted(gw)).toContainEqual(
      expect.objectContaining({
        operation: 'unknown',
        status: '404',
        error_code: 'GATEWAY_OUTSIDE_PATH_PREFIX',
        value: 3,
      }),
    );
  });

  it('keeps its target checks and its catalogue under the prefix', async () => {
    const { upstream, get } = await behindPrefix('', PREFIX);
    expect(JSON.parse((await get(`${PREFIX}/../v2/version`)).text)).toMatchObject({ code: 'GATEWAY_INVALID_PATH' });
    expect(JSON.parse((await get(`${PREFIX}//v2/version`)).text)).toMatchObject({ code: 'GATEWAY_INVALID_PATH' });
    // The prefix's own root and the gateway's admin paths are no JSON API routes under it.
    for (const path of [PREFIX, `${PREFIX}/livez`, `${PREFIX}/metrics`]) {
      const answer = await get(path);
      expect(answer.status, path).toBe(404);
      expect(JSON.parse(answer.text), path).toMatchObject({ code: 'GATEWAY_ROUTE_NOT_EXPOSED' });
    }
    expect(upstream.requests).toHaveLength(0);
  });

  it('leaves the admin listener as it is: /livez, /readyz and /metrics at its root only', async () => {
    const { gw } = await behindPrefix('', PREFIX);
    expect((await request(`${gw.adminUrl}/livez`)).statusCode).toBe(200);
    expect((await request(`${gw.adminUrl}/metrics`)).statusCode).toBe(200);
    expect((await request(`${gw.adminUrl}${PREFIX}/livez`)).statusCode).toBe(404);
  });

  it('tunnels a WebSocket stream under the prefix to the participant under its own, and refuses one outside', async () => {
    const sandbox = await startSandbox({ pathPrefix: '/ledger' });
    current.upstream = sandbox;
    const gw = await startGateway(`${sandbox.url}/ledger`, { server: { pathPrefix: PREFIX } });
    current.gw = gw;
    const token = await gw.issuer.mint({ sub: 'alice' });
    const wsUrl = (path: string) => `${gw.url.replace('http', 'ws')}${path}`;
    const first = await new Promise<string>((resolve, reject) => {
      const socket = new WebSocket(wsUrl(`${PREFIX}/v2/updates`), [`jwt.token.${token}`, 'daml.ws.auth']);
      socket.once('open', () =>
        socket.send(
          JSON.stringify({
            beginExclusive: 0,
            updateFormat: {
              includeTransactions: {
                eventFormat: { filtersForAnyParty: { cumulative: [] }, verbose: false },
                transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
              },
            },
          }),
        ),
      );
      socket.once('message', (data) => {
        resolve(Buffer.from(data as Buffer).toString());
        socket.close();
      });
      socket.once('error', reject);
    });
    expect(first).toContain('"offset":1');
    expect(sandbox.app.sandbox.upgrades.at(-1)?.url).toBe('/ledger/v2/updates');

    const refused = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const socket = new WebSocket(wsUrl('/v2/updates'), [`jwt.token.${token}`, 'daml.ws.auth']);
      socket.once('unexpected-response', (_request, response) => {
        let body = '';
        response.on('data', (chunk: Buffer) => (body += chunk.toString()));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      });
      socket.once('open', () => reject(new Error('opened')));
      socket.once('error', () => {});
    });
    expect(refused.status).toBe(404);
    expect(JSON.parse(refused.body)).toEqual({
      errors: [`GET, uri: http://${new URL(gw.url).host}/v2/updates`],
      status: 404,
    });
    expect(sandbox.app.sandbox.upgrades).toHaveLength(1);
    expect(await requestsCounted(gw)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ operation: 'onV2Updates', status: '101' }),
        expect.objectContaining({ operation: 'unknown', status: '404', error_code: 'GATEWAY_OUTSIDE_PATH_PREFIX' }),
      ]),
    );
  });
});
