// The authentication stage, for calls and upgrades alike: before any body is read, the version
// cache or the forwarder. The kinds differ only in where the token is read from.
import type { IncomingMessage } from 'node:http';
import type { Exchange, Principal, Stage } from '../exchange/exchange.js';
import type { Authenticator, SpendUnverified } from './authenticator.js';
import { authorizationHeader, bearerTokenOf, webSocketToken, type TokenSource } from './extract.js';
import type { Connection } from './token-cache.js';
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
 * Consumers (consumers/), when configured: gateway keys, accepted wherever a token is (a bearer
 * token with their prefix is a key, never a JWT), and the consumer of a verified principal.
 */
export interface ConsumerCredentials {
  readonly keys?: {
    readonly prefix: string;
    /** The principal of the key this connection proved with this credential, when it still serves the call. */
    rememberedOn(exchange: Exchange, credential: string): Principal | undefined;
    /** The key's principal (its consumer set); spends `spend` before any lookup of a key the connection has not proved. */
    principalOf(
      token: string,
      exchange: Exchange,
      credential: string,
      spend: SpendUnverified | undefined,
    ): Principal | Promise<Principal>;
  };
  /** The principal with its consumer (by token claims or client certificate). */
  readonly classify?: (principal: Principal, request: IncomingMessage) => Principal;
}

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
    if (!(principal instanceof Promise)) {
      if (spent) budget!.refund(request); // a gateway key is looked up at once, after its unit was spent
      return principal;
    }
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
  consumers: ConsumerCredentials = {},
): Stage {
  const { keys, classify } = consumers;
  /** A bearer token: a gateway key when it has their prefix, else a JWT for the authenticator. */
  const bearerPrincipal = (
    exchange: Exchange,
    token: string,
    source: TokenSource,
    connection: Connection | undefined,
    credential: string,
    spend: SpendUnverified | undefined,
  ) =>
    keys !== undefined && token.startsWith(keys.prefix)
      ? keys.principalOf(token, exchange, credential, spend)
      : authenticator.principalOf(token, source, connection, credential, spend);

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
    const rememberedKey = header === undefined ? undefined : keys?.rememberedOn(exchange, header);
    if (rememberedKey !== undefined) return rememberedKey;
    return principalOf(
      (spend) => {
        const value = header ?? authorizationHeader(rawHeaders);
        return bearerPrincipal(exchange, bearerTokenOf(value), 'bearer token', socket, value, spend);
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
        return bearerPrincipal(exchange, token, source, undefined, token, spend);
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
      exchange.principal = classify === undefined ? principal : classify(principal, exchange.raw);
      return undefined;
    }
    return principal.then((verified) => {
      exchange.principal = classify === undefined ? verified : classify(verified, exchange.raw);
    });
  };
}
