// The route catalogue covers every route of every Canton specification vendored in spec/canton/
// (3.4.12, 3.5.1, 3.5.10: each version's openapi.yaml and asyncapi.yaml), every route of Canton 3.6
// (listed by hand below: its specification is not vendored, see spec/canton/README.md) and the
// routes Canton serves outside them (spec/canton/routes.json "extra").
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  HTTP_OPERATIONS,
  matchOperation,
  matchWebSocketOperation,
  NamedOperations,
  OPERATION_NAMES,
  PARTICIPANT_INTERNAL_OPERATIONS,
  WRITE_OPERATION_NAMES,
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

const specDirectory = new URL('../spec/canton/', import.meta.url);
const VENDORED_VERSIONS = readdirSync(specDirectory, { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name);

interface VendoredSpecs {
  readonly version: string;
  readonly http: ReadonlyArray<{ method: string; path: string; operationId: string }>;
  readonly channels: ReadonlyArray<{ path: string; operationId: string }>;
}

/** Every HTTP operation of a version's openapi.yaml and every channel of its asyncapi.yaml. */
function vendoredSpecs(version: string): VendoredSpecs {
  const read = (name: string) => parse(readFileSync(new URL(`${version}/${name}`, specDirectory), 'utf8')) as unknown;
  const openapi = read('openapi.yaml') as { paths: Record<string, Record<string, { operationId: string }>> };
  const asyncapi = read('asyncapi.yaml') as { channels: Record<string, { subscribe: { operationId: string } }> };
  return {
    version,
    http: Object.entries(openapi.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, operation]) => ({
        method: method.toUpperCase(),
        path,
        operationId: operation.operationId,
      })),
    ),
    channels: Object.entries(asyncapi.channels).map(([path, channel]) => ({
      path,
      operationId: channel.subscribe.operationId,
    })),
  };
}

type Effect = 'read' | 'write';

/**
 * Every HTTP route of Canton 3.6 (3.6.0-SNAPSHOT, Canton's `main`), written by hand from its published
 * openapi.yaml (community/ledger/ledger-json-api/src/test/resources/json-api-docs/ in
 * digital-asset/canton): method and path, the operation name the catalogue must give it (Canton's
 * operationId, or the product's name for the five named operations), and whether it changes the
 * ledger or the participant (audited). The last two are served outside the specification, with
 * traffic enforcement (Canton `JsTrafficService.scala`).
 */
const CANTON_3_6_ROUTES: ReadonlyArray<readonly [route: string, name: string, effect: Effect]> = [
  ['POST /v2/commands/submit-and-wait', 'postV2CommandsSubmit-and-wait', 'write'],
  ['POST /v2/commands/submit-and-wait-for-transaction', NamedOperations.submitAndWaitForTransaction, 'write'],
  ['POST /v2/commands/submit-and-wait-for-reassignment', 'postV2CommandsSubmit-and-wait-for-reassignment', 'write'],
  [
    'POST /v2/commands/submit-and-wait-for-transaction-tree',
    'postV2CommandsSubmit-and-wait-for-transaction-tree',
    'write',
  ],
  ['POST /v2/commands/async/submit', 'postV2CommandsAsyncSubmit', 'write'],
  ['POST /v2/commands/async/submit-reassignment', 'postV2CommandsAsyncSubmit-reassignment', 'write'],
  ['POST /v2/commands/completions', 'postV2CommandsCompletions', 'read'],
  ['POST /v2/commands/command-completions', 'postV2CommandsCommand-completions', 'read'],
  ['POST /v2/commands/completion-by-hash', 'postV2CommandsCompletion-by-hash', 'read'],
  ['POST /v2/events/events-by-contract-id', 'postV2EventsEvents-by-contract-id', 'read'],
  ['GET /v2/version', NamedOperations.getVersion, 'read'],
  ['POST /v2/dars/validate', 'postV2DarsValidate', 'read'],
  ['POST /v2/dars', 'postV2Dars', 'write'],
  ['GET /v2/packages', 'getV2Packages', 'read'],
  ['POST /v2/packages', 'postV2Packages', 'write'],
  ['GET /v2/packages/{package-id}', 'getV2PackagesPackage-id', 'read'],
  ['GET /v2/packages/{package-id}/status', 'getV2PackagesPackage-idStatus', 'read'],
  ['POST /v2/package-vetting/list', 'postV2Package-vettingList', 'read'],
  ['POST /v2/package-vetting/update', NamedOperations.updateVettedPackages, 'write'],
  ['GET /v2/parties', 'getV2Parties', 'read'],
  ['POST /v2/parties', 'postV2Parties', 'write'],
  ['POST /v2/parties/external/allocate', 'postV2PartiesExternalAllocate', 'write'],
  ['GET /v2/parties/participant-id', 'getV2PartiesParticipant-id', 'read'],
  ['GET /v2/parties/{party}', 'getV2PartiesParty', 'read'],
  ['PATCH /v2/parties/{party}', 'patchV2PartiesParty', 'write'],
  ['POST /v2/parties/external/generate-topology', 'postV2PartiesExternalGenerate-topology', 'read'],
  ['POST /v2/state/active-contracts', 'postV2StateActive-contracts', 'read'],
  ['GET /v2/state/active-contracts-page', 'getV2StateActive-contracts-page', 'read'],
  ['POST /v2/state/active-contracts-page', 'postV2StateActive-contracts-page', 'read'],
  ['GET /v2/state/connected-synchronizers', 'getV2StateConnected-synchronizers', 'read'],
  ['GET /v2/state/ledger-end', 'getV2StateLedger-end', 'read'],
  ['GET /v2/state/latest-pruned-offsets', 'getV2StateLatest-pruned-offsets', 'read'],
  ['POST /v2/updates', 'postV2Updates', 'read'],
  ['POST /v2/updates/update-by-offset', NamedOperations.getUpdateByOffset, 'read'],
  ['POST /v2/updates/update-by-id', 'postV2UpdatesUpdate-by-id', 'read'],
  ['POST /v2/updates/update-by-hash', 'postV2UpdatesUpdate-by-hash', 'read'],
  ['POST /v2/updates/get-updates-page', 'postV2UpdatesGet-updates-page', 'read'],
  ['GET /v2/users', 'getV2Users', 'read'],
  ['POST /v2/users', 'postV2Users', 'write'],
  ['GET /v2/users/{user-id}', 'getV2UsersUser-id', 'read'],
  ['DELETE /v2/users/{user-id}', 'deleteV2UsersUser-id', 'write'],
  ['PATCH /v2/users/{user-id}', 'patchV2UsersUser-id', 'write'],
  ['GET /v2/authenticated-user', 'getV2Authenticated-user', 'read'],
  ['GET /v2/users/{user-id}/rights', 'getV2UsersUser-idRights', 'read'],
  ['POST /v2/users/{user-id}/rights', 'postV2UsersUser-idRights', 'write'],
  ['PATCH /v2/users/{user-id}/rights', 'patchV2UsersUser-idRights', 'write'],
  ['PATCH /v2/users/{user-id}/identity-provider-id', 'patchV2UsersUser-idIdentity-provider-id', 'write'],
  ['GET /v2/idps', 'getV2Idps', 'read'],
  ['POST /v2/idps', 'postV2Idps', 'write'],
  ['GET /v2/idps/{idp-id}', 'getV2IdpsIdp-id', 'read'],
  ['DELETE /v2/idps/{idp-id}', 'deleteV2IdpsIdp-id', 'write'],
  ['PATCH /v2/idps/{idp-id}', NamedOperations.updateIdentityProviderConfig, 'write'],
  ['POST /v2/interactive-submission/prepare', 'postV2Interactive-submissionPrepare', 'write'],
  ['POST /v2/interactive-submission/execute', 'postV2Interactive-submissionExecute', 'write'],
  ['POST /v2/interactive-submission/executeAndWait', 'postV2Interactive-submissionExecuteandwait', 'write'],
  [
    'POST /v2/interactive-submission/executeAndWaitForTransaction',
    'postV2Interactive-submissionExecuteandwaitfortransaction',
    'write',
  ],
  ['POST /v2/interactive-submission/preferred-packages', 'postV2Interactive-submissionPreferred-packages', 'read'],
  ['GET /livez', 'getLivez', 'read'],
  ['GET /readyz', 'getReadyz', 'read'],
  ['POST /v2/contracts/contract-by-id', 'postV2ContractsContract-by-id', 'read'],
  ['GET /v2/jose/jwks/synchronizer/{synchronizer}/party/{party}', 'getV2JoseJwks', 'read'],
  // Outside the specification, with traffic enforcement: a party's traffic budget, set and read.
  ['POST /v2/traffic/accounts', 'postV2TrafficAccounts', 'write'],
  ['GET /v2/traffic/accounts/{account-id}', 'getV2TrafficAccountsAccount-id', 'read'],
];

/** Canton 3.6's WebSocket channels (its asyncapi.yaml, by hand): 3.5's without `flats` and `trees`. */
const CANTON_3_6_CHANNELS: ReadonlyArray<readonly [path: string, name: string]> = [
  ['/v2/commands/completions', 'onV2CommandsCompletions'],
  ['/v2/commands/command-completions', 'onV2CommandsCommand-completions'],
  ['/v2/state/active-contracts', 'onV2StateActive-contracts'],
  ['/v2/updates', 'onV2Updates'],
];

const NAMED: Record<string, string> = {
  'POST /v2/package-vetting': NamedOperations.updateVettedPackages,
  'POST /v2/package-vetting/update': NamedOperations.updateVettedPackages,
  'POST /v2/commands/submit-and-wait-for-transaction': NamedOperations.submitAndWaitForTransaction,
  'GET /v2/version': NamedOperations.getVersion,
  'POST /v2/updates/update-by-offset': NamedOperations.getUpdateByOffset,
  'PATCH /v2/idps/{idp-id}': NamedOperations.updateIdentityProviderConfig,
};

describe('route catalogue', () => {
  it('vendors the OpenAPI and AsyncAPI specifications of 3.4.12, 3.5.1 and 3.5.10, and not 3.6', () => {
    expect(VENDORED_VERSIONS.sort()).toEqual(['3.4', '3.5', '3.5.1']);
  });

  for (const version of VENDORED_VERSIONS) {
    it(`${version}: names every HTTP route of its openapi.yaml and knows every channel of its asyncapi.yaml`, () => {
      const specs = vendoredSpecs(version);
      expect(specs.http.length).toBeGreaterThan(50);
      for (const route of specs.http) {
        const key = `${route.method} ${route.path}`;
        const operation = matchOperation(route.method, concrete(route.path));
        expect(operation, `${version}: ${key}`).toBeDefined();
        // Canton serves its own /livez and /readyz outside /v2: catalogued as participant-internal.
        expect(operation!.name, `${version}: ${key}`).toBe(NAMED[key] ?? route.operationId);
        expect(operation!.template, `${version}: ${key}`).toBe(route.path);
      }
      expect(specs.channels.length).toBeGreaterThanOrEqual(4);
      for (const channel of specs.channels) {
        expect(matchWebSocketOperation(concrete(channel.path))?.name, `${version}: ${channel.path}`).toBe(
          channel.operationId,
        );
      }
    });
  }

  it('names every route of Canton 3.6 as its published specification does, and knows which write', () => {
    expect(CANTON_3_6_ROUTES).toHaveLength(61 + 2);
    for (const [route, name, effect] of CANTON_3_6_ROUTES) {
      const [method, template] = route.split(' ') as [string, string];
      const operation = matchOperation(method, concrete(template));
      expect(operation?.name, route).toBe(name);
      expect(operation?.template, route).toBe(template);
      expect(operation?.writes, route).toBe(effect === 'write');
    }
  });

  it('knows every WebSocket channel of Canton 3.6', () => {
    for (const [path, name] of CANTON_3_6_CHANNELS) {
      expect(matchWebSocketOperation(path)?.name, path).toBe(name);
    }
  });

  it("3.6's new routes carry Canton's operation names, are reads, and are in no vendored specification", () => {
    const added = {
      'POST /v2/updates/update-by-hash': 'postV2UpdatesUpdate-by-hash',
      'POST /v2/commands/completion-by-hash': 'postV2CommandsCompletion-by-hash',
      'GET /v2/jose/jwks/synchronizer/{synchronizer}/party/{party}': 'getV2JoseJwks',
    };
    const vendored = new Set(
      VENDORED_VERSIONS.flatMap((version) => vendoredSpecs(version).http.map((r) => `${r.method} ${r.path}`)),
    );
    for (const [key, name] of Object.entries(added)) {
      expect(CANTON_3_6_ROUTES, key).toContainEqual([key, name, 'read']);
      expect(vendored.has(key), key).toBe(false);
    }
    expect(matchOperation('GET', '/v2/jose/jwks/synchronizer/global%3A%3A1220/party/Alice%3A%3A1220')?.name).toBe(
      'getV2JoseJwks',
    );
  });

  it('marks the traffic account update a write (audited), its lookup a read', () => {
    expect(matchOperation('POST', '/v2/traffic/accounts')).toMatchObject({
      name: 'postV2TrafficAccounts',
      writes: true,
    });
    expect(matchOperation('GET', '/v2/traffic/accounts/Alice%3A%3A1220')).toMatchObject({ writes: false });
  });

  it("docs/audit.md's table of audited operations names every write, and nothing else", () => {
    const audit = readFileSync(new URL('../docs/audit.md', import.meta.url), 'utf8');
    const table = audit.slice(audit.indexOf('| kind | operations |'), audit.indexOf('\nReads ('));
    const named = new Set([...table.matchAll(/`([^`]+)`/g)].map((match) => match[1]!));
    expect(named).toEqual(WRITE_OPERATION_NAMES);
  });

  it('marks as writes exactly the POST, PATCH and DELETE routes that change the ledger or the participant', () => {
    const writes = HTTP_OPERATIONS.filter((operation) => operation.writes).map((o) => `${o.method} ${o.template}`);
    expect(writes.every((route) => !route.startsWith('GET '))).toBe(true);
    expect(writes).toContain('POST /v2/commands/submit-and-wait');
    expect(writes).toContain('POST /v2/traffic/accounts');
    expect(writes).not.toContain('POST /v2/updates/update-by-hash');
    expect(writes).not.toContain('POST /v2/commands/completion-by-hash');
  });

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
