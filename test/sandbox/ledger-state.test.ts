import { describe, expect, it } from 'vitest';
import { SANDBOX_SEED } from '../../src/sandbox/app.js';
import { expectCantonError, postJson, readJson, unsignedJwt, withSandbox } from './helpers.js';

describe('sandbox participant state', () => {
  it('reports the ledger end, which moves with each transaction', async () => {
    await withSandbox(async ({ url }) => {
      expect(await readJson(await fetch(`${url}/v2/state/ledger-end`))).toEqual({ offset: 1 });
      const submit = await postJson(`${url}/v2/commands/submit-and-wait`, {
        commands: [{ CreateCommand: { templateId: SANDBOX_SEED.templates.iou, createArguments: {} } }],
        commandId: 'c1',
        actAs: [SANDBOX_SEED.parties.alice],
        userId: 'alice',
      });
      expect(submit.status).toBe(200);
      expect(await readJson(await fetch(`${url}/v2/state/ledger-end`))).toEqual({ offset: 2 });
    });
    await withSandbox(
      async ({ url }) => {
        expect(await readJson(await fetch(`${url}/v2/state/ledger-end`))).toEqual({ offset: 0 });
      },
      { seed: 'empty' },
    );
  });

  it('lists both seeded synchronizers, the parties and the packages', async () => {
    await withSandbox(async ({ url }) => {
      const synchronizers = await readJson(await fetch(`${url}/v2/state/connected-synchronizers`));
      expect(synchronizers.connectedSynchronizers.map((s: { synchronizerId: string }) => s.synchronizerId)).toEqual([
        SANDBOX_SEED.synchronizers.global.synchronizerId,
        SANDBOX_SEED.synchronizers.private.synchronizerId,
      ]);
      const parties = await readJson(await fetch(`${url}/v2/parties`));
      expect(parties.partyDetails.map((p: { party: string }) => p.party)).toEqual(Object.values(SANDBOX_SEED.parties));
      expect(parties.partyDetails[0]).toMatchObject({ isLocal: true, identityProviderId: '' });
      const packages = await readJson(await fetch(`${url}/v2/packages`));
      expect(packages.packageIds).toEqual(Object.values(SANDBOX_SEED.packages).map((p) => p.packageId));
    });
  });

  it('answers the authenticated user from the token sub, and 401 NA without a token', async () => {
    await withSandbox(async ({ url }) => {
      const alice = await fetch(`${url}/v2/authenticated-user`, {
        headers: { authorization: `Bearer ${unsignedJwt({ sub: 'alice' })}` },
      });
      expect(alice.status).toBe(200);
      expect((await readJson(alice)).user).toMatchObject({
        id: 'alice',
        primaryParty: SANDBOX_SEED.parties.alice,
        isDeactivated: false,
      });
      const stranger = await fetch(`${url}/v2/authenticated-user`, {
        headers: { authorization: `Bearer ${unsignedJwt({ sub: 'carol' })}` },
      });
      expect((await readJson(stranger)).user).toMatchObject({ id: 'carol', primaryParty: '' });

      const anonymous = await fetch(`${url}/v2/authenticated-user`);
      expect(anonymous.status).toBe(401);
      expect(await readJson(anonymous)).toEqual({
        code: 'NA',
        cause: 'A security-sensitive error has been received',
        correlationId: null,
        traceId: expect.stringMatching(/^[0-9a-f]{32}$/),
        context: {},
        resources: [],
        errorCategory: -1,
        grpcCodeValue: 16,
        retryInfo: null,
        definiteAnswer: null,
      });
    });
  });

  it('keeps every sandbox independent', async () => {
    await withSandbox(async (first) => {
      await withSandbox(async (second) => {
        await postJson(`${first.url}/v2/commands/submit-and-wait`, {
          commands: [{ CreateCommand: { templateId: SANDBOX_SEED.templates.iou, createArguments: {} } }],
          commandId: 'c1',
          actAs: [SANDBOX_SEED.parties.alice],
          userId: 'alice',
        });
        expect((await readJson(await fetch(`${first.url}/v2/state/ledger-end`))).offset).toBe(2);
        expect((await readJson(await fetch(`${second.url}/v2/state/ledger-end`))).offset).toBe(1);
        await expectCantonError(await postJson(`${second.url}/v2/updates/update-by-offset`, { offset: 0 }), {
          status: 400,
          code: 'NON_POSITIVE_OFFSET',
          category: 8,
        });
      });
    });
  });
});
