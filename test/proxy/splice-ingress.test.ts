// The gateway as a Splice-style ingress (server.pathPrefix: /api/json-api, as Splice's Istio
// VirtualService and cn-quickstart's nginx expose the JSON API), end to end against the sandbox:
// Canton's own TypeScript clients configured with the prefixed base URL (calls and WebSocket
// streams), refusals in Canton's shapes, metrics per operation, the access log and the audit trail
// with the canonical path. Once in front of a participant without a prefix (Splice: the ingress
// rewrites to /), once in front of one that serves under a prefix of its own
// (CANTON_PARTICIPANT_JSON_API_SERVER_PATH_PREFIX), reached through upstream.url's path.
import { WebSocketClient } from '@canton-network/core-asyncapi-client';
import { isJsCantonError, LedgerClient } from '@canton-network/core-ledger-client';
import type { AccessTokenProvider } from '@canton-network/core-wallet-auth';
import pino from 'pino';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { SANDBOX_SEED } from '../../src/sandbox/app.js';
import { records, keyFiles, trailDirectory } from '../audit/support.js';
import { startGateway } from '../helpers/gateway.js';
import { logCapture } from '../helpers/log-capture.js';
import { perTest } from '../helpers/per-test.js';
import { startSandbox } from '../sandbox/helpers.js';

const PREFIX = '/api/json-api';
const ALICE = SANDBOX_SEED.parties.alice;
const BOB = SANDBOX_SEED.parties.bob;
const IOU = SANDBOX_SEED.templates.iou;
const SUBMIT = '/v2/commands/submit-and-wait-for-transaction';
const keys = keyFiles();

const createIou = (commandId: string, userId = 'alice') => ({
  commands: {
    commands: [
      {
        CreateCommand: {
          templateId: IOU,
          createArguments: { issuer: ALICE, owner: BOB, currency: 'USD', amount: '10.0', observers: [] },
        },
      },
    ],
    commandId,
    actAs: [ALICE],
    userId,
  },
});

/** The value of one series of the Prometheus text the admin listener serves, as an operator scrapes it. */
function series(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([key, value]) => line.includes(`${key}="${value}"`)))
      return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

describe('a Splice-style ingress: server.pathPrefix /api/json-api in front of the sandbox', () => {
  const current = perTest();

  for (const participantPrefix of ['', '/participant/json']) {
    const participant = participantPrefix === '' ? 'a participant at its root' : 'a participant under its own prefix';

    it(`${participant}: clients, streams, refusals, metrics, access log and audit trail`, async () => {
      const sandbox = await startSandbox(participantPrefix === '' ? {} : { pathPrefix: participantPrefix });
      current.upstream = sandbox;
      const directory = trailDirectory();
      const log = logCapture();
      const gw = await startGateway(
        `${sandbox.url}${participantPrefix}`,
        {
          server: { pathPrefix: PREFIX },
          log: { level: 'info', access: { enabled: true, successSampleRatio: 1 } },
          audit: { enabled: true, directory, signingKeyFile: keys.privateKeyFile },
        },
        { logger: log.logger },
      );
      current.gw = gw;
      const token = await gw.issuer.mint({ sub: 'alice' });
      const accessTokenProvider: AccessTokenProvider = {
        getAccessToken: () => Promise.resolve(token),
        getAuthContext: () => Promise.resolve({ userId: 'alice', accessToken: token }),
      };
      const baseUrl = `${gw.url}${PREFIX}`;
      const ledger = new LedgerClient({
        baseUrl: new URL(baseUrl),
        logger: pino({ level: 'silent' }),
        accessTokenProvider,
      });
      const streams = new WebSocketClient({ baseUrl, accessTokenProvider });

      // Calls, with Canton's ledger client configured with the prefixed base URL.
      await ledger.init();
      expect(ledger.getCurrentClientVersion()).toBe('3.5');
      expect((await ledger.get('/v2/state/ledger-end')).offset).toBe(1);
      const submitted = await ledger.post(SUBMIT, createIou('ingress-create-1'));
      expect(submitted.transaction).toMatchObject({ commandId: 'ingress-create-1', offset: 2 });

      // A WebSocket stream, with Canton's asyncapi client: the seeded update, then the submitted one.
      const updates = streams.streamUpdates({ beginExclusive: 0, partyId: ALICE, templateIds: [IOU] });
      expect(JSON.stringify((await updates.next()).value)).toContain('"offset":1');
      expect(JSON.stringify((await updates.next()).value)).toContain('ingress-create-1');
      await updates.return?.(undefined);

      // Refusals: the gateway's own in Canton's shape, never sent on; a path outside the prefix as
      // the participant answers a path it does not serve.
      const received = () => sandbox.app.sandbox.receivedRequests.length;
      const before = received();
      const refusal: unknown = await ledger.post(SUBMIT, createIou('as-mallory', 'mallory') as never).then(
        () => 'answered',
        (error: unknown) => error,
      );
      expect(isJsCantonError(refusal), JSON.stringify(refusal)).toBe(true);
      expect(refusal).toMatchObject({ code: 'NA', grpcCodeValue: 7 });
      const unauthenticated = await request(`${baseUrl}/v2/state/ledger-end`);
      expect(unauthenticated.statusCode).toBe(401);
      expect(await unauthenticated.body.json()).toMatchObject({ code: 'NA', grpcCodeValue: 16, errorCategory: -1 });
      const outside = await request(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() });
      expect(outside.statusCode).toBe(404);
      expect(await outside.body.json()).toEqual({
        errors: [`GET, uri: http://${new URL(gw.url).host}/v2/state/ledger-end`],
        status: 404,
      });
      expect(received()).toBe(before);

      // The participant got every call under its own prefix, the client's gone.
      const paths = sandbox.app.sandbox.receivedRequests.map((r) => r.url);
      expect(paths).toContain(`${participantPrefix}${SUBMIT}`);
      expect(paths.every((path) => path.startsWith(`${participantPrefix}/v2/`))).toBe(true);
      expect(sandbox.app.sandbox.upgrades.at(-1)?.url).toBe(`${participantPrefix}/v2/updates`);

      // A write outside Canton's spec, POST /v2/traffic/accounts, is audited too (the sandbox serves no
      // traffic: its 404 is the outcome).
      const traffic = await request(`${baseUrl}/v2/traffic/accounts`, {
        method: 'POST',
        headers: gw.auth({ 'content-type': 'application/json' }),
        body: JSON.stringify({ party: ALICE, synchronizerId: 'global' }),
      });
      expect(traffic.statusCode).toBe(404);
      await traffic.body.text();

      // Metrics per operation, as Prometheus scrapes them from the admin listener (not under the prefix).
      const scraped = await (await request(`${gw.adminUrl}/metrics`)).body.text();
      const requests = 'ledger_gateway_requests_total';
      expect(series(scraped, requests, { operation: 'getVersion', status: '200' })).toBe(1);
      expect(series(scraped, requests, { operation: 'getV2StateLedger-end', status: '200' })).toBe(1);
      expect(series(scraped, requests, { operation: 'submitAndWaitForTransaction', status: '200' })).toBe(1);
      expect(series(scraped, requests, { operation: 'submitAndWaitForTransaction', status: '403' })).toBe(1);
      expect(series(scraped, requests, { operation: 'onV2Updates', status: '101' })).toBe(1);
      expect(series(scraped, requests, { operation: 'postV2TrafficAccounts', status: '404' })).toBe(1);
      expect(series(scraped, requests, { error_code: 'GATEWAY_OUTSIDE_PATH_PREFIX' })).toBe(1);
      expect(scraped).not.toContain(PREFIX);

      // The access log and the audit trail name the canonical path.
      const lines = () => log.entries().filter((entry) => entry.msg === 'request' && typeof entry.path === 'string');
      // A stream's access line is written when the stream ends.
      await expect
        .poll(() => lines().map((entry) => entry.path), { timeout: 2_000 })
        .toEqual(expect.arrayContaining([SUBMIT, '/v2/updates']));
      expect(lines().filter((entry) => String(entry.path).startsWith(PREFIX))).toEqual([]);
      await gw.close();
      const trail = records(directory);
      const intents = trail.filter((record) => record.kind === 'intent');
      // The refused submission is in the trail too: refused by its request rules, after the audit stage.
      expect(intents.map((record) => [record.operation, record.path])).toEqual([
        ['submitAndWaitForTransaction', SUBMIT],
        ['submitAndWaitForTransaction', SUBMIT],
        ['postV2TrafficAccounts', '/v2/traffic/accounts'],
      ]);
      const outcomes = trail.filter((record) => record.kind === 'outcome');
      expect(outcomes.map((record) => [record.status, record.forwarded])).toEqual([
        [200, true],
        [403, false],
        [404, true],
      ]);
    });
  }
});
