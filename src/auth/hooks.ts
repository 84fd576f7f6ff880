// The authentication stage, for calls and upgrades alike: before any body is read, the version
// cache or the forwarder. The kinds differ only in where the token is read from.
import type { IncomingMessage } from 'node:http';
import type { Exchange, Principal, Stage } from '../exchange/exchange.js';
import type { Authenticator, SpendUnverified } from './authenticator.js';
import { authorizationHeader, bearerTokenOf, webSocketToken } from './extract.js';
import { AuthFailure, unauthenticated, type AuthFailureReason } from './failure.js';

export type OnAuthFailure = (reason: AuthFailureReason) => void;

/**
 * A budget for calls that present no token the gateway has verified, kept by the protection stage (a
 * limit per client address): `spend` throws, or rejects, to refuse the call before any signature
 * check; `refund` gives the unit back once the call's token proved valid, so that only refusals count.
 */
export interface UnverifiedBudget {
  spend(request: IncomingMessage, operation: string): void | Promise<void>;
  refund(request: IncomingMessage): void;
}

type Authenticate = (spend: SpendUnverified | undefined) => Principal | Promise<Principal>;

/**
 * The principal, at once when the token cache knows the token. Otherwise the authenticator spends a
 * unit of `budget` before it does anything with the token, and a call refused before that (no token,
 * a malformed header) spends it here; a token that proves valid gets its unit back. An AuthFailure
 * becomes the 401 (auth/failure.ts).
 */
function principalOf(
  authenticate: Authenticate,
  request: IncomingMessage,
  operation: string,
  budget: UnverifiedBudget | undefined,
  onFailure: OnAuthFailure,
): Principal | Promise<Principal> {
  let spent = false;
  const spend =
    budget === undefined
      ? undefined
      : () => {
          spent = true;
          return budget.spend(request, operation);
        };
  const refuse = (error: unknown): never | Promise<never> => {
    if (!(error instanceof AuthFailure)) throw error;
    const fail = (): never => {
      onFailure(error.reason);
      throw unauthenticated(error);
    };
    const pending = spent ? undefined : spend?.(); // over budget: its 429 instead
    return pending === undefined ? fail() : pending.then(fail);
  };
  try {
    const principal = authenticate(spend);
    if (!(principal instanceof Promise)) return principal;
    return principal.then((verified) => {
      if (spent) budget!.refund(request);
      return verified;
    }, refuse);
  } catch (error) {
    return refuse(error);
  }
}

/** Sets exchange.principal or throws the 401 (rendered by the call's error handler or the upgrade's refusal). */
export function authenticationStage(
  authenticator: Authenticator,
  onFailure: OnAuthFailure,
  budget?: UnverifiedBudget,
): Stage {
  /** A call's token: the Authorization header, remembered per connection. */
  function callPrincipal(exchange: Exchange): Principal | Promise<Principal> {
    // A keep-alive client's next call with the same header answers here: nothing else is made for it.
    // The connection remembers the whole header value (the same value carries the same token, and two
    // flat strings compare faster than the token's substrings).
    const { rawHeaders, socket } = exchange.raw;
    let header: string | undefined;
    try {
      header = authorizationHeader(rawHeaders);
    } catch {
      header = undefined; // refused below, once the budget is spent
    }
    const remembered = header === undefined ? undefined : authenticator.rememberedOn(socket, header);
    if (remembered !== undefined) return remembered;
    return principalOf(
      (spend) => {
        const value = header ?? authorizationHeader(rawHeaders);
        return authenticator.principalOf(bearerTokenOf(value), 'bearer token', socket, value, spend);
      },
      exchange.raw,
      exchange.operation.name,
      budget,
      onFailure,
    );
  }

  /** An upgrade's token: Authorization, else the `jwt.token.` subprotocol, as Canton's Endpoints.scala reads it. */
  function upgradePrincipal(exchange: Exchange): Principal | Promise<Principal> {
    const raw = exchange.raw;
    return principalOf(
      (spend) => {
        const { token, source } = webSocketToken(raw.rawHeaders);
        return authenticator.principalOf(token, source, undefined, token, spend);
      },
      raw,
      exchange.operation.name,
      budget,
      onFailure,
    );
  }

  return function authenticate(exchange: Exchange) {
    if (!authenticator.requiresToken(exchange.operation)) return undefined;
    const principal = exchange.kind === 'call' ? callPrincipal(exchange) : upgradePrincipal(exchange);
    if (!(principal instanceof Promise)) {
      exchange.principal = principal;
      return undefined;
    }
    return principal.then((verified) => {
      exchange.principal = verified;
    });
  };
}
