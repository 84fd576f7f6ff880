// A small rule-checked body is parsed once: the request rules' tree is kept for the ledger policy's
// stage instead of its bytes being parsed again (docs/performance.md, "Ledger policy"). Counted by
// the parses of the body's very text, through a gateway in front of a recording upstream.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { answerJson, startRecordingUpstream } from '../helpers/recording-upstream.js';
import { ALICE, BOB, IOU_BY_ID } from './support.js';

const current = perTest();
afterEach(() => vi.restoreAllMocks());

const PATH = '/v2/commands/submit-and-wait-for-transaction';
const body = (owner: string, id: string) =>
  JSON.stringify({
    commands: {
      commands: [
        { CreateCommand: { templateId: IOU_BY_ID, createArguments: { issuer: ALICE, owner, amount: '10.0' } } },
      ],
      commandId: id,
      actAs: [ALICE],
    },
  });

/** alice (the test token's subject) may create IOUs, never one owned by BOB (a CEL condition on the arguments). */
const policy = {
  name: 'alice-ious',
  principals: { subjects: ['alice'] },
  rules: [
    {
      name: 'not-to-bob',
      effect: 'deny',
      templates: [IOU_BY_ID],
      where: `commands.exists(c, c.createArguments.owner == "${BOB}")`,
    },
    { name: 'create-ious', templates: [IOU_BY_ID], actAs: [ALICE] },
  ],
};

describe('a small body under a ledger policy', () => {
  it('is parsed once, by the request rules, and the policy decides on that tree: allowed as sent, refused on its arguments', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    upstream.respond(answerJson(200, {}));
    const gw = (current.gw = await startGateway(upstream.url, { ledgerPolicy: { policies: [policy] } }));
    const parse = vi.spyOn(JSON, 'parse');
    const parsesOf = (text: string) => parse.mock.calls.filter(([argument]) => argument === text).length;
    const send = (text: string) =>
      fetch(`${gw.url}${PATH}`, {
        method: 'POST',
        body: text,
        headers: gw.auth({ 'content-type': 'application/json' }),
      });

    const allowed = body(ALICE, 'parsed-once-1');
    expect((await send(allowed)).status).toBe(200);
    expect(parsesOf(allowed)).toBe(1);
    expect(upstream.requests.map((request) => request.body.toString('utf8'))).toEqual([allowed]);

    const denied = body(BOB, 'parsed-once-2');
    const refused = await send(denied);
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ context: { policy: 'alice-ious', rule: 'not-to-bob' } });
    expect(parsesOf(denied)).toBe(1);
    expect(upstream.requests).toHaveLength(1);
  });
});
