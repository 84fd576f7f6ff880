// The rules: compiled with every problem's key path, and their decisions (deny first, allow covers,
// deny by default for a caller a policy names, dry run, time windows, CEL, package names).
import { describe, expect, it } from 'vitest';
import {
  assertLedgerPolicyConfig,
  createLedgerPolicy,
  ledgerPolicyProblems,
  ledgerPolicyRefusal,
  type Decision,
} from '../../src/ledger-policy/ledger-policy.js';
import { createPackageNameResolver } from '../../src/ledger-policy/package-names.js';
import { renderCantonError } from '../../src/errors.js';
import {
  ALICE,
  BOB,
  create,
  document,
  exercise,
  IOU_BY_ID,
  IOU_BY_NAME,
  IOU_PACKAGE_ID,
  OPERATOR,
  principal,
  section,
  submission,
} from './support.js';

const SUBMIT = 'submitAndWaitForTransaction';
const ACS = 'postV2StateActive-contracts';
const sync = (decision: Decision | Promise<Decision>): Decision => {
  if (decision instanceof Promise) throw new Error('expected a synchronous decision');
  return decision;
};

describe('compiling the ledgerPolicy section', () => {
  it('accepts the empty section and a full one', () => {
    expect(ledgerPolicyProblems(section([]))).toEqual([]);
    expect(
      ledgerPolicyProblems(
        section([
          {
            name: 'wallet',
            principals: { claims: { scope: 'wallet' } },
            rules: [
              {
                name: 'own',
                actAs: ['$claims.party'],
                templates: ['#sandbox-iou:Iou:*'],
                where: 'commands.all(c, c.choice != "Archive")',
                notAfter: '2030-01-01T00:00:00Z',
              },
              { name: 'no-admin', effect: 'deny', rights: ['ParticipantAdmin'] },
            ],
          },
        ]),
      ),
    ).toEqual([]);
  });

  it('names every problem with its key path: CEL that does not parse or type-check, unknown operations, bad patterns and times, no principal matcher, repeated names', () => {
    const problems = ledgerPolicyProblems(
      section([
        {
          name: 'p',
          principals: {},
          notBefore: '2027-01-01T00:00:00Z',
          notAfter: '2026-01-01T00:00:00Z',
          rules: [
            { name: 'r', where: 'commands.all(c, c.choise == "x")' },
            { name: 'r', where: 'principal.subject == 1' },
            { name: 's', where: 'principal.subject' },
            { name: 't', where: 'commands.exists(c,' },
            {
              name: 'u',
              operations: ['postV2Nope'],
              templates: ['Iou:Iou'],
              parties: ['$claim.party', 'a*b'],
              notAfter: 'tomorrow',
            },
          ],
        },
        { name: 'p', principals: { sources: ['not-an-ip'] } },
      ]),
    );
    expect(problems).toEqual([
      expect.stringMatching(
        /^ledgerPolicy\.policies\[0\]\.rules\[0\]\.where: does not type-check: No such key: choise/,
      ),
      'ledgerPolicy.policies[0].rules[1].name: "r" is used twice in the policy',
      expect.stringMatching(
        /^ledgerPolicy\.policies\[0\]\.rules\[1\]\.where: does not type-check: no such overload: string == int/,
      ),
      'ledgerPolicy.policies[0].rules[2].where: is of type string, not bool',
      expect.stringMatching(/^ledgerPolicy\.policies\[0\]\.rules\[3\]\.where: does not parse: /),
      'ledgerPolicy.policies[0].rules[4].operations: unknown operation "postV2Nope" (an operation name, "reads" or "writes")',
      expect.stringMatching(/^ledgerPolicy\.policies\[0\]\.rules\[4\]\.parties\[0\]: "\$claim\.party" is not a party/),
      'ledgerPolicy.policies[0].rules[4].parties[1]: "a*b": "*" stands only at the end',
      expect.stringMatching(/^ledgerPolicy\.policies\[0\]\.rules\[4\]\.templates\[0\]: "Iou:Iou" is not/),
      'ledgerPolicy.policies[0].rules[4].notAfter: "tomorrow" is not an RFC 3339 time (e.g. 2026-10-01T00:00:00Z)',
      'ledgerPolicy.policies[0].principals: names no caller (one of anyAuthenticated, subjects, issuers, claims, consumers, certificateSubjects, certificateDnsNames, sources)',
      'ledgerPolicy.policies[0]: notBefore is not before notAfter',
      'ledgerPolicy.policies[1].name: "p" is used twice',
      'ledgerPolicy.policies[1].principals.sources: invalid IP address: not-an-ip (IP addresses or CIDRs)',
    ]);
    expect(() => assertLedgerPolicyConfig(section([{ name: 'x', principals: {} }]))).toThrow(
      /ledgerPolicy\.policies\[0\]\.principals/,
    );
  });
});

describe('deciding', () => {
  const ci = section([
    {
      name: 'ci',
      principals: { subjects: ['ci-job'] },
      rules: [
        {
          name: 'bump-only',
          operations: [SUBMIT],
          commandKinds: ['ExerciseCommand'],
          templates: ['#sandbox-iou:Iou:Iou'],
          choices: ['Bump'],
          actAs: [OPERATOR],
        },
      ],
    },
  ]);
  const ciJob = principal('ci-job');

  it('leaves a caller no policy names to the other rules', () => {
    const policy = createLedgerPolicy(ci);
    expect(
      sync(policy.decide(document(SUBMIT, submission([exercise(IOU_BY_NAME, 'Anything')]), principal('alice')))),
    ).toMatchObject({ effect: 'none' });
  });

  it('allows what an allow rule covers and denies the rest by default, naming the rule', () => {
    const policy = createLedgerPolicy(ci);
    const allowed = sync(
      policy.decide(document(SUBMIT, submission([exercise(IOU_BY_NAME, 'Bump')], [OPERATOR]), ciJob)),
    );
    expect(allowed).toMatchObject({ effect: 'allow', policy: 'ci', rule: 'bump-only', mode: 'enforce' });
    for (const call of [
      document(SUBMIT, submission([exercise(IOU_BY_NAME, 'Transfer')], [OPERATOR]), ciJob),
      document(SUBMIT, submission([exercise(IOU_BY_NAME, 'Bump')], [ALICE]), ciJob),
      document(SUBMIT, submission([exercise(IOU_BY_NAME, 'Bump'), create(IOU_BY_NAME)], [OPERATOR]), ciJob),
      document('postV2CommandsAsyncSubmit', { commands: [exercise(IOU_BY_NAME, 'Bump')], actAs: [OPERATOR] }, ciJob),
      document(ACS, { eventFormat: { filtersByParty: { [OPERATOR]: {} } } }, ciJob),
    ])
      expect(sync(policy.decide(call))).toMatchObject({ effect: 'deny', policy: 'ci', rule: 'default' });
  });

  it('covers each command by one of several allow rules, and refuses a call a deny rule touches whatever the allow rules say', () => {
    const policy = createLedgerPolicy(
      section([
        {
          name: 'app',
          principals: { subjects: ['alice'] },
          rules: [
            { name: 'no-bob', effect: 'deny', parties: [BOB] },
            { name: 'create-iou', commandKinds: ['CreateCommand'], templates: ['#sandbox-iou:*'] },
            { name: 'transfer', choices: ['Transfer'], templates: ['#sandbox-iou:Iou:Iou'] },
          ],
        },
      ]),
    );
    const both = sync(
      policy.decide(document(SUBMIT, submission([create(IOU_BY_NAME), exercise(IOU_BY_NAME, 'Transfer')]))),
    );
    expect(both).toMatchObject({ effect: 'allow', rule: 'create-iou,transfer' });
    const withBob = sync(
      policy.decide(document(SUBMIT, submission([create(IOU_BY_NAME)], [ALICE], { readAs: [BOB] }))),
    );
    expect(withBob).toMatchObject({ effect: 'deny', rule: 'no-bob' });
  });

  it('"act only as your own party" in one line, as a claim pattern or a CEL condition', () => {
    for (const rule of [
      { name: 'own-party', operations: ['writes'], actAs: ['$claims.party'] },
      { name: 'own-party', operations: ['writes'], where: 'parties.actAs.all(p, p == principal.claims.party)' },
    ]) {
      const policy = createLedgerPolicy(
        section([{ name: 'wallet', principals: { claims: { scope: 'wallet' } }, rules: [rule] }]),
      );
      const walletUser = principal('u1', { scope: 'wallet', party: ALICE });
      expect(
        sync(policy.decide(document(SUBMIT, submission([create(IOU_BY_NAME)], [ALICE]), walletUser))),
      ).toMatchObject({ effect: 'allow' });
      expect(sync(policy.decide(document(SUBMIT, submission([create(IOU_BY_NAME)], [BOB]), walletUser)))).toMatchObject(
        { effect: 'deny', rule: 'default' },
      );
      const noClaim = principal('u2', { scope: 'wallet' });
      expect(sync(policy.decide(document(SUBMIT, submission([create(IOU_BY_NAME)], [ALICE]), noClaim)))).toMatchObject({
        effect: 'deny',
      });
    }
  });

  it('holds a read to its parties and templates: a wildcard or any-party read needs a rule that allows it', () => {
    const policy = createLedgerPolicy(
      section([
        {
          name: 'indexer',
          principals: { subjects: ['indexer'] },
          rules: [
            { name: 'read-alice-iou', operations: ['reads'], readAs: [ALICE], templates: ['#sandbox-iou:Iou:Iou'] },
          ],
        },
      ]),
    );
    const indexer = principal('indexer');
    const iouFilter = {
      cumulative: [{ identifierFilter: { TemplateFilter: { value: { templateId: IOU_BY_NAME } } } }],
    };
    expect(
      sync(policy.decide(document(ACS, { eventFormat: { filtersByParty: { [ALICE]: iouFilter } } }, indexer))),
    ).toMatchObject({ effect: 'allow' });
    expect(
      sync(policy.decide(document(ACS, { eventFormat: { filtersByParty: { [ALICE]: {} } } }, indexer))),
    ).toMatchObject({ effect: 'deny' });
    expect(
      sync(policy.decide(document(ACS, { eventFormat: { filtersByParty: { [BOB]: iouFilter } } }, indexer))),
    ).toMatchObject({ effect: 'deny' });
    expect(
      sync(policy.decide(document(ACS, { eventFormat: { filtersForAnyParty: iouFilter } }, indexer))),
    ).toMatchObject({ effect: 'deny' });
    expect(sync(policy.decide(document(SUBMIT, submission([create(IOU_BY_NAME)]), indexer)))).toMatchObject({
      effect: 'deny',
    });
  });

  it('holds a rule only within its time window, and a policy after its window denies by default', () => {
    let now = new Date('2026-05-01T00:00:00Z');
    const policy = createLedgerPolicy(
      section([
        {
          name: 'vendor',
          principals: { subjects: ['vendor'] },
          notAfter: '2026-05-31T00:00:00Z',
          rules: [{ name: 'support', operations: ['reads'] }],
        },
      ]),
      { now: () => now },
    );
    const read = document(ACS, { eventFormat: { filtersByParty: { [ALICE]: {} } } }, principal('vendor'));
    expect(sync(policy.decide(read))).toMatchObject({ effect: 'allow' });
    now = new Date('2026-06-01T00:00:00Z');
    expect(sync(policy.decide(read))).toMatchObject({ effect: 'deny', rule: 'default' });
  });

  it('decides a dry-run policy without enforcing it, and an enforcing one over it', () => {
    const dry = section([
      {
        name: 'trial',
        dryRun: true,
        principals: { subjects: ['alice'] },
        rules: [{ name: 'reads-only', operations: ['reads'] }],
      },
    ]);
    expect(sync(createLedgerPolicy(dry).decide(document(SUBMIT, submission([create(IOU_BY_NAME)]))))).toMatchObject({
      effect: 'deny',
      mode: 'dryRun',
      policy: 'trial',
    });
    const mixed = section([
      {
        name: 'trial',
        dryRun: true,
        principals: { subjects: ['alice'] },
        rules: [{ name: 'no-creates', effect: 'deny', commandKinds: ['CreateCommand'] }],
      },
      { name: 'live', principals: { subjects: ['alice'] }, rules: [{ name: 'all', operations: ['writes', 'reads'] }] },
    ]);
    const mixedPolicy = createLedgerPolicy(mixed);
    expect(sync(mixedPolicy.decide(document(SUBMIT, submission([create(IOU_BY_NAME)]))))).toMatchObject({
      effect: 'deny',
      mode: 'dryRun',
      rule: 'no-creates',
    });
    expect(sync(mixedPolicy.decide(document(SUBMIT, submission([exercise(IOU_BY_NAME, 'T')]))))).toMatchObject({
      effect: 'allow',
      mode: 'enforce',
      rule: 'all',
    });
    const enforcingDeny = section([
      {
        name: 'trial',
        dryRun: true,
        principals: { subjects: ['alice'] },
        rules: [{ name: 'all', operations: ['writes'] }],
      },
      { name: 'live', principals: { subjects: ['alice'] }, rules: [{ name: 'reads', operations: ['reads'] }] },
    ]);
    expect(
      sync(createLedgerPolicy(enforcingDeny).decide(document(SUBMIT, submission([create(IOU_BY_NAME)])))),
    ).toMatchObject({ effect: 'deny', mode: 'enforce', policy: 'live' });
  });

  it('denies a call it cannot read, and a CEL condition that fails on a call holds a deny rule and not an allow rule', () => {
    const policy = createLedgerPolicy(
      section([
        {
          name: 'p',
          principals: { subjects: ['alice'] },
          rules: [
            { name: 'big', effect: 'deny', where: 'int(commands[0].choiceArgument.amount) > 100' },
            { name: 'any', operations: ['writes'] },
          ],
        },
      ]),
    );
    expect(sync(policy.decide(document(SUBMIT, submission([{ Nope: {} }]))))).toMatchObject({
      effect: 'deny',
      rule: 'unreadable',
    });
    expect(
      sync(policy.decide(document(SUBMIT, submission([exercise(IOU_BY_NAME, 'T', { amount: '5' })])))),
    ).toMatchObject({ effect: 'allow' });
    expect(
      sync(policy.decide(document(SUBMIT, submission([exercise(IOU_BY_NAME, 'T', { amount: '500' })])))),
    ).toMatchObject({ effect: 'deny', rule: 'big' });
    expect(sync(policy.decide(document(SUBMIT, submission([exercise(IOU_BY_NAME, 'T', {})]))))).toMatchObject({
      effect: 'deny',
      rule: 'big',
    });
  });

  it('holds packages and rights: no principal may grant a right its policy does not list, nor one it may not use itself', () => {
    const policy = createLedgerPolicy(
      section([
        {
          name: 'ops',
          principals: { subjects: ['ops'] },
          rules: [
            { name: 'grant-read', rights: ['CanReadAs'] },
            { name: 'vet-app', operations: ['updateVettedPackages'], packages: ['sandbox-iou'] },
            { name: 'read-bob', operations: ['reads'], readAs: [BOB] },
          ],
        },
      ]),
    );
    const ops = principal('ops');
    const grant = (kind: string, party = BOB) =>
      document(
        'postV2UsersUser-idRights',
        { userId: 'bob', rights: [{ kind: { [kind]: { value: { party } } } }] },
        ops,
      );
    expect(sync(policy.decide(grant('CanReadAs')))).toMatchObject({ effect: 'allow', rule: 'grant-read' });
    expect(sync(policy.decide(grant('CanActAs')))).toMatchObject({ effect: 'deny' });
    // Listed, but ops may not read as alice itself: it may not let another do so.
    expect(sync(policy.decide(grant('CanReadAs', ALICE)))).toMatchObject({
      effect: 'deny',
      rule: 'grant-exceeds-caller',
    });
    const vet = (name: string) =>
      document(
        'updateVettedPackages',
        { changes: [{ operation: { Vet: { value: { packages: [{ packageName: name }] } } } }] },
        ops,
      );
    expect(sync(policy.decide(vet('sandbox-iou')))).toMatchObject({ effect: 'allow' });
    expect(sync(policy.decide(vet('other')))).toMatchObject({ effect: 'deny' });
    expect(sync(policy.decide(document('postV2Dars', undefined, ops)))).toMatchObject({ effect: 'deny' });
  });

  it('holds a package-name rule for a template named by package id, resolving it once; unresolvable fails closed', async () => {
    const asked: string[] = [];
    const resolver = createPackageNameResolver({
      cacheEntries: 10,
      unknownRetryMs: 60_000,
      lookup: async (id) => {
        asked.push(id);
        return id === IOU_PACKAGE_ID ? 'sandbox-iou' : undefined;
      },
    });
    const policy = createLedgerPolicy(
      section([
        {
          name: 'p',
          principals: { subjects: ['alice'] },
          rules: [{ name: 'iou', templates: ['#sandbox-iou:Iou:Iou'] }],
        },
      ]),
      { resolver },
    );
    const byId = () => document(SUBMIT, submission([create(IOU_BY_ID)]));
    expect(await policy.decide(byId())).toMatchObject({ effect: 'allow', rule: 'iou' });
    expect(sync(policy.decide(byId()))).toMatchObject({ effect: 'allow' }); // cached: no second question
    expect(asked).toEqual([IOU_PACKAGE_ID]);
    expect(await policy.decide(document(SUBMIT, submission([create('f00d:Iou:Iou')])))).toMatchObject({
      effect: 'deny',
      rule: 'unresolved-package',
    });
    const failing = createLedgerPolicy(
      section([
        { name: 'p', principals: { subjects: ['alice'] }, rules: [{ name: 'iou', templates: ['#sandbox-iou:*'] }] },
      ]),
      {
        resolver: createPackageNameResolver({
          cacheEntries: 10,
          unknownRetryMs: 1,
          lookup: () => Promise.reject(new Error('participant down')),
        }),
      },
    );
    expect(await failing.decide(byId())).toMatchObject({
      effect: 'deny',
      rule: 'unresolved-package',
      reason: expect.stringContaining('participant down'),
    });
  });

  it("refuses in Canton's PERMISSION_DENIED shape with the gateway code, the policy and rule names, never the conditions", () => {
    const body = renderCantonError(
      ledgerPolicyRefusal({
        effect: 'deny',
        policy: 'ci',
        rule: 'bump-only',
        reason: 'secret condition',
        mode: 'enforce',
      }).definition,
      {
        context: { policy: 'ci', rule: 'bump-only' },
      },
    );
    expect(body).toMatchObject({
      code: 'GATEWAY_LEDGER_POLICY_DENIED',
      errorCategory: 7,
      grpcCodeValue: 7,
      context: { policy: 'ci', rule: 'bump-only' },
    });
    const error = ledgerPolicyRefusal({
      effect: 'deny',
      policy: 'ci',
      rule: 'bump-only',
      reason: 'where: secret',
      mode: 'enforce',
    });
    expect([error.definition.status, error.details.context, JSON.stringify(error.details)]).toEqual([
      403,
      { policy: 'ci', rule: 'bump-only' },
      expect.not.stringContaining('secret'),
    ]);
  });
});
