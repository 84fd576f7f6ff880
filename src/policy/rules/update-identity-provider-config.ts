// PATCH /v2/idps/{idp-id} (FACTS.md §1.5, §5). In Canton's order: the JSON layer's path/body
// check (`JsIdentityProviderService.updateIdp`), then `ApiIdentityProviderConfigService
// .updateIdentityProviderConfig` (jwks_url, update_mask), then the mask
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
    const known = fieldPath.length === 0 || (fieldPath.length === 1 && (IDP_UPDATE_PATHS as readonly string[]).includes(fieldPath[0]!));
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

const ILLEGAL_URI_CHARACTER = /[\u0000-\u0020\u007f"<>\\^`{|}]/;
const BAD_ESCAPE = /%(?![0-9a-fA-F]{2})/;

/** Where java.net.URI's parser finds a URI's parts: the scheme (up to a ':' before any '/', '?' or '#'), the authority after '//'. */
function uriLayout(url: string): { schemeEnd: number; opaque: boolean; authority: [number, number] | undefined; query: number; fragment: number } {
  const first = url.search(/[:/?#]/);
  const schemeEnd = first >= 0 && url[first] === ':' ? first : -1;
  const at = schemeEnd + 1;
  const fragment = url.indexOf('#', at);
  if (schemeEnd >= 0 && url[at] !== '/') return { schemeEnd, opaque: true, authority: undefined, query: -1, fragment };
  let pathStart = at;
  let authority: [number, number] | undefined;
  if (url.startsWith('//', at)) {
    const end = url.slice(at + 2).search(/[/?#]/);
    pathStart = end === -1 ? url.length : at + 2 + end;
    authority = [at + 2, pathStart];
  }
  const query = url.indexOf('?', pathStart);
  return { schemeEnd, opaque: false, authority, query: fragment !== -1 && query > fragment ? -1 : query, fragment };
}

/**
 * Canton's JwksUrl.fromString is `new URI(value).toURL` (java.net). Refused here only what that
 * certainly refuses: a relative reference (no scheme), a character RFC 2396 never allows, a broken
 * percent escape, with java.net.URI's own message (checked against Java 17): the first problem in
 * the order it parses, named by the part it is in; a character the authority may not hold is
 * reported at the authority's start, as Java reports it. An unknown scheme, and the URLs this model
 * does not cover (below), are left to the participant.
 */
export function jwksUrlProblem(url: string): string | undefined {
  // What this model of java.net.URI's parser does not cover is left to the participant, which
  // answers it itself: characters outside ASCII (Java judges C1 controls and Unicode spaces by part),
  // brackets (IPv6 literals, with zone ids and port rules of their own), a second '#', and a scheme
  // with nothing after it ("Expected scheme-specific part").
  if (/[^\u0000-\u007f]|[[\]]/.test(url) || url.indexOf('#') !== url.lastIndexOf('#') || /^[^:/?#]+:(?:#|$)/.test(url)) return undefined;
  const layout = uriLayout(url);
  if (layout.schemeEnd === 0) return `Expected scheme name at index 0: ${url}`;
  if (layout.schemeEnd > 0) {
    const bad = /^[A-Za-z]/.test(url) ? url.slice(0, layout.schemeEnd).search(/[^A-Za-z0-9+.-]/) : 0;
    if (bad !== -1) return `Illegal character in scheme name at index ${bad}: ${url}`;
  }
  const illegal = ILLEGAL_URI_CHARACTER.exec(url);
  const escape = BAD_ESCAPE.exec(url);
  if (escape !== null && (illegal === null || escape.index < illegal.index)) return `Malformed escape pair at index ${escape.index}: ${url}`;
  if (illegal !== null) {
    const index = illegal.index;
    const { opaque, authority, query, fragment } = layout;
    const part = fragment !== -1 && index > fragment ? 'fragment'
      : opaque ? 'opaque part'
      : authority !== undefined && index < authority[1] ? 'authority'
      : query !== -1 && index > query ? 'query' : 'path';
    return `Illegal character in ${part} at index ${part === 'authority' ? authority![0] : index}: ${url}`;
  }
  if (layout.schemeEnd < 0) return 'URI is not absolute';
  return undefined;
}

/** How Canton prints Option[IdentityProviderConfig] in its mismatch message (FACTS.md §2.4a). */
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
    const problem = optionalOfType(config, 'identityProviderId', 'identityProviderConfig', 'string')
      ?? optionalOfType(config, 'isDeactivated', 'identityProviderConfig', 'boolean')
      ?? optionalOfType(config, 'issuer', 'identityProviderConfig', 'string')
      ?? optionalOfType(config, 'jwksUrl', 'identityProviderConfig', 'string')
      ?? optionalOfType(config, 'audience', 'identityProviderConfig', 'string');
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
  const bodyId = configObject === undefined ? undefined : field(configObject, 'identityProviderId') ?? '';
  if (bodyId !== idpId) return jsonLayerInvalidArgument(`${idpId} does not match idp in body: ${renderConfig(configObject)}`);

  // The service, in its order.
  const jwksUrl = field(configObject!, 'jwksUrl');
  if (typeof jwksUrl === 'string' && jwksUrl !== '') {
    const problem = jwksUrlProblem(jwksUrl);
    if (problem !== undefined) return invalidField('jwks_url', `Malformed URL: ${problem}`);
  }
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
