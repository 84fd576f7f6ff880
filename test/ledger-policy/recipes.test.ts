// docs/ledger-policy.md's recipes compile and decide as the guide says.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { createLedgerPolicy, ledgerPolicyProblems, type Decision } from '../../src/ledger-policy/ledger-policy.js';
import { ROOT } from '../helpers/process.js';
import { ALICE, document, principal, section, submission } from './support.js';

const guide = readFileSync(join(ROOT, 'docs/ledger-policy.md'), 'utf8');
const blocks = [...guide.matchAll(/```yaml\n([\s\S]*?)```/g)].map((match) => match[1]!);
const recipes = blocks.filter((block) => block.startsWith('- name:')).map((block) => (parse(block) as object[])[0]!);
const sync = (decision: Decision | Promise<Decision>) => decision as Decision;
const OPERATOR = 'Operator::1220...';

describe("the guide's recipes", () => {
  it('compile, the example section and every recipe', () => {
    expect(recipes).toHaveLength(6);
    expect(ledgerPolicyProblems(section(recipes))).toEqual([]);
    const example = parse(blocks.find((block) => block.startsWith('ledgerPolicy:'))!) as {
      ledgerPolicy: { policies: unknown[] };
    };
    expect(ledgerPolicyProblems(section(example.ledgerPolicy.policies))).toEqual([]);
  });

  it('decide as the guide says', () => {
    const policy = createLedgerPolicy(section(recipes), { now: () => new Date('2026-10-10T12:00:00Z') });
    const counter = (choice: string, actAs = OPERATOR) =>
      submission(
        [{ ExerciseCommand: { templateId: '#my-app:Main:Counter', contractId: '00c', choice, choiceArgument: {} } }],
        [actAs],
      );
    const ci = principal('ci-job');
    expect(sync(policy.decide(document('submitAndWaitForTransaction', counter('Bump'), ci))).effect).toBe('allow');
    expect(sync(policy.decide(document('submitAndWaitForTransaction', counter('Reset'), ci))).effect).toBe('deny');
    const indexer = principal('indexer');
    expect(
      sync(
        policy.decide(
          document('postV2StateActive-contracts', { eventFormat: { filtersByParty: { 'Acme::1220ab': {} } } }, indexer),
        ),
      ).effect,
    ).toBe('allow');
    expect(sync(policy.decide(document('submitAndWaitForTransaction', counter('Bump'), indexer))).effect).toBe('deny');
    const bootstrap = principal('bootstrap');
    const grant = (kind: string) =>
      document(
        'postV2UsersUser-idRights',
        { userId: 'u', rights: [{ kind: { [kind]: { value: { party: ALICE } } } }] },
        bootstrap,
      );
    expect(sync(policy.decide(grant('CanReadAs'))).effect).toBe('allow');
    expect(sync(policy.decide(grant('CanActAs')))).toMatchObject({ effect: 'deny', rule: 'no-acting-rights' });
    const transfer = submission([
      {
        ExerciseCommand: {
          templateId: '#my-token:Token:Holding',
          contractId: '00c',
          choice: 'Transfer',
          choiceArgument: {},
        },
      },
    ]);
    expect(sync(policy.decide(document('submitAndWaitForTransaction', transfer, bootstrap)))).toMatchObject({
      effect: 'deny',
      rule: 'no-assets',
    });
    const wallet = principal('w1', { scope: 'wallet', party: ALICE });
    expect(sync(policy.decide(document('submitAndWaitForTransaction', counter('Any', ALICE), wallet))).effect).toBe(
      'allow',
    );
    expect(sync(policy.decide(document('submitAndWaitForTransaction', counter('Any', OPERATOR), wallet))).effect).toBe(
      'deny',
    );
    const vendor = principal('v', { org: 'globex' });
    const vendorCall = document(
      'postV2StateActive-contracts',
      { eventFormat: { filtersByParty: { 'Acme::1': {} } } },
      { ...vendor, issuer: 'https://idp.globex.example' },
    );
    expect(sync(policy.decide(vendorCall)).effect).toBe('allow');
    const later = createLedgerPolicy(section(recipes), { now: () => new Date('2026-11-02T00:00:00Z') });
    expect(sync(later.decide(vendorCall))).toMatchObject({ effect: 'deny', rule: 'default' });
  });
});
