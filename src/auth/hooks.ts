// Attaches the authentication stage: a request stage for HTTP calls and an upgrade stage for
// WebSocket upgrades. Both run before any body is read, the version cache or the forwarder.
import type { IncomingMessage } from 'node:http';
import type { UpgradeStage } from '../app.js';
import type { Principal } from '../request-context.js';
import type { Stage } from '../stage-runner.js';
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
function principalOf(authenticate: Authenticate, request: IncomingMessage, operation: string,
  budget: UnverifiedBudget | undefined, onFailure: OnAuthFailure): Principal | Promise<Principal> {
  let spent = false;
  const spend = budget === undefined ? undefined : () => {
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
    return refuse(error) as Promise<never>;
  }
}

/** Sets request.principal or throws the 401 (the app's error handler renders it). */
export function authenticationStage(authenticator: Authenticator, onFailure: OnAuthFailure,
  budget?: UnverifiedBudget): Stage {
  return function authenticateRequest(request) {
    if (!authenticator.requiresToken(request.operation)) return undefined;
    // A keep-alive client's next call with the same header answers here: nothing else is made for it.
    // The connection remembers the whole header value (the same value carries the same token, and two
    // flat strings compare faster than the token's substrings).
    const { rawHeaders, socket } = request.raw;
    let header: string | undefined;
    try {
      header = authorizationHeader(rawHeaders);
    } catch {
      header = undefined; // refused below, once the budget is spent
    }
    const remembered = header === undefined ? undefined : authenticator.rememberedOn(socket, header);
    if (remembered !== undefined) {
      request.principal = remembered;
      return undefined;
    }
    const principal = principalOf((spend) => {
      const value = header ?? authorizationHeader(rawHeaders);
      return authenticator.principalOf(bearerTokenOf(value), 'bearer token', socket, value, spend);
    }, request.raw, request.operation.name, budget, onFailure);
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
export function authenticationUpgradeStage(authenticator: Authenticator, onFailure: OnAuthFailure,
  budget?: UnverifiedBudget): UpgradeStage {
  return async (context) => {
    if (!authenticator.requiresToken(context.operation)) return;
    context.principal = await principalOf((spend) => {
      const { token, source } = webSocketToken(context.request.rawHeaders);
      return authenticator.principalOf(token, source, undefined, token, spend);
    }, context.request, context.operation.name, budget, onFailure);
  };
}
