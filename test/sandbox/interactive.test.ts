// The sandbox's interactive submission: prepare answers a PreparedTransaction in Canton's protobuf
// encoding (decoded here with the same bindings, @canton-network/core-ledger-proto), execute* commit it.
import { PreparedTransaction } from '@canton-network/core-ledger-proto';
import { describe, expect, it } from 'vitest';
import { SANDBOX_SEED } from '../../src/sandbox/app.js';
import { expectCantonError, postJson, readJson, unsignedJwt, withSandbox } from './helpers.js';

const ALICE = SANDBOX_SEED.parties.alice;
const BOB = SANDBOX_SEED.parties.bob;
const IOU = SANDBOX_SEED.templates.iou;
const iouArguments = { issuer: ALICE, owner: BOB, currency: 'USD', amount: '10.0', observers: [] };
const auth = { authorization: `Bearer ${unsignedJwt({ sub: 'alice' })}` };

const prepareBody = (commands: object[]) => ({
  commands,
  commandId: `cmd-${Math.random()}`,
  actAs: [ALICE],
  userId: 'alice',
});
const signedBy = (...parties: string[]) => ({
  signatures: parties.map((party) => ({
    party,
    signatures: [
      {
        format: 'SIGNATURE_FORMAT_RAW',
        signature: 'AA==',
        signedBy: 'k',
        signingAlgorithmSpec: 'SIGNING_ALGORITHM_SPEC_ED25519',
      },
    ],
  })),
});

async function prepare(
  url: string,
  commands: object[],
): Promise<{ preparedTransaction: string; hashingSchemeVersion: string }> {
  const response = await postJson(`${url}/v2/interactive-submission/prepare`, prepareBody(commands), auth);
  expect(response.status).toBe(200);
  return (await readJson(response)) as { preparedTransaction: string; hashingSchemeVersion: string };
}

describe('sandbox interactive submission', () => {
  it('prepares a transaction in the protobuf encoding of interactive_submission_service.proto', async () => {
    await withSandbox(async ({ url, app }) => {
      const before = app.sandbox.state.ledgerEnd;
      const prepared = await prepare(url, [
        { CreateCommand: { templateId: IOU, createArguments: iouArguments } },
        {
          ExerciseCommand: {
            templateId: IOU,
            contractId: SANDBOX_SEED.initialTransaction.contractId,
            choice: 'Transfer',
            choiceArgument: { newOwner: BOB },
          },
        },
      ]);
      expect(prepared.hashingSchemeVersion).toBe('HASHING_SCHEME_VERSION_V2');
      const decoded = PreparedTransaction.fromBinary(Buffer.from(prepared.preparedTransaction, 'base64'));
      expect(decoded.metadata?.submitterInfo?.actAs).toEqual([ALICE]);
      expect(decoded.transaction?.roots).toEqual(['0', '1']);
      const [create, exercise] = decoded.transaction!.nodes.map((node) =>
        node.versionedNode.oneofKind === 'v1' ? node.versionedNode.v1.nodeType : undefined,
      );
      expect(create?.oneofKind).toBe('create');
      expect(create?.oneofKind === 'create' && create.create.packageName).toBe('sandbox-iou');
      expect(exercise?.oneofKind === 'exercise' && exercise.exercise.choiceId).toBe('Transfer');
      expect(app.sandbox.state.ledgerEnd).toBe(before); // nothing committed
    });
  });

  it('executes a prepared transaction with executeAndWait and executeAndWaitForTransaction', async () => {
    await withSandbox(async ({ url, app }) => {
      const first = await prepare(url, [{ CreateCommand: { templateId: IOU, createArguments: iouArguments } }]);
      const execute = (path: string, prepared: { preparedTransaction: string }) =>
        postJson(
          `${url}/v2/interactive-submission/${path}`,
          {
            preparedTransaction: prepared.preparedTransaction,
            partySignatures: signedBy(ALICE),
            submissionId: 'sub-1',
            hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2',
            userId: 'alice',
          },
          auth,
        );
      const waited = await execute('executeAndWait', first);
      expect(waited.status).toBe(200);
      expect(await readJson(waited)).toMatchObject({ completionOffset: 2 });
      const second = await prepare(url, [{ CreateCommand: { templateId: IOU, createArguments: iouArguments } }]);
      const withTransaction = await execute('executeAndWaitForTransaction', second);
      const { transaction } = await readJson(withTransaction);
      expect(transaction.events[0].CreatedEvent).toMatchObject({ templateId: IOU, createArgument: iouArguments });
      const plain = await execute(
        'execute',
        await prepare(url, [{ CreateCommand: { templateId: IOU, createArguments: iouArguments } }]),
      );
      expect(await readJson(plain)).toEqual({});
      expect(app.sandbox.state.ledgerEnd).toBe(4);
    });
  });

  it('refuses a transaction an act-as party did not sign, and one that does not decode', async () => {
    await withSandbox(async ({ url }) => {
      const prepared = await prepare(url, [{ CreateCommand: { templateId: IOU, createArguments: iouArguments } }]);
      const unsigned = await postJson(
        `${url}/v2/interactive-submission/execute`,
        {
          preparedTransaction: prepared.preparedTransaction,
          partySignatures: signedBy(BOB),
          submissionId: 's',
          hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2',
        },
        auth,
      );
      await expectCantonError(unsigned, { status: 400, code: 'INVALID_ARGUMENT', category: 8 });
      const garbage = await postJson(
        `${url}/v2/interactive-submission/execute`,
        {
          preparedTransaction: Buffer.from('not a prepared transaction').toString('base64'),
          partySignatures: signedBy(ALICE),
          submissionId: 's',
          hashingSchemeVersion: 'HASHING_SCHEME_VERSION_V2',
        },
        auth,
      );
      await expectCantonError(garbage, { status: 400, code: 'INVALID_FIELD', category: 8 });
    });
  });
});
