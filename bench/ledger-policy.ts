// Micro-benchmark (not a test), paired: the ledger policy's cost per call, building the decision
// document of a 1 KB submission and deciding it, under 20 rules (2 with CEL conditions) and under
// 1,000 (the same 20 among 980 of other callers, operations and templates): rules are indexed, so
// the second must cost at most 1.10x the first. Variants run in alternating rounds in one process;
// the ratio is the median of the rounds' ratios. Run: npm run bench:ledger-policy [-- rounds ms-per-round]
import { Value } from '@sinclair/typebox/value';
import { decisionDocument, principalFacts } from '../src/ledger-policy/build-document.js';
import { createLedgerPolicy, type LedgerPolicy } from '../src/ledger-policy/ledger-policy.js';
import { LedgerPolicySchema, type LedgerPolicyConfig } from '../src/config/schema.js';
import { pairedRounds, printTable } from './paired.js';

const ROUNDS = Number(process.argv[2] ?? 15);
const ROUND_MS = Number(process.argv[3] ?? 300);

const ALICE = `Alice::1220${'a'.repeat(64)}`;
const caller = principalFacts(
  { subject: 'app', issuer: 'https://idp', claims: { sub: 'app', party: ALICE } },
  { clientAddress: '10.0.0.7' },
);

/** A 1 KB submitAndWaitForTransaction body: one exercise of #bench-app:Main:Asset with its arguments. */
const body = {
  commands: {
    commands: [
      {
        ExerciseCommand: {
          templateId: '#bench-app:Main:Asset',
          contractId: `00${'c'.repeat(136)}`,
          choice: 'Transfer',
          choiceArgument: { newOwner: ALICE, amount: '125.0000000000', memo: 'm'.repeat(560), tags: ['a', 'b', 'c'] },
        },
      },
    ],
    commandId: 'bench-command-0000000001',
    actAs: [ALICE],
    userId: 'app',
  },
};
if (JSON.stringify(body).length < 1000) throw new Error('the bench body must be about 1 KB');

/** The 20 rules of the application's own policy: 2 with CEL conditions. */
function appRules(): object[] {
  const rules: object[] = [
    {
      name: 'own-party',
      operations: ['submitAndWaitForTransaction'],
      actAs: ['$claims.party'],
      templates: ['#bench-app:Main:Asset'],
      choices: ['Transfer'],
      where: 'double(commands[0].choiceArgument.amount) < 1000.0',
    },
    {
      name: 'no-big',
      effect: 'deny',
      templates: ['#bench-app:Main:Asset'],
      where: 'commands.exists(c, c.choice == "Transfer" && c.choiceArgument.newOwner == "nobody")',
    },
  ];
  for (let i = 0; i < 18; i++)
    rules.push({
      name: `other-${i}`,
      operations: ['submitAndWaitForTransaction'],
      templates: [`#bench-app:Main:Other${i}`],
      choices: ['Run'],
    });
  return rules;
}

function section(totalRules: number): LedgerPolicyConfig {
  const policies: object[] = [{ name: 'app', principals: { subjects: ['app'] }, rules: appRules() }];
  // The rest: other callers' policies, other operations, other templates.
  for (let i = 0; policies.length * 20 < totalRules; i++)
    policies.push({
      name: `tenant-${i}`,
      principals: { subjects: [`tenant-${i}`] },
      rules: Array.from({ length: 20 }, (_, j) => ({
        name: `r${j}`,
        operations: ['postV2CommandsAsyncSubmit'],
        templates: [`#tenant-${i}:Main:T${j}`],
        choices: ['Go'],
      })),
    });
  const config = Value.Default(LedgerPolicySchema, { policies }) as LedgerPolicyConfig;
  const count = config.policies.reduce((sum, policy) => sum + policy.rules.length, 0);
  if (count !== totalRules) throw new Error(`built ${count} rules, not ${totalRules}`);
  return config;
}

function decideOnce(policy: LedgerPolicy): void {
  const document = decisionDocument({
    operation: 'submitAndWaitForTransaction',
    writes: true,
    principal: caller,
    body,
  });
  const decision = policy.decide(document);
  if (decision instanceof Promise || decision.effect !== 'allow')
    throw new Error(`expected a synchronous allow, got ${JSON.stringify(decision)}`);
}

const rules20 = createLedgerPolicy(section(20));
const rules1000 = createLedgerPolicy(section(1000));
const off = createLedgerPolicy(section(0 + 20)); // same policy, but the caller is named by none: the "rules off" path
const unnamed = principalFacts(
  { subject: 'nobody-named', issuer: 'https://idp', claims: {} },
  { clientAddress: '10.0.0.7' },
);

const results = pairedRounds(
  {
    'caller named by no policy': () => {
      const document = decisionDocument({
        operation: 'submitAndWaitForTransaction',
        writes: true,
        principal: unnamed,
        body,
      });
      if ((off.decide(document) as { effect: string }).effect !== 'none') throw new Error('expected none');
    },
    '20 rules (2 CEL)': () => decideOnce(rules20),
    '1,000 rules (2 CEL)': () => decideOnce(rules1000),
  },
  ROUNDS,
  ROUND_MS,
);
printTable(results, '20 rules (2 CEL)');
