// The compiled conditions (src/ledger-policy/cel-compiled.ts) against cel-js itself: on every pair of
// condition and document, a compiled closure either answers what cel-js answers or leaves the
// condition to cel-js (BAIL), errors included; and the conditions of the benchmark's policy are
// decided without cel-js.
import { describe, expect, it } from 'vitest';
import { BAIL, compileToClosure } from '../../src/ledger-policy/cel-compiled.js';
import { celInput, compileCondition, parseChecked } from '../../src/ledger-policy/cel.js';
import type { DecisionDocument } from '../../src/ledger-policy/document.js';
import { ALICE, BOB, create, document, exercise, IOU_BY_ID, principal, submission } from './support.js';

const SUBMIT = 'submitAndWaitForTransaction';
const NOW = new Date('2026-11-29T12:00:00Z');

const DOCUMENTS: Record<string, DecisionDocument> = {
  'a create of 999.99': document(
    SUBMIT,
    submission([create(IOU_BY_ID, { owner: ALICE, amount: '999.99', count: 3, tags: ['a', 'b'], extra: null })]),
    principal('alice', { party: ALICE, roles: ['admin'], level: 2 }),
  ),
  'amounts that are not decimals': document(
    SUBMIT,
    submission([
      create(IOU_BY_ID, { owner: 'nobody', amount: '0x10' }),
      create(IOU_BY_ID, { owner: ALICE, amount: ' 1' }),
      create(IOU_BY_ID, { owner: ALICE, amount: 'inf', count: '3' }),
      create(IOU_BY_ID, { owner: ALICE, amount: '' }),
      create(IOU_BY_ID, { owner: ALICE, amount: 'abc' }),
      create(IOU_BY_ID, { owner: ALICE, amount: 1e3 }),
    ]),
  ),
  'an exercise and a create without owner': document(
    SUBMIT,
    submission([exercise(IOU_BY_ID, 'Transfer', { newOwner: BOB }), create(IOU_BY_ID, { amount: '5' })], [ALICE, BOB]),
    principal('bob'),
  ),
  'no commands': document('getV2StateLedger-end', undefined, principal('carol', { level: 'high' })),
  'a reassignment (no template)': document('submitReassignment', {
    reassignmentCommands: {
      submitter: ALICE,
      commands: [{ command: { UnassignCommand: { value: { contractId: '00a', source: 's', target: 't' } } } }],
    },
  }),
};

// double() of each text alone, as cel-js reads it (lib/functions.js) or leaves it to cel-js.
for (const amount of [
  '1e3',
  '-2.5',
  '+7',
  '.5',
  '5.',
  '0x10',
  '0b11',
  ' 1',
  '1 ',
  '',
  'inf',
  'Infinity',
  '-Infinity',
  '-infinity',
  'NaN',
  'nan',
  '1_0',
  'abc',
])
  DOCUMENTS[`an amount of "${amount}"`] = document(SUBMIT, submission([create(IOU_BY_ID, { owner: ALICE, amount })]));

const CONDITIONS = [
  'double(commands[0].createArguments.amount) < 1000.0',
  'double(commands[0].createArguments.amount) > 0.0 || double(commands[0].createArguments.amount) <= 0.0',
  'commands.exists(c, c.createArguments.owner == "nobody")',
  'commands.all(c, double(c.createArguments.amount) >= 0.0)',
  'commands.exists(c, c.kind == "ExerciseCommand" && c.choiceArgument.newOwner == principal.claims.party)',
  'commands.all(c, c.template.entityName == "Iou") && commands.size() > 0',
  'commands[1].createArguments.owner == "nobody"',
  'commands[0].createArguments["owner"] != "x"',
  'commands[0].createArguments.tags[1] == "b"',
  'commands[0].createArguments.tags[2] == "b"',
  'commands[0].createArguments[0] == "x"',
  'commands[0].createArguments.tags[size(commands)] == "b"',
  'commands[0].createArguments.count > 2',
  'commands[0].createArguments.count == 3',
  'commands[0].createArguments.count == 3.0',
  'commands[0].createArguments.count < 4.0',
  'commands[0].createArguments.extra == null',
  'commands[0].createArguments.tags == ["a", "b"]',
  '"a" in commands[0].createArguments.tags',
  'commands[0].createArguments.owner < "z"',
  'size(commands) == 1 ? commands[0].choice == "" : !(commands[0].choice == "")',
  'principal.subject in ["alice", "bob"] || principal.claims.level > 1',
  'principal.claims.level > 1 || principal.subject == "alice"',
  '"admin" in principal.claims.roles',
  'principal.claims.level == 2',
  'parties.actAs.size() == 1 && parties.actAs[0] == principal.claims.party',
  `parties.all.exists(p, p == "${BOB}")`,
  'operation == "submitAndWaitForTransaction" && writes && commandSource == "json"',
  'targetUserId == "" && !writes',
  'commands.exists(c, c.template.packageName == "" && c.source == "s")',
  'commands.exists(c, commands.all(d, d.kind == c.kind))',
  'double(commands[0].createArguments.count) == 3.0',
  'now < timestamp("2027-01-01T00:00:00Z") && commands.size() >= 0',
  'read.wildcard || commands.size() == 0',
];

/** cel-js's own answer: its value, or 'error'. */
function interpreted(expression: string, doc: DecisionDocument): unknown {
  const checked = parseChecked(expression);
  if ('problem' in checked) throw new Error(`${expression} ${checked.problem}`);
  try {
    return checked.program(celInput(doc, NOW));
  } catch {
    return 'error';
  }
}

describe('compiled conditions against cel-js', () => {
  it('answer as cel-js does, or leave the condition to it, on every condition and document', () => {
    let compiledAnswers = 0;
    let left = 0;
    for (const expression of CONDITIONS) {
      const checked = parseChecked(expression);
      if ('problem' in checked) throw new Error(`${expression} ${checked.problem}`);
      const closure = compileToClosure(checked.program.ast);
      const condition = compileCondition(expression);
      if (typeof condition !== 'function') throw new Error(condition.problem);
      for (const [name, doc] of Object.entries(DOCUMENTS)) {
        const expected = interpreted(expression, doc);
        const compiled = closure?.(doc);
        if (compiled === BAIL || compiled === undefined) left++;
        else {
          compiledAnswers++;
          expect({ expression, name, value: compiled }).toEqual({ expression, name, value: expected });
        }
        // The condition as the rules run it: cel-js's answer whichever way it came, an error thrown.
        const run = () => condition(celInput(doc, NOW));
        if (expected === 'error') expect(run, `${expression} on ${name}`).toThrow();
        else expect({ expression, name, value: run() }).toEqual({ expression, name, value: expected });
      }
    }
    // Both ways are exercised: the closures answer most pairs, cel-js the rest (errors, mixed kinds).
    expect(compiledAnswers).toBeGreaterThan(50);
    expect(left).toBeGreaterThan(30);
  });

  it('leaves to cel-js the conditions whose forms are not compiled', () => {
    for (const expression of [
      'now < timestamp("2027-01-01T00:00:00Z")',
      'read.wildcard',
      'commands.map(c, c.kind) == []',
    ]) {
      const checked = parseChecked(expression);
      if ('problem' in checked) throw new Error(checked.problem);
      expect(compileToClosure(checked.program.ast), expression).toBeUndefined();
    }
  });

  it("decides the benchmark policy's two conditions on a 1 KB submission without cel-js", () => {
    const doc = DOCUMENTS['a create of 999.99']!;
    for (const [expression, value] of [
      ['double(commands[0].createArguments.amount) < 1000.0', true],
      ['commands.exists(c, c.createArguments.owner == "nobody")', false],
    ] as const) {
      const checked = parseChecked(expression);
      if ('problem' in checked) throw new Error(checked.problem);
      expect(compileToClosure(checked.program.ast)?.(doc)).toBe(value);
    }
  });
});
