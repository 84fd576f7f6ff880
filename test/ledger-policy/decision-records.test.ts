// Where a ledger policy's decision is written: the call's access line and its audit records (allowed
// and refused writes alike), and a dry-run policy's refusals, which are counted and logged while the
// call goes on to the participant.
import { describe, expect, it } from 'vitest';
import { startGateway } from '../helpers/gateway.js';
import { logCapture } from '../helpers/log-capture.js';
import { perTest } from '../helpers/per-test.js';
import { postJson, startSandbox } from '../sandbox/helpers.js';
import { records } from '../audit/support.js';
import { ALICE, BOB, decisions, IOU_BY_ID, IOU_BY_NAME, TRANSFER, auditedSandboxGateway } from './support.js';

const current = perTest();

const iou = { issuer: ALICE, owner: BOB, currency: 'USD', amount: '10.0', observers: [] };
const CREATE = { CreateCommand: { templateId: IOU_BY_ID, createArguments: iou } };
const SUBMIT = '/v2/commands/submit-and-wait';
const body = (commands: object[], commandId: string) => ({ commands, commandId, actAs: [ALICE], userId: 'alice' });

const policies = (dryRun: boolean) => [
  {
    name: 'alice-ious',
    principals: { subjects: ['alice'] },
    dryRun,
    rules: [
      { name: 'no-transfer', effect: 'deny', choices: ['Transfer'] },
      { name: 'create-ious', templates: [IOU_BY_NAME], commandKinds: ['CreateCommand'] },
    ],
  },
];

describe("a ledger policy's decision", () => {
  it('is in the access line and the audit records of an allowed write and of a refused one', async () => {
    const { gw, log, directory } = await auditedSandboxGateway(current, { policies: policies(false) });
    const allowed = await postJson(`${gw.url}${SUBMIT}`, body([CREATE], 'create-1'), gw.auth());
    expect(allowed.status).toBe(200);
    const refused = await postJson(`${gw.url}${SUBMIT}`, body([TRANSFER], 'transfer-1'), gw.auth());
    expect(refused.status).toBe(403);

    const allow = { decision: 'allow', policy: 'alice-ious', rule: 'create-ious', mode: 'enforce' };
    const deny = { decision: 'deny', policy: 'alice-ious', rule: 'no-transfer', mode: 'enforce' };
    expect((await log.requestLine(allowed.headers.get('x-request-id'))).ledgerPolicy).toEqual(allow);
    expect((await log.requestLine(refused.headers.get('x-request-id'))).ledgerPolicy).toEqual(deny);

    await gw.close();
    const intents = records(directory).filter((record) => record.kind === 'intent');
    const intentOf = (answer: Response) =>
      intents.find((record) => record.requestId === answer.headers.get('x-request-id'));
    expect(intentOf(allowed)?.ledgerPolicy).toEqual(allow);
    // A write refused after the audit stage has both records, the intent written with the outcome.
    expect(intentOf(refused)?.ledgerPolicy).toEqual(deny);
  });

  it('of a dry-run policy refuses nothing: the call reaches the participant, its would-be refusal counted and logged', async () => {
    const sandbox = await startSandbox();
    current.upstream = sandbox;
    const log = logCapture();
    const gw = await startGateway(sandbox.url, { ledgerPolicy: { policies: policies(true) } }, { logger: log.logger });
    current.gw = gw;
    const before = sandbox.app.sandbox.state.ledgerEnd;
    const answer = await postJson(`${gw.url}${SUBMIT}`, body([TRANSFER], 'transfer-dry'), gw.auth());
    expect(answer.status).toBe(200);
    expect(sandbox.app.sandbox.state.ledgerEnd).toBe(before + 1);
    expect(sandbox.app.sandbox.receivedRequests.filter((r) => r.url === SUBMIT)).toHaveLength(1);

    expect(await decisions(gw, { rule: 'no-transfer', decision: 'deny', mode: 'dryRun' })).toBe(1);
    expect(await decisions(gw, { mode: 'enforce' })).toBe(0);
    const line = await log.requestLine(answer.headers.get('x-request-id'));
    expect(line).toMatchObject({ status: 200, ledgerPolicy: { decision: 'deny', mode: 'dryRun' } });
    expect(line.reason).toMatch(/^would deny: ledger policy alice-ious rule no-transfer/);
    expect(log.entries().filter((entry) => entry.msg === 'ledger policy would deny (dry run)')).toEqual([
      expect.objectContaining({ level: 'warn', policy: 'alice-ious', rule: 'no-transfer' }),
    ]);
  });
});
