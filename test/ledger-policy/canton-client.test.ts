// Canton's TypeScript ledger client (@canton-network/core-ledger-client), as a dApp uses it, through a
// gateway whose ledger policy lets alice create IOUs and never transfer one: the allowed submission
// reaches the sandbox as the client wrote it and commits; the refused one comes back to the client as
// a JsCantonError naming the policy and rule, and the sandbox never sees it.
import { isJsCantonError, LedgerClient } from '@canton-network/core-ledger-client';
import type { AccessTokenProvider } from '@canton-network/core-wallet-auth';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startSandbox } from '../sandbox/helpers.js';
import { ALICE, BOB, IOU_BY_ID, IOU_BY_NAME, TRANSFER } from './support.js';

const current = perTest();
const SUBMIT = '/v2/commands/submit-and-wait-for-transaction';

const ledgerPolicy = {
  policies: [
    {
      name: 'alice-ious',
      principals: { subjects: ['alice'] },
      rules: [
        { name: 'no-transfer', effect: 'deny', choices: ['Transfer'] },
        { name: 'create-ious', templates: [IOU_BY_NAME], commandKinds: ['CreateCommand'], actAs: [ALICE] },
        // The client's init() asks the version: a policy names every operation its caller needs.
        { name: 'version', operations: ['getVersion'] },
      ],
    },
  ],
};

const submission = (commandId: string, command: object) => ({
  commands: { commands: [command], commandId, actAs: [ALICE], userId: 'alice' },
});
const CREATE = {
  CreateCommand: {
    templateId: IOU_BY_ID,
    createArguments: { issuer: ALICE, owner: BOB, currency: 'USD', amount: '10.0', observers: [] },
  },
};

describe("Canton's ledger client through a ledger policy", () => {
  it('commits an allowed submission and gets the refusal of a denied one as a JsCantonError', async () => {
    const sandbox = await startSandbox();
    current.upstream = sandbox;
    const gw = (current.gw = await startGateway(sandbox.url, { ledgerPolicy }));
    const token = await gw.issuer.mint({ sub: 'alice' });
    const accessTokenProvider: AccessTokenProvider = {
      getAccessToken: () => Promise.resolve(token),
      getAuthContext: () => Promise.resolve({ userId: 'alice', accessToken: token }),
    };
    const ledger = new LedgerClient({
      baseUrl: new URL(gw.url),
      logger: pino({ level: 'silent' }),
      accessTokenProvider,
    });
    await ledger.init();
    const submitted = () => sandbox.app.sandbox.receivedRequests.filter((request) => request.url === SUBMIT);

    const created = await ledger.post(SUBMIT, submission('client-create', CREATE) as never);
    expect(created.transaction).toMatchObject({ commandId: 'client-create', offset: 2 });
    expect(submitted().map((request) => JSON.parse(request.body))).toEqual([submission('client-create', CREATE)]);

    const refusal: unknown = await ledger.post(SUBMIT, submission('client-transfer', TRANSFER) as never).then(
      () => 'answered',
      (error: unknown) => error,
    );
    expect(isJsCantonError(refusal), JSON.stringify(refusal)).toBe(true);
    expect(refusal).toMatchObject({
      code: 'GATEWAY_LEDGER_POLICY_DENIED',
      grpcCodeValue: 7,
      context: { policy: 'alice-ious', rule: 'no-transfer' },
    });
    expect(submitted()).toHaveLength(1);
    expect(sandbox.app.sandbox.state.ledgerEnd).toBe(2);
  });
});
