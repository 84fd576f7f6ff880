import { describe, expect, it } from 'vitest';
import {
  audiencesOf,
  checkAudienceAndScope,
  checkClaims,
  checkLifetime,
  scopesOf,
  type ClaimRules,
} from '../../src/auth/claims.js';
import { AuthFailure } from '../../src/auth/failure.js';

const PREFIX = 'https://daml.com/jwt/aud/participant/';
const base: ClaimRules = { maxTokenLifetimeSeconds: 300, clockToleranceSeconds: 5 };

function outcome(run: () => unknown): string {
  try {
    run();
    return 'ok';
  } catch (error) {
    if (error instanceof AuthFailure) return error.reason;
    throw error;
  }
}

describe('Canton default parsing (no issuer audience or scope)', () => {
  it.each([
    ['one participant audience', { aud: `${PREFIX}participant1` }, 'ok'],
    ['a participant audience among others', { aud: ['https://other', `${PREFIX}participant1`] }, 'ok'],
    ['two participant audiences', { aud: [`${PREFIX}p1`, `${PREFIX}p2`] }, 'audience'],
    ['the same participant twice (Canton counts entries)', { aud: [`${PREFIX}p1`, `${PREFIX}p1`] }, 'audience'],
    ['an empty participant id', { aud: PREFIX }, 'audience'],
    ['the ledger scope', { scope: 'openid daml_ledger_api' }, 'ok'],
    ['the ledger scope in scp', { scp: ['daml_ledger_api'] }, 'ok'],
    ['the ledger scope and one aud', { scope: 'daml_ledger_api', aud: 'participant1' }, 'ok'],
    ['the ledger scope and two aud', { scope: 'daml_ledger_api', aud: ['a', 'b'] }, 'audience'],
    ['neither', { aud: 'https://other', scope: 'openid' }, 'scope'],
    ['nothing', {}, 'scope'],
  ])('%s', (_name, claims, expected) => {
    expect(outcome(() => checkAudienceAndScope(claims, base))).toBe(expected);
  });

  it("with auth.participantId, the participant audience (or a scope token's aud) must name it", () => {
    const rules = { ...base, participantId: 'participant1' };
    expect(outcome(() => checkAudienceAndScope({ aud: `${PREFIX}participant1` }, rules))).toBe('ok');
    expect(outcome(() => checkAudienceAndScope({ aud: `${PREFIX}participant2` }, rules))).toBe('audience');
    expect(outcome(() => checkAudienceAndScope({ scope: 'daml_ledger_api', aud: 'participant2' }, rules))).toBe(
      'audience',
    );
    expect(outcome(() => checkAudienceAndScope({ scope: 'daml_ledger_api' }, rules))).toBe('ok');
  });
});

describe('issuer audience and scope (Canton target-audience / target-scope)', () => {
  it('requires the configured audience in aud, ignoring the default parsing', () => {
    const rules = { ...base, audience: 'https://ledger.example/api' };
    expect(outcome(() => checkAudienceAndScope({ aud: ['x', 'https://ledger.example/api'] }, rules))).toBe('ok');
    expect(outcome(() => checkAudienceAndScope({ aud: `${PREFIX}participant1` }, rules))).toBe('audience');
  });

  it('requires the configured scope in scope or scp', () => {
    const rules = { ...base, scope: 'ledger' };
    expect(outcome(() => checkAudienceAndScope({ scope: 'a ledger b' }, rules))).toBe('ok');
    expect(outcome(() => checkAudienceAndScope({ scp: ['ledger'] }, rules))).toBe('ok');
    expect(outcome(() => checkAudienceAndScope({ scope: 'daml_ledger_api' }, rules))).toBe('scope');
  });

  it('requires both when both are set', () => {
    const rules = { ...base, audience: 'aud-x', scope: 'scope-y' };
    expect(outcome(() => checkAudienceAndScope({ aud: 'aud-x', scope: 'scope-y' }, rules))).toBe('ok');
    expect(outcome(() => checkAudienceAndScope({ aud: 'aud-x' }, rules))).toBe('scope');
  });
});

describe('the kind of an accepted token (Canton 3.7 drops scope-based tokens)', () => {
  it('audience when an audience admitted it, scope when a scope did', () => {
    expect(checkAudienceAndScope({ aud: `${PREFIX}participant1`, scope: 'daml_ledger_api' }, base)).toBe('audience');
    expect(checkAudienceAndScope({ scope: 'openid daml_ledger_api' }, base)).toBe('scope');
    expect(checkAudienceAndScope({ scp: ['daml_ledger_api'], aud: 'participant1' }, base)).toBe('scope');
    expect(checkAudienceAndScope({ aud: 'aud-x' }, { ...base, audience: 'aud-x' })).toBe('audience');
    expect(checkAudienceAndScope({ aud: 'aud-x', scope: 's' }, { ...base, audience: 'aud-x', scope: 's' })).toBe(
      'audience',
    );
    expect(checkAudienceAndScope({ scope: 'ledger' }, { ...base, scope: 'ledger' })).toBe('scope');
    const now = 1_000_000;
    expect(checkClaims({ sub: 'alice', exp: now + 60, scope: 'daml_ledger_api' }, base, now).kind).toBe('scope');
  });
});

describe('claim shapes', () => {
  it('reads aud and scopes as Canton does', () => {
    expect(audiencesOf({ aud: null })).toEqual([]);
    expect(audiencesOf({ aud: 'a' })).toEqual(['a']);
    expect(() => audiencesOf({ aud: 5 })).toThrow(AuthFailure);
    expect(scopesOf({ scope: 'a b' })).toEqual(['a', 'b']);
    expect(scopesOf({ scp: 'a' })).toEqual(['a']);
    expect(scopesOf({ scope: ['x'], scp: ['y'] })).toEqual(['y']);
  });
});

describe('lifetime and expiry', () => {
  const now = 1_800_000_000;

  it('limits the remaining lifetime, not exp - iat (Canton checkTokenLifeTime)', () => {
    expect(outcome(() => checkLifetime(now + 300, now, base))).toBe('ok');
    expect(outcome(() => checkLifetime(now + 305, now, base))).toBe('ok'); // within the clock tolerance
    expect(outcome(() => checkLifetime(now + 306, now, base))).toBe('lifetime');
    expect(outcome(() => checkLifetime(now + 10 ** 9, now, { ...base, maxTokenLifetimeSeconds: 0 }))).toBe('ok');
  });

  it('requires exp and sub, refuses an expired token and an iat in the future', () => {
    const claims = { aud: `${PREFIX}p1`, sub: 'alice', iat: now };
    expect(checkClaims({ ...claims, exp: now + 60 }, base, now)).toEqual({
      subject: 'alice',
      expiresAt: now + 60,
      kind: 'audience',
    });
    expect(outcome(() => checkClaims(claims, base, now))).toBe('no_expiry');
    expect(outcome(() => checkClaims({ ...claims, exp: 'soon' }, base, now))).toBe('malformed');
    expect(outcome(() => checkClaims({ ...claims, exp: now - 6 }, base, now))).toBe('expired');
    expect(outcome(() => checkClaims({ ...claims, exp: now + 60, iat: now + 60 }, base, now))).toBe('not_yet_valid');
    expect(outcome(() => checkClaims({ ...claims, exp: now + 60, sub: '' }, base, now))).toBe('subject');
    expect(outcome(() => checkClaims({ aud: `${PREFIX}p1`, exp: now + 60 }, base, now))).toBe('subject');
  });
});
