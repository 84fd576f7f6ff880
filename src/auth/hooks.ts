// Attaches the authentication stage: a request stage for HTTP calls and an upgrade stage for
// WebSocket upgrades. Both run before any body is read, the version cache or the forwarder.
import type { UpgradeStage } from '../app.js';
import type { Principal } from '../request-context.js';
import type { Stage } from '../stage-runner.js';
import type { Authenticator } from './authenticator.js';
import { authorizationHeader, bearerTokenOf, webSocketToken } from './extract.js';
import { AuthFailure, unauthenticated, type AuthFailureReason } from './failure.js';

export type OnAuthFailure = (reason: AuthFailureReason) => void;

/** The principal, at once when the token cache knows the token; an AuthFailure becomes the 401. */
function principalOf(authenticate: () => Principal | Promise<Principal>, onFailure: OnAuthFailure): Principal | Promise<Principal> {
  const refuse = (error: unknown): never => {
    if (!(error instanceof AuthFailure)) throw error;
    onFailure(error.reason);
    throw unauthenticated(error);
  };
  try {
    const principal = authenticate();
    return principal instanceof Promise ? principal.catch(refuse) : principal;
  } catch (error) {
    return refuse(error);
  }
}

/** Sets request.principal or throws the 401 (the app's error handler renders it). */
export function authenticationStage(authenticator: Authenticator, onFailure: OnAuthFailure): Stage {
  return function authenticateRequest(request) {
    if (!authenticator.requiresToken(request.operation)) return undefined;
    const principal = principalOf(() => {
      // The connection remembers the whole header value: the same value carries the same token, and
      // two flat strings compare faster than the token's substrings.
      const header = authorizationHeader(request.raw.rawHeaders);
      return authenticator.rememberedOn(request.raw.socket, header) ?? authenticator.principalOf(bearerTokenOf(header), 'bearer token', request.raw.socket, header);
    }, onFailure);
    if (!(principal instanceof Promise)) {
      request.principal = principal;
      return undefined;
    }
    return principal.then((verified) => {
      request.principal = verified;
    });
  };
}

/** The same for an upgrade: token from Authorization or the `jwt.token.` subprotocol (Canton `Endpoints.scala`). */
export function authenticationUpgradeStage(authenticator: Authenticator, onFailure: OnAuthFailure): UpgradeStage {
  return async (context) => {
    if (!authenticator.requiresToken(context.operation)) return;
    context.principal = await principalOf(() => {
      const { token, source } = webSocketToken(context.request.rawHeaders);
      return authenticator.principalOf(token, source);
    }, onFailure);
  };
}
