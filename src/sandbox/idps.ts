// Identity provider configs: POST/GET /v2/idps, GET/DELETE/PATCH /v2/idps/{idp-id}.
// Validation order and texts of ApiIdentityProviderConfigService and its update mapper (Canton
// `ApiIdentityProviderConfigService.scala`, `IdentityProviderConfigUpdateMapper.scala`);
// the PATCH path/body equality check belongs to the JSON layer (JsIdentityProviderService.updateIdp).

import type { FastifyInstance, FastifyRequest } from 'fastify';
import { bodyObject, optionalObject, relaxedBoolean, relaxedString, relaxedStringArray } from './decode.js';
import { invalidArgument, invalidField, missingField, SandboxError } from './errors.js';
import { jsonBodyOf } from './http-conventions.js';
import type { JsonObject } from './json.js';
import type { IdentityProviderConfig, SandboxState } from './state.js';

const RESOURCE = 'IDENTITY_PROVIDER_CONFIG';
const LEDGER_STRING_CHAR = /[A-Za-z0-9#:\-_ ]/;
const LEDGER_STRING_MAX = 255;
/**
 * Proto field names an update mask may name (Canton `UpdateRequestsPaths.scala`); `identity_provider_id` is
 * accepted but changes nothing.
 */
const UPDATABLE_PATHS = new Set(['identity_provider_id', 'is_deactivated', 'issuer', 'jwks_url', 'audience']);
const JAVA_URL_PROTOCOLS = new Set(['http', 'https', 'file', 'ftp', 'jar']);

function requireIdentityProviderId(value: string): string {
  if (value === '') throw missingField('identity_provider_id');
  if (value.length > LEDGER_STRING_MAX)
    throw invalidField('identity_provider_id', `Daml-LF Ledger String is too long (max: ${LEDGER_STRING_MAX})`);
  for (const char of value) {
    if (!LEDGER_STRING_CHAR.test(char)) {
      const code = `0x${(char.codePointAt(0) ?? 0).toString(16)}`;
      throw invalidField('identity_provider_id', `non expected character ${code} in Daml-LF Ledger String "${value}"`);
    }
  }
  return value;
}

/** Why java.net.URL would refuse this string (Canton's JwksUrl.fromString), or undefined. */
function javaUrlProblem(raw: string): string | undefined {
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(raw)?.[1];
  if (scheme === undefined) return `no protocol: ${raw}`;
  if (!JAVA_URL_PROTOCOLS.has(scheme.toLowerCase())) return `unknown protocol: ${scheme.toLowerCase()}`;
  return URL.canParse(raw) ? undefined : `invalid URL: ${raw}`;
}

function requireJwksUrl(raw: string): string {
  if (raw === '') throw missingField('jwks_url');
  const problem = javaUrlProblem(raw);
  if (problem !== undefined) throw invalidField('jwks_url', `Malformed URL: ${problem}`);
  return raw;
}

function readConfig(config: JsonObject): IdentityProviderConfig {
  const path = 'identityProviderConfig';
  return {
    identityProviderId: relaxedString(config, 'identityProviderId', path),
    isDeactivated: relaxedBoolean(config, 'isDeactivated', path),
    issuer: relaxedString(config, 'issuer', path),
    jwksUrl: relaxedString(config, 'jwksUrl', path),
    audience: relaxedString(config, 'audience', path),
  };
}

function notFound(operation: string, id: string): SandboxError {
  return new SandboxError('IDP_CONFIG_NOT_FOUND', `${operation} failed for unknown identity provider id="${id}"`, {
    resources: [[RESOURCE, id]],
  });
}

function issuerTaken(operation: string, issuer: string): SandboxError {
  return new SandboxError(
    'IDP_CONFIG_ISSUER_ALREADY_EXISTS',
    `${operation} failed, as identity provider with issuer "${issuer}" already exists`,
    { resources: [[RESOURCE, issuer]] },
  );
}

function issuerUsedElsewhere(state: SandboxState, issuer: string, exceptId: string): boolean {
  return [...state.identityProviders.values()].some(
    (idp) => idp.issuer === issuer && idp.identityProviderId !== exceptId,
  );
}

export function createIdentityProvider(state: SandboxState, body: JsonObject): JsonObject {
  const configJson = optionalObject(body, 'identityProviderConfig', '');
  if (configJson === undefined) throw missingField('identity_provider_config');
  const config = readConfig(configJson);
  requireIdentityProviderId(config.identityProviderId);
  requireJwksUrl(config.jwksUrl);
  if (config.issuer === '') throw missingField('issuer');
  const operation = 'creating identity provider config';
  if (state.identityProviders.has(config.identityProviderId)) {
    throw new SandboxError(
      'IDP_CONFIG_ALREADY_EXISTS',
      `${operation} failed, as identity provider "${config.identityProviderId}" already exists`,
      { resources: [[RESOURCE, config.identityProviderId]] },
    );
  }
  if (issuerUsedElsewhere(state, config.issuer, config.identityProviderId)) throw issuerTaken(operation, config.issuer);
  state.identityProviders.set(config.identityProviderId, config);
  return { identityProviderConfig: { ...config } };
}

/** Scala's toString of the decoded Option[IdentityProviderConfig], as quoted in the mismatch cause. */
function describeBodyConfig(configJson: JsonObject | undefined): string {
  if (configJson === undefined) return 'None';
  const config = readConfig(configJson);
  return `Some(IdentityProviderConfig(${config.identityProviderId},${config.isDeactivated},${config.issuer},${config.jwksUrl},${config.audience}))`;
}

function invalidUpdate(id: string, reason: string): SandboxError {
  return new SandboxError(
    'INVALID_IDENTITY_PROVIDER_UPDATE_REQUEST',
    `Update operation for identity provider config '${id}' failed due to: ${reason}`,
    { resources: [[RESOURCE, id]] },
  );
}

function validateUpdatePaths(id: string, paths: readonly string[]): void {
  if (paths.length === 0) throw invalidUpdate(id, 'The update mask contains no entries');
  const seen = new Set<string>();
  for (const path of paths) {
    if (!UPDATABLE_PATHS.has(path)) throw invalidUpdate(id, `The update path: '${path}' points to an unknown field.`);
    if (seen.has(path)) throw invalidUpdate(id, `The update path: '${path}' is duplicated.`);
    seen.add(path);
  }
}

export function updateIdentityProvider(state: SandboxState, pathId: string, body: JsonObject): JsonObject {
  const configJson = optionalObject(body, 'identityProviderConfig', '');
  if (configJson === undefined || readConfig(configJson).identityProviderId !== pathId) {
    throw invalidArgument(`${pathId} does not match idp in body: ${describeBodyConfig(configJson)}`, 'json-layer');
  }
  const requested = readConfig(configJson);
  const id = requireIdentityProviderId(requested.identityProviderId);
  if (requested.jwksUrl !== '') requireJwksUrl(requested.jwksUrl);
  const mask = optionalObject(body, 'updateMask', '');
  if (mask === undefined) throw missingField('update_mask');
  const paths = relaxedStringArray(mask, 'paths', 'updateMask');
  validateUpdatePaths(id, paths);

  const operation = 'updating identity provider config';
  const existing = state.identityProviders.get(id);
  if (existing === undefined) throw notFound(operation, id);
  const updated: IdentityProviderConfig = { ...existing };
  // Empty issuer/jwks_url in the mask mean "no change"; an empty audience clears it (the mapper).
  if (paths.includes('is_deactivated')) updated.isDeactivated = requested.isDeactivated;
  if (paths.includes('issuer') && requested.issuer !== '') updated.issuer = requested.issuer;
  if (paths.includes('jwks_url') && requested.jwksUrl !== '') updated.jwksUrl = requested.jwksUrl;
  if (paths.includes('audience')) updated.audience = requested.audience;
  if (updated.issuer !== existing.issuer && issuerUsedElsewhere(state, updated.issuer, id))
    throw issuerTaken(operation, updated.issuer);
  state.identityProviders.set(id, updated);
  return { identityProviderConfig: { ...updated } };
}

function idpIdParam(request: FastifyRequest): string {
  return (request.params as { idpId: string }).idpId;
}

export function registerIdentityProviderRoutes(app: FastifyInstance, state: SandboxState): void {
  app.post('/v2/idps', async (request) => createIdentityProvider(state, bodyObject(jsonBodyOf(request))));

  app.get('/v2/idps', async () => ({
    identityProviderConfigs: [...state.identityProviders.values()].map((idp) => ({ ...idp })),
  }));

  app.get('/v2/idps/:idpId', async (request) => {
    const id = requireIdentityProviderId(idpIdParam(request));
    const idp = state.identityProviders.get(id);
    if (idp === undefined) throw notFound('getting identity provider config', id);
    return { identityProviderConfig: { ...idp } };
  });

  app.delete('/v2/idps/:idpId', async (request) => {
    const id = requireIdentityProviderId(idpIdParam(request));
    if (!state.identityProviders.delete(id)) throw notFound('deleting identity provider config', id);
    return {};
  });

  app.patch('/v2/idps/:idpId', async (request) =>
    updateIdentityProvider(state, idpIdParam(request), bodyObject(jsonBodyOf(request))),
  );
}
