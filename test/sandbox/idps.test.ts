import { describe, expect, it } from 'vitest';
import { SANDBOX_SEED } from '../../src/sandbox/app.js';
import { expectCantonError, type JsonBody, postJson, readJson, sendJson, withSandbox } from './helpers.js';

const SEEDED = SANDBOX_SEED.identityProvider;
const newIdp = {
  identityProviderId: 'idp-1',
  isDeactivated: false,
  issuer: 'https://issuer.example',
  jwksUrl: 'https://issuer.example/jwks',
  audience: 'aud-1',
};

const patch = (url: string, id: string, body: unknown): Promise<Response> =>
  sendJson(`${url}/v2/idps/${encodeURIComponent(id)}`, 'PATCH', body);

async function createIdp(url: string, config: object = newIdp): Promise<void> {
  const response = await postJson(`${url}/v2/idps`, { identityProviderConfig: config });
  expect(response.status).toBe(200);
}

function expectIdpResource(body: JsonBody, value: string): void {
  expect(body['resources']).toEqual([['ErrorResource(IDENTITY_PROVIDER_CONFIG)', value]]);
}

describe('sandbox identity provider configs', () => {
  it('creates, gets, lists and deletes', async () => {
    await withSandbox(async ({ url }) => {
      const created = await postJson(`${url}/v2/idps`, { identityProviderConfig: newIdp });
      expect(created.status).toBe(200);
      expect(await readJson(created)).toEqual({ identityProviderConfig: newIdp });
      expect(await readJson(await fetch(`${url}/v2/idps/idp-1`))).toEqual({ identityProviderConfig: newIdp });
      expect(await readJson(await fetch(`${url}/v2/idps`))).toEqual({ identityProviderConfigs: [SEEDED, newIdp] });

      const deleted = await fetch(`${url}/v2/idps/idp-1`, { method: 'DELETE' });
      expect(deleted.status).toBe(200);
      expect(await readJson(deleted)).toEqual({});
      const gone = await expectCantonError(await fetch(`${url}/v2/idps/idp-1`), {
        status: 404,
        code: 'IDP_CONFIG_NOT_FOUND',
        category: 11,
      });
      expect(gone['cause']).toBe('getting identity provider config failed for unknown identity provider id="idp-1"');
      expectIdpResource(gone, 'idp-1');
      const deleteAgain = await expectCantonError(await fetch(`${url}/v2/idps/idp-1`, { method: 'DELETE' }), {
        status: 404,
        code: 'IDP_CONFIG_NOT_FOUND',
        category: 11,
      });
      expect(deleteAgain['cause']).toBe(
        'deleting identity provider config failed for unknown identity provider id="idp-1"',
      );
    });
  });

  it('answers 409 for an existing id or issuer', async () => {
    await withSandbox(async ({ url }) => {
      const sameId = await expectCantonError(
        await postJson(`${url}/v2/idps`, {
          identityProviderConfig: { ...newIdp, identityProviderId: SEEDED.identityProviderId },
        }),
        { status: 409, code: 'IDP_CONFIG_ALREADY_EXISTS', category: 10 },
      );
      expect(sameId['cause']).toBe(
        `creating identity provider config failed, as identity provider "${SEEDED.identityProviderId}" already exists`,
      );
      expectIdpResource(sameId, SEEDED.identityProviderId);
      const sameIssuer = await expectCantonError(
        await postJson(`${url}/v2/idps`, { identityProviderConfig: { ...newIdp, issuer: SEEDED.issuer } }),
        { status: 409, code: 'IDP_CONFIG_ISSUER_ALREADY_EXISTS', category: 10 },
      );
      expect(sameIssuer['cause']).toBe(
        `creating identity provider config failed, as identity provider with issuer "${SEEDED.issuer}" already exists`,
      );
      expectIdpResource(sameIssuer, SEEDED.issuer);
    });
  });

  it('validates creation like ApiIdentityProviderConfigService', async () => {
    await withSandbox(async ({ url }) => {
      const missing: Array<[object, string]> = [
        [{}, 'identity_provider_config'],
        [{ identityProviderConfig: { ...newIdp, identityProviderId: '' } }, 'identity_provider_id'],
        [{ identityProviderConfig: { ...newIdp, jwksUrl: '' } }, 'jwks_url'],
        [{ identityProviderConfig: { ...newIdp, issuer: '' } }, 'issuer'],
      ];
      for (const [body, field] of missing) {
        const error = await expectCantonError(await postJson(`${url}/v2/idps`, body), {
          status: 400,
          code: 'MISSING_FIELD',
          category: 8,
        });
        expect(error['context']['field_name']).toBe(field);
      }
      const malformed = await expectCantonError(
        await postJson(`${url}/v2/idps`, { identityProviderConfig: { ...newIdp, jwksUrl: 'not a url' } }),
        { status: 400, code: 'INVALID_FIELD', category: 8 },
      );
      expect(malformed['cause']).toBe(
        'The submitted command has a field with invalid value: Invalid field jwks_url: Malformed URL: no protocol: not a url',
      );
    });
  });

  it('requires the path id to equal the body id (JSON-layer INVALID_ARGUMENT)', async () => {
    await withSandbox(async ({ url }) => {
      const mismatch = await patch(url, SEEDED.identityProviderId, {
        identityProviderConfig: {
          ...SEEDED,
          identityProviderId: 'other',
          isDeactivated: true,
          issuer: '',
          jwksUrl: '',
        },
        updateMask: { paths: ['is_deactivated'] },
      });
      expect(mismatch.status).toBe(400);
      expect(await readJson(mismatch)).toEqual({
        code: 'INVALID_ARGUMENT',
        cause: `The submitted request has invalid arguments: ${SEEDED.identityProviderId} does not match idp in body: Some(IdentityProviderConfig(other,true,,,))`,
        correlationId: null,
        traceId: null,
        context: {},
        resources: [],
        errorCategory: 8,
        grpcCodeValue: 3,
        retryInfo: null,
        definiteAnswer: false,
      });
      const noConfig = await readJson(
        await patch(url, SEEDED.identityProviderId, { updateMask: { paths: ['issuer'] } }),
      );
      expect(noConfig.cause).toBe(
        `The submitted request has invalid arguments: ${SEEDED.identityProviderId} does not match idp in body: None`,
      );
      const emptyId = await patch(url, SEEDED.identityProviderId, {
        identityProviderConfig: { issuer: 'x' },
        updateMask: { paths: ['issuer'] },
      });
      expect((await readJson(emptyId)).definiteAnswer).toBe(false);
    });
  });

  it('rejects a missing or invalid update mask with Canton texts', async () => {
    await withSandbox(async ({ url }) => {
      const id = SEEDED.identityProviderId;
      const config = { identityProviderId: id, issuer: '', jwksUrl: '' };
      const missingMask = await expectCantonError(await patch(url, id, { identityProviderConfig: config }), {
        status: 400,
        code: 'MISSING_FIELD',
        category: 8,
      });
      expect(missingMask['context']['field_name']).toBe('update_mask');

      const reasons: Array<[string[], string]> = [
        [[], 'The update mask contains no entries'],
        [['jwksUrl'], "The update path: 'jwksUrl' points to an unknown field."],
        [['issuer', 'issuer'], "The update path: 'issuer' is duplicated."],
      ];
      for (const [paths, reason] of reasons) {
        const error = await expectCantonError(
          await patch(url, id, { identityProviderConfig: config, updateMask: { paths } }),
          { status: 400, code: 'INVALID_IDENTITY_PROVIDER_UPDATE_REQUEST', category: 8 },
        );
        expect(error['cause']).toBe(`Update operation for identity provider config '${id}' failed due to: ${reason}`);
        expectIdpResource(error, id);
      }
      const badUrl = await expectCantonError(
        await patch(url, id, {
          identityProviderConfig: { ...config, jwksUrl: 'ftp//broken' },
          updateMask: { paths: ['jwks_url'] },
        }),
        { status: 400, code: 'INVALID_FIELD', category: 8 },
      );
      expect(badUrl['context']['field_name']).toBe('jwks_url');
    });
  });

  it('applies the mask with Canton value semantics', async () => {
    await withSandbox(async ({ url }) => {
      await createIdp(url);
      const keepIssuerAndUrl = await patch(url, 'idp-1', {
        identityProviderConfig: { identityProviderId: 'idp-1', issuer: '', jwksUrl: '', audience: '' },
        updateMask: { paths: ['issuer', 'jwks_url', 'audience', 'identity_provider_id'] },
      });
      expect(keepIssuerAndUrl.status).toBe(200);
      expect((await readJson(keepIssuerAndUrl)).identityProviderConfig).toEqual({ ...newIdp, audience: '' });

      const deactivate = await readJson(
        await patch(url, 'idp-1', {
          identityProviderConfig: { identityProviderId: 'idp-1', isDeactivated: true, issuer: 'https://new.example' },
          updateMask: { paths: ['is_deactivated'] },
        }),
      );
      expect(deactivate.identityProviderConfig).toMatchObject({ isDeactivated: true, issuer: newIdp.issuer });

      const reactivateAndMove = await readJson(
        await patch(url, 'idp-1', {
          identityProviderConfig: {
            identityProviderId: 'idp-1',
            issuer: 'https://new.example',
            jwksUrl: 'https://new.example/jwks',
          },
          updateMask: { paths: ['is_deactivated', 'issuer', 'jwks_url'] },
        }),
      );
      expect(reactivateAndMove.identityProviderConfig).toEqual({
        identityProviderId: 'idp-1',
        isDeactivated: false,
        issuer: 'https://new.example',
        jwksUrl: 'https://new.example/jwks',
        audience: '',
      });
      expect((await readJson(await fetch(`${url}/v2/idps/idp-1`))).identityProviderConfig.issuer).toBe(
        'https://new.example',
      );

      const clash = await expectCantonError(
        await patch(url, 'idp-1', {
          identityProviderConfig: { identityProviderId: 'idp-1', issuer: SEEDED.issuer },
          updateMask: { paths: ['issuer'] },
        }),
        { status: 409, code: 'IDP_CONFIG_ISSUER_ALREADY_EXISTS', category: 10 },
      );
      expect(clash['cause']).toBe(
        `updating identity provider config failed, as identity provider with issuer "${SEEDED.issuer}" already exists`,
      );

      const unknown = await expectCantonError(
        await patch(url, 'idp-9', {
          identityProviderConfig: { identityProviderId: 'idp-9' },
          updateMask: { paths: ['audience'] },
        }),
        { status: 404, code: 'IDP_CONFIG_NOT_FOUND', category: 11 },
      );
      expect(unknown['cause']).toBe(
        'updating identity provider config failed for unknown identity provider id="idp-9"',
      );
    });
  });
});
