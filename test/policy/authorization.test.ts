import { describe, expect, it } from 'vitest';
import { loadConfig, validateGatewayConfig } from '../../src/config/load.js';
import { createAuthorizer, policyConfigProblems, ruleMatches, scopesOf } from '../../src/policy/authorization.js';
import { createCorsHandler } from '../../src/policy/cors.js';
import { BodyBudget } from '../../src/body/budget.js';
import { createLargeBodyPool, LARGE_BODY_POOL } from '../../src/policy/large-body-pool.js';
import { createPolicyStage } from '../../src/policy/stage.js';
import { principal } from './support/judge.js';

const config = (policy: unknown, cors: unknown = {}) =>
  validateGatewayConfig({ upstream: { url: 'http://127.0.0.1:1' }, policy, cors });

describe('authorization rules', () => {
  const authorize = createAuthorizer(
    config({
      rules: {
        updateVettedPackages: [{ scope: 'ledger:admin' }],
        submitAndWaitForTransaction: [{ effect: 'deny', subjects: ['mallory'] }, { subjects: ['alice', 'bob'] }],
        getUpdateByOffset: [{ issuers: ['https://idp.test'], claims: { tenant: 'acme' } }],
        getVersion: [{ anyAuthenticated: true }],
      },
    }).policy.rules,
  );

  it('lets any caller through an operation without rules', () => {
    expect(authorize('getV2Parties', principal('anyone'))).toEqual({ allowed: true });
    expect(authorize('getV2Parties', null)).toEqual({ allowed: true });
  });

  it('allows a token whose scope holds the required one, in `scope` or `scp`', () => {
    expect(authorize('updateVettedPackages', principal('ops', { scope: 'daml_ledger_api ledger:admin' })).allowed).toBe(
      true,
    );
    expect(authorize('updateVettedPackages', principal('ops', { scp: ['ledger:admin'] })).allowed).toBe(true);
    expect(
      authorize('updateVettedPackages', principal('ops', { scope: 'daml_ledger_api ledger:admins' })).allowed,
    ).toBe(false);
    expect(authorize('updateVettedPackages', principal('ops')).allowed).toBe(false);
  });

  it('decides by the first matching rule, deny included, and fails closed', () => {
    expect(authorize('submitAndWaitForTransaction', principal('alice')).allowed).toBe(true);
    expect(authorize('submitAndWaitForTransaction', principal('mallory'))).toEqual({
      allowed: false,
      reason: 'policy.rules.submitAndWaitForTransaction[0] denies the caller',
    });
    expect(authorize('submitAndWaitForTransaction', principal('carol'))).toEqual({
      allowed: false,
      reason: 'no rule in policy.rules.submitAndWaitForTransaction allows the caller',
    });
    expect(authorize('submitAndWaitForTransaction', null).allowed).toBe(false);
  });

  it('requires every matcher of a rule', () => {
    expect(authorize('getUpdateByOffset', principal('alice', { tenant: 'acme' })).allowed).toBe(true);
    expect(authorize('getUpdateByOffset', principal('alice', { tenant: ['x', 'acme'] })).allowed).toBe(true);
    expect(authorize('getUpdateByOffset', principal('alice', { tenant: 'other' })).allowed).toBe(false);
    expect(
      authorize('getUpdateByOffset', { subject: 'alice', issuer: 'https://other', claims: { tenant: 'acme' } }).allowed,
    ).toBe(false);
  });

  it('matches the audience in a string or an array', () => {
    expect(ruleMatches({ effect: 'allow', audience: 'x' }, principal('a', { aud: 'x' }))).toBe(true);
    expect(ruleMatches({ effect: 'allow', audience: 'x' }, principal('a', { aud: ['y', 'x'] }))).toBe(true);
    expect(ruleMatches({ effect: 'allow', audience: 'x' }, principal('a', { aud: 'y' }))).toBe(false);
    expect(ruleMatches({ effect: 'allow', claims: { toString: 'x' } }, principal('a'))).toBe(false); // inherited members are no claims
  });

  it('reads scopes as Canton does', () => {
    expect(scopesOf({ scope: 'a  b' })).toEqual(['a', 'b']);
    expect(scopesOf({ scp: 'a' })).toEqual(['a']);
    expect(scopesOf({ scp: ['a', 1] })).toEqual(['a']);
    expect(scopesOf({})).toEqual([]);
  });
});

describe('policy configuration', () => {
  it('is valid by default: no rules, request rules on, CORS off', () => {
    const defaults = config({});
    expect(defaults.policy).toEqual({
      rules: {},
      sources: [],
      requestRules: true,
      maxBodyDepth: 512,
      bodyReadTimeoutMs: 30_000,
    });
    expect(defaults.cors.enabled).toBe(false);
    expect(policyConfigProblems(defaults)).toEqual([]);
    expect(createCorsHandler(defaults.cors)).toBeUndefined();
  });

  it('stops the start on an unknown operation name or a rule without a matcher, naming the key path', () => {
    const bad = config(
      { rules: { updateVetedPackages: [{ scope: 'x' }], getVersion: [{ effect: 'deny' }, { claims: {} }] } },
      { enabled: true, origins: ['*'], credentials: true },
    );
    expect(policyConfigProblems(bad)).toEqual([
      'policy.rules.updateVetedPackages: unknown operation (see docs/request-policy.md "Routes and operations" for the names)',
      'policy.rules.getVersion[0]: the rule has no matcher (one of anyAuthenticated, subjects, issuers, scope, audience, claims)',
      'policy.rules.getVersion[1]: the rule has no matcher (one of anyAuthenticated, subjects, issuers, scope, audience, claims)',
      'cors.origins: "*" cannot be combined with cors.credentials: true (browsers refuse it); list the origins',
    ]);
    expect(() =>
      createPolicyStage(bad.policy, bad.limits, {
        bodyBudget: new BodyBudget(bad.limits),
        isTrustedProxy: () => false,
        largeBodies: createLargeBodyPool(LARGE_BODY_POOL), // never started: the stage refuses the config first
      }),
    ).toThrow(/invalid configuration \(policy\)[\s\S]*policy\.rules\.updateVetedPackages: unknown operation/);
  });

  it('refuses malformed rules at load: unknown matcher keys, empty lists, anyAuthenticated: false', () => {
    expect(() => config({ rules: { getVersion: [{ role: 'admin' }] } })).toThrow(
      /policy\.rules\.getVersion\[0\]\.role: unknown key/,
    );
    expect(() => config({ rules: { getVersion: [] } })).toThrow(/policy\.rules\.getVersion/);
    expect(() => config({ rules: { getVersion: [{ subjects: [] }] } })).toThrow(/subjects/);
    expect(() => config({ rules: { getVersion: [{ anyAuthenticated: false }] } })).toThrow(/anyAuthenticated/);
    expect(() => config({ rules: { getVersion: [{ scope: 'two scopes' }] } })).toThrow(/scope/);
  });

  it('ships a valid example (config/policy.example.yaml)', () => {
    const example = loadConfig(new URL('../../config/policy.example.yaml', import.meta.url).pathname, {});
    expect(policyConfigProblems(example)).toEqual([]);
    const authorize = createAuthorizer(example.policy.rules);
    expect(authorize('updateVettedPackages', principal('ops', { scope: 'ledger:admin' })).allowed).toBe(true);
    expect(authorize('updateIdentityProviderConfig', principal('ops', { scope: 'daml_ledger_api' })).allowed).toBe(
      false,
    );
    expect(authorize('submitAndWaitForTransaction', principal('bob')).allowed).toBe(true);
    expect(authorize('submitAndWaitForTransaction', principal('carol')).allowed).toBe(false);
    expect(authorize('getV2Parties', principal('carol')).allowed).toBe(true);
  });
});
