// A break-glass principal (ledgerPolicy.breakGlass): a gateway in front of the sandbox lets its calls
// through whatever the policies say, even one a policy names and a deny rule touches; each use is
// logged at warn (no token), counted with decision breakGlass and written to the audit record. The
// alert on it is checked by promtool (deploy/prometheus/alerts.test.yaml, test/telemetry/deploy-files.test.ts).
import { describe, expect, it } from 'vitest';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { postJson, startSandbox } from '../sandbox/helpers.js';
import { records } from '../audit/support.js';
import { ALICE, decisions, TRANSFER, auditedSandboxGateway } from './support.js';

const current = perTest();
const SUBMIT = '/v2/commands/submit-and-wait';
const body = (commandId: string) => ({ commands: [TRANSFER], commandId, actAs: [ALICE], userId: 'alice' });

const ledgerPolicy = {
  policies: [
    {
      name: 'alice-no-transfer',
      principals: { subjects: ['alice'] },
      rules: [
        { name: 'no-transfer', effect: 'deny', choices: ['Transfer'] },
        { name: 'rest', operations: ['writes'] },
      ],
    },
  ],
  breakGlass: [{ name: 'incident-42', principals: { claims: { 'break-glass': 'incident-42' } } }],
};

describe('a break-glass principal', () => {
  it('is allowed what the policy denies, each use logged at warn without its token, counted and audited', async () => {
    const { sandbox, gw, log, directory } = await auditedSandboxGateway(current, ledgerPolicy);
    const refused = await postJson(`${gw.url}${SUBMIT}`, body('plain'), gw.auth());
    expect(refused.status).toBe(403);

    const token = await gw.issuer.mint({ sub: 'alice', 'break-glass': 'incident-42' });
    const before = sandbox.app.sandbox.state.ledgerEnd;
    const allowed = await postJson(`${gw.url}${SUBMIT}`, body('glass'), { authorization: `Bearer ${token}` });
    expect(allowed.status).toBe(200);
    expect(sandbox.app.sandbox.state.ledgerEnd).toBe(before + 1);

    const note = { decision: 'breakGlass', policy: 'incident-42', rule: 'break-glass', mode: 'enforce' };
    expect(await decisions(gw, { decision: 'breakGlass', policy: 'incident-42', rule: 'break-glass' })).toBe(1);
    expect(await decisions(gw, { decision: 'deny', rule: 'no-transfer' })).toBe(1);
    const reqId = allowed.headers.get('x-request-id');
    expect((await log.requestLine(reqId)).ledgerPolicy).toEqual(note);
    const warnings = log.entries().filter((entry) => entry.msg === 'ledger policy break-glass used');
    expect(warnings).toEqual([
      expect.objectContaining({ level: 'warn', reqId, breakGlass: 'incident-42', subject: 'alice' }),
    ]);
    expect(log.lines.some((line) => line.includes(token))).toBe(false);

    await gw.close();
    const intent = records(directory).find((record) => record.kind === 'intent' && record.requestId === reqId);
    expect(intent?.ledgerPolicy).toEqual(note);
  });

  it('is named by its principal matchers and its window only: the same token past notAfter is judged by the policies', async () => {
    const sandbox = await startSandbox();
    current.upstream = sandbox;
    const gw = await startGateway(sandbox.url, {
      ledgerPolicy: {
        ...ledgerPolicy,
        breakGlass: [{ ...ledgerPolicy.breakGlass[0], notAfter: '2020-01-01T00:00:00Z' }],
      },
    });
    current.gw = gw;
    const token = await gw.issuer.mint({ sub: 'alice', 'break-glass': 'incident-42' });
    const answer = await postJson(`${gw.url}${SUBMIT}`, body('late'), { authorization: `Bearer ${token}` });
    expect(answer.status).toBe(403);
    expect(await decisions(gw, { decision: 'breakGlass' })).toBe(0);
  });
});
