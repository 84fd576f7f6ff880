import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  idpIdOf,
  splitUpdatePath,
  updateIdentityProviderConfigRule,
  updateMaskProblem,
} from '../../../src/policy/rules/update-identity-provider-config.js';
import { spacing, toJsonText, requestBodiesPerVersion } from '../support/openapi-arbitrary.js';
import { codeOf, judge } from '../support/judge.js';
import { idpRefinements } from '../support/refinements.js';

const check = (body: unknown, idpId = 'idp-1') =>
  judge(updateIdentityProviderConfigRule, body, { path: `/v2/idps/${encodeURIComponent(idpId)}` });
const config = (extra: Record<string, unknown> = {}) => ({
  identityProviderId: 'idp-1',
  isDeactivated: true,
  issuer: '',
  jwksUrl: '',
  audience: '',
  ...extra,
});
const PREFIX = "Update operation for identity provider config 'idp-1' failed due to: ";

describe('updateIdentityProviderConfig rule', () => {
  it("accepts Canton's own test request (JsonV2Tests)", () => {
    expect(check({ identityProviderConfig: config(), updateMask: { paths: ['is_deactivated'] } })).toBeUndefined();
  });

  it("requires the body's identityProviderId to be the path's idp-id, as the JSON layer does", () => {
    const mismatch = check({
      identityProviderConfig: config({ identityProviderId: 'idp-2' }),
      updateMask: { paths: ['issuer'] },
    });
    expect(mismatch).toMatchObject({
      definition: { code: 'INVALID_ARGUMENT' },
      cause:
        'The submitted request has invalid arguments: idp-1 does not match idp in body: Some(IdentityProviderConfig(idp-2,true,,,))',
    });
    expect(check({ updateMask: { paths: ['issuer'] } })?.cause).toBe(
      'The submitted request has invalid arguments: idp-1 does not match idp in body: None',
    );
    expect(codeOf(check({ identityProviderConfig: { isDeactivated: true }, updateMask: { paths: ['issuer'] } }))).toBe(
      'INVALID_ARGUMENT',
    );
  });

  it('compares with the percent-decoded path parameter', () => {
    const id = 'idp-id-#:-_ 92d9';
    expect(
      check({ identityProviderConfig: config({ identityProviderId: id }), updateMask: { paths: ['issuer'] } }, id),
    ).toBeUndefined();
    expect(
      codeOf(
        judge(updateIdentityProviderConfigRule, { identityProviderConfig: config() }, { path: '/v2/idps/%E0%A4%A' }),
      ),
    ).toBe('INVALID_FIELD');
    // The path as the route catalogue matched it: encoded unreserved characters, a trailing slash.
    expect(idpIdOf('/v2/%69dps/idp%2D1/')).toBe('idp-1');
    expect(idpIdOf('/v2/idps/a%2Fb')).toBe('a/b');
  });

  it('requires an update mask: MISSING_FIELD update_mask', () => {
    expect(check({ identityProviderConfig: config() })).toMatchObject({
      cause: 'The submitted command is missing a mandatory field: update_mask',
      context: { field_name: 'update_mask' },
    });
  });

  it("answers mask problems with Canton's cause texts and resource", () => {
    const withPaths = (paths: unknown) => check({ identityProviderConfig: config(), updateMask: { paths } });
    expect(withPaths([])).toMatchObject({
      definition: { code: 'INVALID_IDENTITY_PROVIDER_UPDATE_REQUEST' },
      cause: `${PREFIX}The update mask contains no entries`,
      resources: [['ErrorResource(IDENTITY_PROVIDER_CONFIG)', 'idp-1']],
    });
    expect(check({ identityProviderConfig: config(), updateMask: {} })?.cause).toBe(
      `${PREFIX}The update mask contains no entries`,
    );
    expect(withPaths(['jwksUrl'])?.cause).toBe(`${PREFIX}The update path: 'jwksUrl' points to an unknown field.`);
    expect(withPaths(['issuer', 'audience', 'issuer'])?.cause).toBe(
      `${PREFIX}The update path: 'issuer' is duplicated.`,
    );
    expect(withPaths(['issuer', 'issuer', 'nope'])?.cause).toBe(
      `${PREFIX}The update path: 'nope' points to an unknown field.`,
    );
    expect(withPaths(['is_deactivated', 'issuer', 'jwks_url', 'audience', 'identity_provider_id'])).toBeUndefined();
    expect(codeOf(withPaths('issuer'))).toBe('DECODE_FAILURE');
    expect(codeOf(withPaths([1]))).toBe('DECODE_FAILURE');
  });

  it('parses update paths as Canton does (Java split on ".")', () => {
    expect(splitUpdatePath('issuer')).toEqual(['issuer']);
    expect(splitUpdatePath('issuer.')).toEqual(['issuer']);
    expect(splitUpdatePath('.')).toEqual([]);
    expect(splitUpdatePath('')).toEqual(['']);
    expect(splitUpdatePath('.issuer')).toEqual(['', 'issuer']);
    expect(updateMaskProblem(['issuer.'])).toBeUndefined();
    expect(updateMaskProblem(['issuer.', 'issuer'])).toBe("The update path: 'issuer' is duplicated.");
    expect(updateMaskProblem(['.'])).toBeUndefined(); // the trie's root: Canton accepts it as a no-op
    expect(updateMaskProblem([''])).toBe("The update path: '' points to an unknown field.");
    expect(updateMaskProblem(['issuer.sub'])).toBe("The update path: 'issuer.sub' points to an unknown field.");
    const long = 'x'.repeat(60);
    expect(updateMaskProblem([long])).toBe(`The update path: '${'x'.repeat(50)}...' points to an unknown field.`);
  });

  it('leaves a malformed jwksUrl to the participant, which answers it itself (INVALID_FIELD jwks_url)', () => {
    const withUrl = (jwksUrl: string, paths = ['jwks_url']) =>
      check({ identityProviderConfig: config({ jwksUrl }), updateMask: { paths } });
    for (const url of ['https://idp.example/jwks', '', 'not a url', 'idp.example/jwks', 'http://x/%zz', ':foo']) {
      expect(withUrl(url), url).toBeUndefined();
    }
    // The mask is still judged, whatever the URL.
    expect(codeOf(withUrl('not a url', ['jwksUrl']))).toBe('INVALID_IDENTITY_PROVIDER_UPDATE_REQUEST');
  });

  it('refuses wrong JSON types with the field path', () => {
    expect(
      check({ identityProviderConfig: config({ isDeactivated: 'true' }), updateMask: { paths: ['issuer'] } })?.cause,
    ).toBe("Got value with wrong type, expecting boolean at 'identityProviderConfig.isDeactivated'");
    expect(codeOf(check({ identityProviderConfig: [], updateMask: { paths: ['issuer'] } }))).toBe('DECODE_FAILURE');
    expect(codeOf(check({ identityProviderConfig: config(), updateMask: 'issuer' }))).toBe('DECODE_FAILURE');
  });

  describe('property: bodies generated from the OpenAPI schema', () => {
    for (const { version, bodies } of requestBodiesPerVersion('patch', '/v2/idps/{idp-id}', idpRefinements)) {
      const idOf = (body: unknown) =>
        (body as { identityProviderConfig: { identityProviderId: string } }).identityProviderConfig.identityProviderId;

      it(`${version}: every valid body passes`, () => {
        fc.assert(
          fc.property(bodies, spacing, (body, space) => check(toJsonText(body, space), idOf(body)) === undefined),
          { numRuns: 300 },
        );
      });

      it(`${version}: every generated violation is refused with the right code`, () => {
        type Body = { identityProviderConfig: Record<string, unknown>; updateMask: Record<string, unknown> };
        const mutations: Array<[string, (body: Body) => unknown, string]> = [
          [
            'another id',
            (b) => ({
              ...b,
              identityProviderConfig: { ...b.identityProviderConfig, identityProviderId: `${idOf(b)}-other` },
            }),
            'INVALID_ARGUMENT',
          ],
          ['no config', ({ identityProviderConfig: _config, ...b }) => b, 'INVALID_ARGUMENT'],
          ['no mask', ({ updateMask: _mask, ...b }) => b, 'MISSING_FIELD'],
          ['an empty mask', (b) => ({ ...b, updateMask: { paths: [] } }), 'INVALID_IDENTITY_PROVIDER_UPDATE_REQUEST'],
          [
            'a camelCase path',
            (b) => ({ ...b, updateMask: { paths: ['isDeactivated'] } }),
            'INVALID_IDENTITY_PROVIDER_UPDATE_REQUEST',
          ],
          [
            'a repeated path',
            (b) => ({ ...b, updateMask: { paths: ['audience', 'audience'] } }),
            'INVALID_IDENTITY_PROVIDER_UPDATE_REQUEST',
          ],
        ];
        fc.assert(
          fc.property(bodies, fc.constantFrom(...mutations), (body, [, mutate, code]) => {
            expect(codeOf(check(toJsonText(mutate(body as Body)), idOf(body)))).toBe(code);
          }),
          { numRuns: 200 },
        );
      });
    }
  });
});
