// The route catalogue covers every route Canton 3.4.12, 3.5.1 and 3.5.10 serve (spec/canton/routes.json).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  matchOperation,
  matchWebSocketOperation,
  NamedOperations,
  OPERATION_NAMES,
  PARTICIPANT_INTERNAL_OPERATIONS,
} from '../src/operations.js';

interface RouteEntry {
  method: string;
  path: string;
  operationId?: string;
  kind: 'http' | 'websocket';
}
const routesFile = new URL('../spec/canton/routes.json', import.meta.url);
const catalogue = JSON.parse(readFileSync(routesFile, 'utf8')) as { routes: RouteEntry[]; extra: RouteEntry[] };

/** A concrete path for a template: each {param} becomes a value with characters Canton ids use. */
const concrete = (template: string) => template.replace(/\{[^}]+\}/g, 'Alice%3A%3A1220ab');

const NAMED: Record<string, string> = {
  'POST /v2/package-vetting': NamedOperations.updateVettedPackages,
  'POST /v2/package-vetting/update': NamedOperations.updateVettedPackages,
  'POST /v2/commands/submit-and-wait-for-transaction': NamedOperations.submitAndWaitForTransaction,
  'GET /v2/version': NamedOperations.getVersion,
  'POST /v2/updates/update-by-offset': NamedOperations.getUpdateByOffset,
  'PATCH /v2/idps/{idp-id}': NamedOperations.updateIdentityProviderConfig,
};

describe('route catalogue', () => {
  it("names every HTTP route of routes.json: the five named operations, Canton's operationId for the rest", () => {
    const http = catalogue.routes.filter((r) => r.kind === 'http');
    expect(http.length).toBeGreaterThanOrEqual(67);
    for (const route of http) {
      const operation = matchOperation(route.method, concrete(route.path));
      const key = `${route.method} ${route.path}`;
      expect(operation, key).toBeDefined();
      expect(operation!.name, key).toBe(NAMED[key] ?? route.operationId);
    }
  });

  it('knows every WebSocket channel', () => {
    const channels = catalogue.routes.filter((r) => r.kind === 'websocket');
    expect(channels).toHaveLength(6);
    for (const channel of channels) {
      expect(matchWebSocketOperation(channel.path)?.name, channel.path).toBe(channel.operationId);
    }
  });

  it('knows the routes Canton serves outside its spec', () => {
    for (const route of catalogue.extra) {
      const operation = matchOperation(route.method, concrete(route.path));
      expect(operation, route.path).toBeDefined();
      expect(operation!.name).not.toBe('unknown');
    }
    expect(PARTICIPANT_INTERNAL_OPERATIONS.map((o) => o.template).sort()).toEqual([
      '/docs/asyncapi',
      '/docs/openapi',
      '/livez',
      '/readyz',
    ]);
  });

  it('labels an unknown /v2 path unknown and serves nothing else outside /v2', () => {
    expect(matchOperation('GET', '/v2/nope')?.name).toBe('unknown');
    expect(matchOperation('DELETE', '/v2/version')?.name).toBe('unknown');
    expect(matchOperation('GET', '/v2/packages/a/b/c')?.name).toBe('unknown');
    expect(matchOperation('GET', '/v2/packages//status')?.name).toBe('unknown');
    expect(matchOperation('GET', '/metrics')).toBeUndefined();
    expect(matchOperation('GET', '/v22/version')).toBeUndefined();
  });

  it('keeps an encoded slash inside one path parameter', () => {
    expect(matchOperation('GET', '/v2/packages/a%2Fb/status')?.name).toBe('getV2PackagesPackage-idStatus');
  });

  it('has a bounded set of operation names for metric labels', () => {
    expect(new Set(OPERATION_NAMES).size).toBe(OPERATION_NAMES.length);
    expect(OPERATION_NAMES.length).toBeLessThan(100);
  });
});
