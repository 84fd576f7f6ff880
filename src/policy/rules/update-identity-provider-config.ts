// PATCH /v2/idps/{idp-id}. In Canton's order: the JSON layer's path/body
// check (`JsIdentityProviderService.updateIdp`), then `ApiIdentityProviderConfigService
// .updateIdentityProviderConfig` (update_mask), then the mask
// (`UpdateMapperBase.makeUpdateTrie`, `UpdatePath.parseSingle`, `UpdatePathsTrie`, `UpdatePathError`).
import { Errors } from '../../errors.js';
import { canonicalPath } from '../../operations.js';
import {
  field,
  invalidField,
  jsonLayerInvalidArgument,
  isAbsent,
  isObject,
  missingField,
  optionalOfType,
  optionalStringArray,
  requestRule,
  wrongType,
  type JsonObject,
  type Violation,
} from '../violation.js';

/** The update paths Canton's trie knows for an identity provider config (snake_case proto names). */
export const IDP_UPDATE_PATHS = ['identity_provider_id', 'is_deactivated', 'jwks_url', 'issuer', 'audience'] as const;

/**
 * The {idp-id} path parameter (the third segment of the path the route catalogue matched),
 * percent-decoded as tapir decodes it; undefined when the encoding is malformed.
 */
export function idpIdOf(path: string): string | undefined {
  const segment = canonicalPath(path).split('/')[3] ?? '';
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** Scala/Java `split('.')`: no separator gives the string itself; trailing empty strings are dropped. */
export function splitUpdatePath(raw: string): string[] {
  const parts = raw.split('.');
  if (parts.length === 1) return parts;
  while (parts.length > 0 && parts[parts.length - 1] === '') parts.pop();
  return parts;
}

/** UpdatePathError shortens long paths to 50 characters and "...". */
function shorten(path: string): string {
  return path.length > 53 ? `${path.slice(0, 50)}...` : path;
}

/** Why the mask is refused, in Canton's words, or undefined when the trie accepts it. */
export function updateMaskProblem(paths: readonly string[]): string | undefined {
  if (paths.length === 0) return 'The update mask contains no entries';
  const parsed = paths.map(splitUpdatePath);
  // UpdatePathsTrie.containsPrefix: every known path is a leaf at the root, so a path is known when
  // it is empty (the root itself) or exactly one known field name.
  for (const fieldPath of parsed) {
    const known =
      fieldPath.length === 0 ||
      (fieldPath.length === 1 && (IDP_UPDATE_PATHS as readonly string[]).includes(fieldPath[0]!));
    if (!known) return `The update path: '${shorten(fieldPath.join('.'))}' points to an unknown field.`;
  }
  const seen = new Set<string>();
  for (const fieldPath of parsed) {
    const key = fieldPath.join('.');
    if (seen.has(key)) return `The update path: '${shorten(key)}' is duplicated.`;
    seen.add(key);
  }
  return undefined;
}

/** How Canton prints Option[IdentityProviderConfig] in its mismatch message (Canton `ledger-json-api/README.md`). */
function renderConfig(config: JsonObject | undefined): string {
  if (config === undefined) return 'None';
  const text = (name: string) => {
    const value = field(config, name);
    return typeof value === 'string' ? value : '';
  };
  return `Some(IdentityProviderConfig(${text('identityProviderId')},${field(config, 'isDeactivated') === true},${text('issuer')},${text('jwksUrl')},${text('audience')}))`;
}

export const updateIdentityProviderConfigRule = requestRule([], (body, context): Violation | undefined => {
  if (!isObject(body)) return wrongType('', 'an object', body);

  // What the JSON decoder refuses.
  const config = field(body, 'identityProviderConfig');
  if (!isAbsent(config)) {
    if (!isObject(config)) return wrongType('identityProviderConfig', 'an object', config);
    const problem =
      optionalOfType(config, 'identityProviderId', 'identityProviderConfig', 'string') ??
      optionalOfType(config, 'isDeactivated', 'identityProviderConfig', 'boolean') ??
      optionalOfType(config, 'issuer', 'identityProviderConfig', 'string') ??
      optionalOfType(config, 'jwksUrl', 'identityProviderConfig', 'string') ??
      optionalOfType(config, 'audience', 'identityProviderConfig', 'string');
    if (problem !== undefined) return problem;
  }
  const mask = field(body, 'updateMask');
  if (!isAbsent(mask)) {
    if (!isObject(mask)) return wrongType('updateMask', 'an object', mask);
    const problem = optionalStringArray(mask, 'paths', 'updateMask');
    if (problem !== undefined) return problem;
  }

  // The JSON layer: the path's idp-id must be the body's, before the service is called.
  const idpId = idpIdOf(context.path);
  if (idpId === undefined) return invalidField('idp-id', 'the path segment is not valid percent-encoding');
  const configObject = isObject(config) ? config : undefined;
  const bodyId = configObject === undefined ? undefined : (field(configObject, 'identityProviderId') ?? '');
  if (bodyId !== idpId)
    return jsonLayerInvalidArgument(`${idpId} does not match idp in body: ${renderConfig(configObject)}`);

  // The service, in its order. A malformed jwksUrl, which it refuses first (INVALID_FIELD jwks_url),
  // is left to it: its own answer reaches the client unchanged.
  if (!isObject(mask)) return missingField('update_mask');
  const paths = field(mask, 'paths');
  const reason = updateMaskProblem(Array.isArray(paths) ? (paths as string[]) : []);
  if (reason === undefined) return undefined;
  return {
    definition: Errors.INVALID_IDENTITY_PROVIDER_UPDATE_REQUEST,
    cause: `Update operation for identity provider config '${idpId}' failed due to: ${reason}`,
    resources: [['ErrorResource(IDENTITY_PROVIDER_CONFIG)', idpId]],
    origin: 'grpc', // a ContextualizedDamlError: no definite answer
  };
});
