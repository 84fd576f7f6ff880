// The authentication stage, for calls and upgrades alike: before any body is read, the version
// cache or the forwarder. The kinds differ only in where the token is read from.
import type { IncomingMessage } from 'node:http';
import type { Exchange, Principal, Stage } from '../exchange.js';
import type { Authenticator } from './authenticator.js';
import { authorizationHeader, bearerTokenOf, webSocketToken } from './extract.js';
import { AuthFailure, unauthenticated, type AuthFailureReason } from './failure.js';

export type OnAuthFailure = (reason: AuthFailureReason) => void;

/** Sets exchange.principal or throws the 401 (rendered by the call's error handler or the upgrade's refusal). */
export function authenticationStage(authenticator: Authenticator, onFailure: OnAuthFailure): Stage {
  const refuse = (error: unknown): never => {
    if (!(error instanceof AuthFailure)) throw error;
    onFailure(error.reason);
    throw unauthenticated(error);
  };

  /** A call's token: the Authorization header, remembered per connection. */
  function callPrincipal(raw: IncomingMessage): Principal | Promise<Principal> {
    // The connection remembers the whole header value: the same value carries the same token, and
    // two flat strings compare faster than the token's substrings.
    const header = authorizationHeader(raw.rawHeaders);
    return authenticator.rememberedOn(raw.socket, header)
      ?? authenticator.principalOf(bearerTokenOf(header), 'bearer token', raw.socket, header);
  }

  /** An upgrade's token: Authorization, else the `jwt.token.` subprotocol, as Canton's json/v2/Endpoints.scala reads it. */
  function upgradePrincipal(raw: IncomingMessage): Principal | Promise<Principal> {
    const { token, source } = webSocketToken(raw.rawHeaders);
    return authenticator.principalOf(token, source);
  }

  return function authenticate(exchange: Exchange) {
    if (!authenticator.requiresToken(exchange.operation)) return undefined;
    let principal: Principal | Promise<Principal>;
    try {
      principal = exchange.kind === 'call' ? callPrincipal(exchange.raw) : upgradePrincipal(exchange.raw);
    } catch (error) {
      return refuse(error);
    }
    if (!(principal instanceof Promise)) {
      exchange.principal = principal;
      return undefined;
    }
    return principal.then((verified) => {
      exchange.principal = verified;
    }, refuse);
  };
}
