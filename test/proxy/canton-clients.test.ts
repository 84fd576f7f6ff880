// Canton's own TypeScript clients, as dApp teams use them, through the gateway against the sandbox:
// @canton-network/core-ledger-client (OpenAPI, fetch) and @canton-network/core-asyncapi-client
// (the WebSocket streams, which offer `jwt.token.<JWT>` and `daml.ws.auth` as subprotocols).
import { WebSocketClient } from '@canton-network/core-asyncapi-client';
import { isJsCantonError, LedgerClient } from '@canton-network/core-ledger-client';
import type { AccessTokenProvider } from '@canton-network/core-wallet-auth';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { SANDBOX_SEED } from '../../src/sandbox/app.js';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { startSandbox, type RunningSandbox } from '../sandbox/helpers.js';

const ALICE = SANDBOX_SEED.parties.alice;
const BOB = SANDBOX_SEED.parties.bob;
const IOU = SANDBOX_SEED.templates.iou;
const SUBMIT = '/v2/commands/submit-and-wait-for-transaction';

let sandbox: RunningSandbox | undefined;
let running: RunningGateway | undefined;
afterEach(async () => {
  await running?.close();
  await sandbox?.close();
  running = undefined;
  sandbox = undefined;
});

async function clients(): Promise<{ ledger: LedgerClient; streams: WebSocketClient; gateway: RunningGateway }> {
  sandbox = await startSandbox();
  running = await startGateway(sandbox.url);
  const token = await running.issuer.mint({ sub: 'alice' });
  const accessTokenProvider: AccessTokenProvider = {
    getAccessToken: () => Promise.resolve(token),
    getAuthContext: () => Promise.resolve({ userId: 'alice', accessToken: token }),
  };
  const logger = pino({ level: 'silent' });
  const ledger = new LedgerClient({ baseUrl: new URL(running.url), logger, accessTokenProvider });
  const streams = new WebSocketClient({ baseUrl: running.url, accessTokenProvider });
  return { ledger, streams, gateway: running };
}

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

describe("Canton's TypeScript clients through the gateway", () => {
  it('init, ledger end, parties and synchronizers, and a submission, with the ledger client', async () => {
    const { ledger } = await clients();
    await ledger.init();
    expect(ledger.getCurrentClientVersion()).toBe('3.5');
    const end = await ledger.get('/v2/state/ledger-end');
    expect(end.offset).toBe(1);
    const parties = await ledger.get('/v2/parties');
    expect(parties.partyDetails?.map((details) => details.party)).toContain(ALICE);
    expect(await ledger.getSynchronizerId()).toBe(SANDBOX_SEED.synchronizers.global.synchronizerId);

    const submitted = await ledger.post(SUBMIT, createIou('client-create-1'));
    expect(submitted.transaction).toMatchObject({ commandId: 'client-create-1', offset: 2 });
    expect((await ledger.get('/v2/state/ledger-end')).offset).toBe(2);
  });

  it('sends a 6 MiB submission with disclosed contracts through the gateway, as the client wrote it (limits.bodyBytes)', async () => {
    const { ledger } = await clients();
    await ledger.init();
    // 2,000 disclosed contracts of a 3 KB created-event blob each (issue 42: what a large submission carries).
    const blob = Buffer.alloc(2_300, 'canton').toString('base64');
    const disclosedContracts = Array.from({ length: 2_000 }, (_, index) => ({
      templateId: IOU,
      contractId: `00${index.toString(16).padStart(4, '0')}`,
      createdEventBlob: blob,
      synchronizerId: SANDBOX_SEED.synchronizers.global.synchronizerId,
    }));
    const body = { ...createIou('client-large-1').commands, disclosedContracts };
    const sent = JSON.stringify(body);
    expect(sent.length).toBeGreaterThan(6 * 1024 * 1024);
    const answer = await ledger.post('/v2/commands/submit-and-wait', body);
    expect(answer.completionOffset).toBe(2);
    const received = sandbox!.app.sandbox.receivedRequests.filter(
      (request) => request.url === '/v2/commands/submit-and-wait',
    );
    expect(received).toHaveLength(1);
    expect(received[0]!.body.length).toBe(sent.length);
    expect(received[0]!.body === sent).toBe(true);
  }, 60_000);

  it("surfaces the gateway's own refusal as a JsCantonError, and the participant never sees the call", async () => {
    const { ledger } = await clients();
    await ledger.init();
    const before = sandbox!.app.sandbox.receivedRequests.filter((request) => request.url === SUBMIT).length;
    // The token is alice's; a submission in another user's name is Canton's redacted PERMISSION_DENIED
    // (code NA, gRPC 7), answered by the gateway itself.
    const refusal: unknown = await ledger.post(SUBMIT, createIou('client-as-mallory', 'mallory') as never).then(
      () => 'answered',
      (error: unknown) => error,
    );
    expect(isJsCantonError(refusal), JSON.stringify(refusal)).toBe(true);
    expect(refusal).toMatchObject({ code: 'NA', grpcCodeValue: 7 });
    expect(sandbox!.app.sandbox.receivedRequests.filter((request) => request.url === SUBMIT).length).toBe(before);
  });

  it('streams updates over the WebSocket tunnel with the asyncapi client, live ones included', async () => {
    const { ledger, streams } = await clients();
    const updates = streams.streamUpdates({ beginExclusive: 0, partyId: ALICE, templateIds: [IOU] });
    // The seeded transaction (offset 1), then the one submitted while the stream is open.
    const first = await updates.next();
    expect(first.done).toBe(false);
    expect(JSON.stringify(first.value)).toContain('"offset":1');
    await ledger.post(SUBMIT, createIou('client-live-1'));
    const second = await updates.next();
    expect(second.done).toBe(false);
    expect(JSON.stringify(second.value)).toContain('client-live-1');
    await updates.return?.(undefined);
    // The subprotocol offer went through the gateway to the participant as the client made it.
    expect(sandbox!.app.sandbox.lastUpgradeHeaders?.['sec-websocket-protocol']).toMatch(
      /^jwt\.token\.[^,]+,daml\.ws\.auth$/,
    );
  });
});
