// `ledger-gateway policy test` (one call's decision, the rule and why) and `policy replay` (a real
// audit trail, written by a gateway in front of the sandbox, decided again under a stricter policy).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runPolicyCommand } from '../../src/cli/policy.js';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { ROOT } from '../helpers/process.js';
import { startSandbox } from '../sandbox/helpers.js';
import { ALICE, BOB, IOU_BY_ID, IOU_BY_NAME } from './support.js';
import { SANDBOX_SEED } from '../../src/sandbox/app.js';

const current = perTest();

function files(entries: Record<string, unknown>): Record<string, string> {
  const directory = mkdtempSync(join(tmpdir(), 'policy-cli-'));
  return Object.fromEntries(
    Object.entries(entries).map(([name, content]) => {
      const path = join(directory, name);
      writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
      return [name, path];
    }),
  );
}

const CONFIG = `ledgerPolicy:
  policies:
    - name: ci
      principals: { subjects: [ci-job] }
      rules:
        - { name: bump-only, operations: [submitAndWaitForTransaction], templates: ["#sandbox-iou:Iou:Iou"], choices: [Bump] }
`;
const submit = (choice: string) => ({
  method: 'POST',
  path: '/v2/commands/submit-and-wait-for-transaction',
  body: {
    commands: {
      commands: [{ ExerciseCommand: { templateId: IOU_BY_NAME, contractId: '00c', choice, choiceArgument: {} } }],
      commandId: 'c',
      actAs: [ALICE],
    },
  },
});

/** `policy test`'s arguments for a config, a request and the caller's claims (files by name in `f`). */
const testArgs = (f: Record<string, string | undefined>, request: string, claims: string) => [
  'test',
  '--config',
  f['config.yaml']!,
  '--request',
  f[request]!,
  '--claims',
  f[claims]!,
];

describe('ledger-gateway policy test', () => {
  it('prints the decision, the policy, the rule and why; exit 0 allowed, 1 refused, 2 a bad command line', async () => {
    const f = files({
      'config.yaml': CONFIG,
      'bump.json': submit('Bump'),
      'transfer.json': submit('Transfer'),
      'claims.json': { sub: 'ci-job', iss: 'https://idp' },
      'other.json': { sub: 'alice' },
    });
    const allowed = await runPolicyCommand(testArgs(f, 'bump.json', 'claims.json'));
    expect(allowed).toEqual({
      code: 0,
      output: expect.stringMatching(/decision:\s+allow\npolicy:\s+ci\nrule:\s+bump-only\nwhy:\s+bump-only cover/),
    });
    const refused = await runPolicyCommand(testArgs(f, 'transfer.json', 'claims.json'));
    expect(refused.code).toBe(1);
    expect(refused.output).toMatch(
      /decision:\s+deny\npolicy:\s+ci\nrule:\s+default\nwhy:\s+no allow rule covers commands\[0\] \(ExerciseCommand #sandbox-iou:Iou:Iou Transfer\)/,
    );
    const ungoverned = await runPolicyCommand(testArgs(f, 'transfer.json', 'other.json'));
    expect(ungoverned).toMatchObject({ code: 0, output: expect.stringContaining('decision:  none') });
    expect((await runPolicyCommand(['test', '--config', f['config.yaml']!])).code).toBe(2);
    expect((await runPolicyCommand(['test', '--nope'])).code).toBe(2);
  });

  // A process of its own: slow to start on a loaded machine.
  it('runs from the built command line', { timeout: 60_000 }, () => {
    const f = files({ 'config.yaml': CONFIG, 'transfer.json': submit('Transfer'), 'claims.json': { sub: 'ci-job' } });
    let status = 0;
    let output = '';
    try {
      execFileSync(
        join(ROOT, 'node_modules/.bin/node'),
        ['dist/main.js', 'policy', ...testArgs(f, 'transfer.json', 'claims.json')],
        { cwd: ROOT, encoding: 'utf8', timeout: 50_000 },
      );
    } catch (error) {
      ({ status, stdout: output } = error as { status: number; stdout: string });
    }
    expect(status).toBe(1);
    expect(output).toContain('rule:      default');
  });
});

describe('ledger-gateway policy replay', () => {
  it('names the recorded writes a stricter policy would refuse, and what the recorded level cannot decide', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'policy-replay-trail-'));
    const sandbox = await startSandbox();
    current.upstream = sandbox;
    const gw = await startGateway(sandbox.url, {
      audit: {
        enabled: true,
        directory,
        policy: { defaultLevel: 'request', levels: { 'postV2CommandsSubmit-and-wait': 'body' } },
      },
    });
    current.gw = gw;
    const post = (path: string, body: object) =>
      fetch(`${gw.url}${path}`, {
        method: 'POST',
        headers: { ...gw.auth(), 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const iou = { issuer: ALICE, owner: ALICE, currency: 'USD', amount: '5.0', observers: [] };
    const created = await post('/v2/commands/submit-and-wait-for-transaction', {
      commands: {
        commands: [{ CreateCommand: { templateId: IOU_BY_ID, createArguments: iou } }],
        commandId: 'create-1',
        actAs: [ALICE],
      },
    });
    expect(created.status).toBe(200);
    const transfer = await post('/v2/commands/submit-and-wait', {
      commands: [
        {
          ExerciseCommand: {
            templateId: IOU_BY_ID,
            contractId: SANDBOX_SEED.initialTransaction.contractId,
            choice: 'Transfer',
            choiceArgument: { newOwner: BOB },
          },
        },
      ],
      commandId: 'transfer-1',
      actAs: [ALICE],
    });
    expect(transfer.status).toBe(200);
    await gw.close();

    const f = files({
      'strict.yaml': `ledgerPolicy:
  policies:
    - name: no-transfers
      principals: { subjects: [alice] }
      rules:
        - { name: no-transfer, effect: deny, choices: [Transfer] }
        - { name: small, operations: [writes], where: 'commands.all(c, c.kind != "CreateCommand" || double(c.createArguments.amount) < 100.0)' }
    - name: wallet
      principals: { claims: { scope: wallet } }
      rules: [{ name: own, actAs: ["$claims.party"] }]
`,
    });
    const replay = await runPolicyCommand(['replay', '--trail', directory, '--config', f['strict.yaml']!]);
    expect(replay.code).toBe(1);
    const lines = replay.output.trim().split('\n');
    expect(lines.filter((line) => line.includes('would be REFUSED'))).toEqual([
      expect.stringMatching(
        /postV2CommandsSubmit-and-wait by alice \(level body\): recorded 200; would be REFUSED by no-transfers\/no-transfer/,
      ),
    ]);
    const create = lines.filter((line) => line.includes('submitAndWaitForTransaction'));
    expect(create).toEqual([
      expect.stringMatching(
        /submitAndWaitForTransaction by alice \(level request\): undecidable at the recorded level: whether policy wallet names the caller \(needs claims\); no-transfers\/small \(needs arguments\)$/,
      ),
    ]);
    expect(lines.at(-1)).toBe(
      '2 write(s) replayed: 1 would be refused, 0 would now pass, 1 with conditions undecidable at the recorded level',
    );
  });
});

describe('ledger-gateway policy replay over a trail a dry-run policy decided', () => {
  it('says what the gateway decided then beside what the new policy would do', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'policy-replay-dry-run-'));
    const sandbox = await startSandbox();
    current.upstream = sandbox;
    const policy = (dryRun: boolean) => ({
      name: 'alice-ious',
      principals: { subjects: ['alice'] },
      dryRun,
      rules: [
        { name: 'no-transfer', effect: 'deny', choices: ['Transfer'] },
        // By package id: replay asks no participant for package names.
        { name: 'create-ious', templates: [IOU_BY_ID], commandKinds: ['CreateCommand'] },
      ],
    });
    const gw = await startGateway(sandbox.url, {
      audit: { enabled: true, directory, policy: { defaultLevel: 'request' } },
      ledgerPolicy: { policies: [policy(true)] },
    });
    current.gw = gw;
    const submit = (commands: object[], commandId: string) =>
      fetch(`${gw.url}/v2/commands/submit-and-wait`, {
        method: 'POST',
        headers: { ...gw.auth(), 'content-type': 'application/json' },
        body: JSON.stringify({ commands, commandId, actAs: [ALICE] }),
      });
    const iou = { issuer: ALICE, owner: ALICE, currency: 'USD', amount: '5.0', observers: [] };
    expect((await submit([{ CreateCommand: { templateId: IOU_BY_ID, createArguments: iou } }], 'c-1')).status).toBe(
      200,
    );
    const transfer = {
      ExerciseCommand: {
        templateId: IOU_BY_ID,
        contractId: SANDBOX_SEED.initialTransaction.contractId,
        choice: 'Transfer',
        choiceArgument: { newOwner: BOB },
      },
    };
    expect((await submit([transfer], 't-1')).status).toBe(200); // a dry run refuses nothing
    await gw.close();

    const f = files({ 'enforcing.yaml': `ledgerPolicy: ${JSON.stringify({ policies: [policy(false)] })}\n` });
    const replay = await runPolicyCommand(['replay', '--trail', directory, '--config', f['enforcing.yaml']!]);
    expect(replay.code).toBe(1);
    const lines = replay.output.trim().split('\n');
    expect(lines.filter((line) => line.includes('would be REFUSED'))).toEqual([
      expect.stringMatching(
        /recorded 200 \(dry run: would deny by alice-ious\/no-transfer\); would be REFUSED by alice-ious\/no-transfer/,
      ),
    ]);
    expect(lines.at(-1)).toMatch(/^2 write\(s\) replayed: 1 would be refused, 0 would now pass/);
  });
});
