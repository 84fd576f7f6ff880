// The submitting user on every submission route: a userId naming another user than the token's is
// refused (redacted PERMISSION_DENIED) where Canton's authorizer refuses it (MatchUserId); absent or
// empty (the participant takes the token's user), or the token's own, it passes.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { matchOperation } from '../../../src/operations.js';
import { REQUEST_RULES } from '../../../src/policy/rules/index.js';
import type { RequestRule, RuleContext } from '../../../src/policy/violation.js';
import {
  SPEC_VERSIONS,
  loadSpec,
  requestSchemaName,
  spacing,
  toJsonText,
  requestBodies,
} from '../support/openapi-arbitrary.js';
import { codeOf, judge, principal } from '../support/judge.js';
import { submitRefinements } from '../support/refinements.js';

/** Each submission route and where its body holds the userId ('' = at the top level). */
const SUBMISSIONS: ReadonlyArray<[path: string, holder: string]> = [
  ['/v2/commands/submit-and-wait', ''],
  ['/v2/commands/submit-and-wait-for-transaction', 'commands'],
  ['/v2/commands/submit-and-wait-for-transaction-tree', ''],
  ['/v2/commands/submit-and-wait-for-reassignment', 'reassignmentCommands'],
  ['/v2/commands/async/submit', ''],
  ['/v2/commands/async/submit-reassignment', 'reassignmentCommands'],
  ['/v2/interactive-submission/prepare', ''],
  ['/v2/interactive-submission/execute', ''],
  ['/v2/interactive-submission/executeAndWait', ''],
  ['/v2/interactive-submission/executeAndWaitForTransaction', ''],
];

/**
 * Routes whose body has a userId that names no submitter: whose completions to read, whose rights to
 * change, whom to give a new party (admin calls, the path's user).
 */
const NOT_SUBMISSIONS = new Set([
  'post /v2/commands/completions',
  'post /v2/parties',
  'post /v2/parties/external/allocate',
  'post /v2/users/{user-id}/rights',
  'patch /v2/users/{user-id}/rights',
  'patch /v2/users/{user-id}/identity-provider-id',
]);

function ruleOf(path: string): RequestRule {
  const rule = REQUEST_RULES.get(matchOperation('POST', path)!.name);
  if (rule === undefined) throw new Error(`no request rule for POST ${path}`);
  return rule;
}

type Body = Record<string, unknown>;
/** The body with its userId set (undefined: removed). */
function withUserId(body: Body, holder: string, userId: string | undefined): Body {
  const set = (target: Body) => {
    const { userId: _previous, ...rest } = target;
    return userId === undefined ? rest : { ...rest, userId };
  };
  return holder === '' ? set(body) : { ...body, [holder]: set(body[holder] as Body) };
}

describe('submitting user', () => {
  it('every route of the specs whose body names a submitter has the rule', () => {
    for (const version of SPEC_VERSIONS) {
      const spec = loadSpec(version);
      for (const [path, methods] of Object.entries(spec.paths)) {
        for (const method of Object.keys(methods)) {
          if (methods[method]?.requestBody?.content['application/json'] === undefined) continue;
          const schema = spec.schemas[requestSchemaName(spec, method, path)]!;
          const holders = Object.entries(schema.properties ?? {}).filter(
            ([name, property]) =>
              name === 'userId' ||
              (property.$ref !== undefined &&
                spec.schemas[property.$ref.split('/').pop()!]?.properties?.userId !== undefined),
          );
          if (holders.length === 0 || NOT_SUBMISSIONS.has(`${method} ${path}`)) continue;
          const holder = holders[0]![0] === 'userId' ? '' : holders[0]![0];
          expect(SUBMISSIONS, `${version}: ${method} ${path}`).toContainEqual([path, holder]);
        }
      }
    }
  });

  /** The smallest body each rule gets past its other checks with (only submitAndWaitForTransaction has any). */
  const minimal = (holder: string): Body =>
    holder === 'commands'
      ? {
          commands: {
            commands: [{ CreateCommand: { templateId: 'pkg:Mod:Ent', createArguments: {} } }],
            commandId: 'c1',
            actAs: ['Alice::1220'],
          },
        }
      : holder === ''
        ? {}
        : { [holder]: {} };

  for (const [path, holder] of SUBMISSIONS) {
    const base = minimal(holder);
    const check = (body: Body, who: RuleContext['principal'] = principal('alice')) =>
      judge(ruleOf(path), body, { principal: who });

    it(`POST ${path}: refuses another user's userId, redacted; lets the token's own, an empty or an absent one through`, () => {
      const violation = check(withUserId(base, holder, 'bob'));
      expect(violation).toMatchObject({ definition: { code: 'PERMISSION_DENIED', redacted: true } });
      expect(violation?.cause).not.toContain('bob');
      expect(violation?.reason).not.toContain('bob');
      expect(check(withUserId(base, holder, 'Alice'))?.definition.code).toBe('PERMISSION_DENIED'); // user ids are case-sensitive
      for (const own of ['alice', '', undefined])
        expect(check(withUserId(base, holder, own)), String(own)).toBeUndefined();
      expect(check(withUserId(base, holder, 'bob'), null)).toBeUndefined(); // no principal: the participant decides
    });
  }

  it("leaves what is not a userId string to the participant's decoder", () => {
    const rule = ruleOf('/v2/commands/async/submit');
    for (const body of [
      { userId: 7 },
      { userId: null },
      { userId: ['bob'] },
      { userId: { id: 'bob' } },
      { commands: { userId: 'bob' } },
    ]) {
      expect(judge(rule, body, { principal: principal('alice') }), JSON.stringify(body)).toBeUndefined();
    }
    const reassignment = ruleOf('/v2/commands/async/submit-reassignment');
    for (const body of [
      { userId: 'bob' },
      { reassignmentCommands: 'bob' },
      { reassignmentCommands: [{ userId: 'bob' }] },
    ]) {
      expect(judge(reassignment, body, { principal: principal('alice') }), JSON.stringify(body)).toBeUndefined();
    }
  });

  describe('property: bodies generated from the OpenAPI schema', () => {
    for (const version of SPEC_VERSIONS) {
      const spec = loadSpec(version);
      for (const [path, holder] of SUBMISSIONS) {
        it(`${version} POST ${path}: the token's own user passes, any other is refused`, () => {
          const bodies = requestBodies(spec, 'post', path, submitRefinements) as fc.Arbitrary<Body>;
          const rule = ruleOf(path);
          const userIds = fc.constantFrom('alice', '', undefined);
          fc.assert(
            fc.property(bodies, userIds, spacing, (body, userId, space) => {
              expect(
                judge(rule, toJsonText(withUserId(body, holder, userId), space), { principal: principal('alice') }),
              ).toBeUndefined();
            }),
            { numRuns: 60 },
          );
          const others = fc.string({ minLength: 1, maxLength: 12 }).filter((id) => id !== 'alice');
          fc.assert(
            fc.property(bodies, others, (body, other) => {
              expect(
                codeOf(judge(rule, toJsonText(withUserId(body, holder, other)), { principal: principal('alice') })),
              ).toBe('PERMISSION_DENIED');
            }),
            { numRuns: 60 },
          );
        });
      }
    }
  });
});
