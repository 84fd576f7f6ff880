// What the ledger policy keeps between calls and within one decision, so that a call costs less
// (docs/performance.md, "Ledger policy"): a policy's candidate rules found once per operation and
// entities named, each CEL variable built when a condition first reads it, a rule's decision made
// once, and a document's parts built when first read. Decisions must not change: one policy decides
// calls of different shapes in turn, and conditions read every variable.
import { describe, expect, it } from 'vitest';
import { SubmissionOperations } from '../../src/operations.js';
import { celInput, compileCondition } from '../../src/ledger-policy/cel.js';
import { createLedgerPolicy, type Decision } from '../../src/ledger-policy/ledger-policy.js';
import { candidateRules, indexPolicies } from '../../src/ledger-policy/rule-index.js';
import { compileLedgerPolicies } from '../../src/ledger-policy/rules.js';
import { decisionNote } from '../../src/ledger-policy/stage.js';
import { ALICE, BOB, create, document, exercise, IOU_BY_ID, principal, section, submission } from './support.js';

const SUBMIT = 'submitAndWaitForTransaction';
const OTHER = IOU_BY_ID.replace(/:Iou:Iou$/, ':Other:Thing');
const SECRET = IOU_BY_ID.replace(/:Iou:Iou$/, ':Other:Secret');
const sync = (decision: Decision | Promise<Decision>): Decision => {
  if (decision instanceof Promise) throw new Error('expected a synchronous decision');
  return decision;
};
const wildcardRead = { transactionFormat: { eventFormat: { filtersByParty: { [ALICE]: { cumulative: [] } } } } };

describe("a policy's candidate rules, found once per operation and entities named", () => {
  const policy = createLedgerPolicy(
    section([
      {
        name: 'app',
        principals: { subjects: ['alice'] },
        rules: [
          { name: 'ious', operations: [SUBMIT], templates: [IOU_BY_ID], actAs: [ALICE] },
          { name: 'no-thing-archive', effect: 'deny', templates: [OTHER], choices: ['Archive'] },
          { name: 'things', operations: [SUBMIT], templates: [OTHER], actAs: [ALICE] },
          { name: 'no-secrets', effect: 'deny', templates: [SECRET] },
        ],
      },
    ]),
  );
  const decide = (body: object) => sync(policy.decide(document(SUBMIT, body)));

  it('decides each shape of call as its own, whatever was decided before it', () => {
    for (let round = 0; round < 2; round++) {
      expect(decide(submission([create(IOU_BY_ID)]))).toMatchObject({ effect: 'allow', rule: 'ious' });
      expect(decide(submission([exercise(OTHER, 'Archive')]))).toMatchObject({
        effect: 'deny',
        rule: 'no-thing-archive',
      });
      expect(decide(submission([exercise(OTHER, 'Use')]))).toMatchObject({ effect: 'allow', rule: 'things' });
      expect(decide(submission([create(IOU_BY_ID), exercise(OTHER, 'Use')]))).toMatchObject({
        effect: 'allow',
        rule: 'ious,things',
      });
      expect(decide(submission([create(IOU_BY_ID), exercise(OTHER, 'Archive')]))).toMatchObject({
        effect: 'deny',
        rule: 'no-thing-archive',
      });
      // A template no rule names is covered by none (deny by default), cached or not.
      expect(decide(submission([create(IOU_BY_ID.replace(/:Iou:Iou$/, ':Iou:Unnamed'))]))).toMatchObject({
        effect: 'deny',
        rule: 'default',
      });
      // The same commands right after a call of their shape: a wildcard read, or another operation, has rules of its own.
      expect(decide(submission([create(IOU_BY_ID)]))).toMatchObject({ effect: 'allow', rule: 'ious' });
      // A wildcard read can concern every rule: the deny rule on SECRET touches it, though no command names SECRET.
      expect(decide({ ...submission([create(IOU_BY_ID)]), ...wildcardRead })).toMatchObject({
        effect: 'deny',
        rule: 'no-secrets',
      });
      expect(decide(submission([create(IOU_BY_ID)]))).toMatchObject({ effect: 'allow', rule: 'ious' });
      // `ious` names submitAndWaitForTransaction only: the same command under submit-and-wait is covered by none.
      const submitAndWait = document(SubmissionOperations.submitAndWait, submission([create(IOU_BY_ID)]).commands);
      expect(sync(policy.decide(submitAndWait))).toMatchObject({
        effect: 'deny',
        rule: 'default',
      });
    }
  });
});

describe('the CEL variables of a decision, each built when first read', () => {
  const doc = document(
    SUBMIT,
    {
      ...submission([create(IOU_BY_ID, { owner: BOB, amount: '5.0' })], [ALICE], { readAs: [BOB] }),
      ...wildcardRead,
    },
    principal('alice', { party: ALICE }),
  );
  const holds = (expression: string) => {
    const condition = compileCondition(expression);
    if (typeof condition !== 'function') throw new Error(condition.problem);
    return condition(celInput(doc, new Date('2026-11-29T12:00:00Z')));
  };

  it('reads every variable as the document has it', () => {
    expect(holds(`operation == "${SUBMIT}" && writes`)).toBe(true);
    expect(holds(`principal.subject == "alice" && principal.claims.party == "${ALICE}"`)).toBe(true);
    expect(holds(`parties.actAs == ["${ALICE}"] && parties.readAs == ["${BOB}"]`)).toBe(true);
    expect(holds(`commands.size() == 1 && commands[0].template.entityName == "Iou"`)).toBe(true);
    expect(holds(`commands[0].createArguments.owner == "${BOB}"`)).toBe(true);
    expect(holds(`read.requested && read.wildcard && read.parties == ["${ALICE}"]`)).toBe(true);
    expect(holds('disclosedContracts.size() == 0 && packages.size() == 0 && rights.size() == 0')).toBe(true);
    expect(holds('commandSource == "json" && targetUserId == ""')).toBe(true);
    expect(holds('now == timestamp("2026-11-29T12:00:00Z")')).toBe(true);
    expect(holds(`principal.subject == "bob"`)).toBe(false);
  });

  it('gives one condition the same values as another in one decision', () => {
    const input = celInput(doc, new Date());
    const first = compileCondition('commands[0].kind == "CreateCommand"');
    const second = compileCondition('commands.exists(c, c.template.entityName == "Iou") && parties.all.size() == 2');
    if (typeof first !== 'function' || typeof second !== 'function') throw new Error('does not compile');
    expect(first(input)).toBe(true);
    expect(second(input)).toBe(true);
    expect(first(input)).toBe(true);
  });
});

describe('what a decision builds and makes anew for each call', () => {
  const rules = [
    { name: 'ious', operations: [SUBMIT], templates: [IOU_BY_ID], actAs: [ALICE] },
    { name: 'no-thing-archive', effect: 'deny', templates: [OTHER], choices: ['Archive'] },
    { name: 'things', operations: [SUBMIT], templates: [OTHER], actAs: [ALICE] },
    { name: 'no-secrets', effect: 'deny', templates: [SECRET] },
  ];
  const config = section([{ name: 'app', principals: { subjects: ['alice'] }, rules }]);

  it('judges a wildcard read against the general rules, the deny rules it touches and those of the commands, not every rule', () => {
    const [indexed] = indexPolicies(compileLedgerPolicies(config).policies).policies;
    const call = document(SUBMIT, { ...submission([create(IOU_BY_ID)]), ...wildcardRead });
    // `things` names another template only, so it cannot cover a read of every template; `no-thing-archive` names a choice.
    expect(candidateRules(indexed!, call).map((rule) => rule.name)).toEqual(['ious', 'no-secrets']);
  });

  it("gives every call a rule decides the rule's own decision and note, frozen", () => {
    const policy = createLedgerPolicy(config);
    const decide = () => sync(policy.decide(document(SUBMIT, submission([create(IOU_BY_ID)]))));
    const first = decide();
    expect(first).toMatchObject({ effect: 'allow', rule: 'ious', mode: 'enforce' });
    expect(decide()).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
    expect(decisionNote(decide())).toBe(decisionNote(first));
    expect(decisionNote(first)).toEqual({ decision: 'allow', policy: 'app', rule: 'ious', mode: 'enforce' });
    expect(Object.isFrozen(decisionNote(first))).toBe(true);
    // The note made with the rule is not one of the decision's fields (the CLI and the logs read five).
    expect(Object.keys(first)).toEqual(['effect', 'policy', 'rule', 'reason', 'mode']);
  });

  it('reads the parts of a call no rule names only when something reads them', () => {
    const policy = createLedgerPolicy(config);
    let reads = 0;
    const body: Record<string, unknown> = submission([create(IOU_BY_ID)]);
    // A party call's fields: a submission's document looks for them only when its parties' subjects are read.
    Object.defineProperty(body, 'partyIdHint', { enumerable: true, get: () => (reads++, undefined) });
    const call = document(SUBMIT, body);
    expect(sync(policy.decide(call))).toMatchObject({ effect: 'allow', rule: 'ious' });
    expect(reads).toBe(0);
    expect(call.parties.all).toEqual([ALICE]);
    expect(reads).toBe(1);
    expect(call.parties.subjects).toEqual([]);
    expect(reads).toBe(1);
  });
});

describe('the clock, read by a decision only when something reads the time', () => {
  let reads = 0;
  let at = new Date('2026-06-01T00:00:00Z');
  const clock = () => (reads++, at);
  const policyOf = (rules: object[]) =>
    createLedgerPolicy(section([{ name: 'app', principals: { subjects: ['alice'] }, rules }]), { now: clock });
  const decide = (policy: ReturnType<typeof createLedgerPolicy>, template: string) =>
    sync(policy.decide(document(SUBMIT, submission([create(template)]))));

  it('is not read under rules without time windows, but for a condition that reads now', () => {
    const policy = policyOf([
      { name: 'ious', operations: [SUBMIT], templates: [IOU_BY_ID], actAs: [ALICE] },
      {
        name: 'before-2027',
        operations: [SUBMIT],
        templates: [OTHER],
        where: 'now < timestamp("2027-01-01T00:00:00Z")',
      },
    ]);
    reads = 0;
    expect(decide(policy, IOU_BY_ID)).toMatchObject({ effect: 'allow', rule: 'ious' });
    expect(reads).toBe(0);
    expect(decide(policy, OTHER)).toMatchObject({ effect: 'allow', rule: 'before-2027' });
    expect(reads).toBe(1);
    at = new Date('2027-06-01T00:00:00Z');
    expect(decide(policy, OTHER)).toMatchObject({ effect: 'deny', rule: 'default' });
  });

  it('is read once per decision when a rule has a window, and the window holds', () => {
    const policy = policyOf([
      { name: 'until-2027', operations: [SUBMIT], templates: [IOU_BY_ID], notAfter: '2027-01-01T00:00:00Z' },
    ]);
    at = new Date('2026-06-01T00:00:00Z');
    reads = 0;
    expect(decide(policy, IOU_BY_ID)).toMatchObject({ effect: 'allow', rule: 'until-2027' });
    expect(reads).toBe(1);
    at = new Date('2027-06-01T00:00:00Z');
    expect(decide(policy, IOU_BY_ID)).toMatchObject({ effect: 'deny', rule: 'default' });
    expect(reads).toBe(2);
  });
});
