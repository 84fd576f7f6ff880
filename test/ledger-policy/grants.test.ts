// "No principal may grant what it may not do": a gateway in front of a recording participant, a
// wallet user whose policy lets it act and read only as its own party (its token's `party` claim) and
// manage users. Granting CanActAs or CanReadAs of its party reaches the participant; granting them of
// another party, or creating a user with such a right, or ParticipantAdmin, is refused before the
// participant sees the call.
import { describe, expect, it } from 'vitest';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { answerJson, startRecordingUpstream } from '../helpers/recording-upstream.js';
import { postJson } from '../sandbox/helpers.js';
import { ALICE, BOB } from './support.js';

const current = perTest();

const ledgerPolicy = {
  policies: [
    {
      name: 'wallet',
      principals: { claims: { scope: 'wallet' } },
      rules: [
        { name: 'own-party', operations: ['writes'], actAs: ['$claims.party'], readAs: ['$claims.party'] },
        { name: 'own-reads', operations: ['reads'], readAs: ['$claims.party'] },
        { name: 'users', operations: ['postV2Users', 'postV2UsersUser-idRights'] },
      ],
    },
  ],
};

const right = (kind: string, party?: string) => ({ kind: { [kind]: { value: party === undefined ? {} : { party } } } });

describe('granting rights through a ledger policy', () => {
  it('passes a right the caller may use itself and refuses one it may not, before the participant sees it', async () => {
    const upstream = (current.upstream = await startRecordingUpstream(answerJson(200, { newlyGrantedRights: [] })));
    const gw = (current.gw = await startGateway(upstream.url, { ledgerPolicy }));
    const token = await gw.issuer.mint({ sub: 'alice-wallet', scope: 'wallet', party: ALICE });
    const auth = { authorization: `Bearer ${token}` };
    const grant = (rights: object[]) =>
      postJson(`${gw.url}/v2/users/bob-device/rights`, { userId: 'bob-device', rights }, auth);

    const own = await grant([right('CanActAs', ALICE), right('CanReadAs', ALICE)]);
    expect(own.status).toBe(200);
    expect(upstream.requests.map((request) => request.url)).toEqual(['/v2/users/bob-device/rights']);

    for (const rights of [
      [right('CanActAs', BOB)],
      [right('CanReadAs', ALICE), right('CanReadAs', BOB)],
      [right('ParticipantAdmin')],
      [right('CanReadAsAnyParty')],
    ]) {
      const refused = await grant(rights);
      expect(refused.status, JSON.stringify(rights)).toBe(403);
      const body = (await refused.json()) as { code: string; context: Record<string, unknown> };
      expect(body).toMatchObject({ code: 'GATEWAY_LEDGER_POLICY_DENIED' });
      expect(body.context).toMatchObject({ policy: 'wallet', rule: 'grant-exceeds-caller' });
    }
    const created = await postJson(
      `${gw.url}/v2/users`,
      { user: { id: 'carol', primaryParty: ALICE, isDeactivated: false }, rights: [right('CanActAs', BOB)] },
      auth,
    );
    expect(created.status).toBe(403);
    expect(upstream.requests).toHaveLength(1);
  });
});
