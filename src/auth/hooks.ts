// Attaches the authentication stage: an onRequest hook for HTTP calls and an upgrade stage for
// WebSocket upgrades. Both run before any body is read, the version cache or the forwarder.
import type { FastifyRequest } from 'fastify';
import type { UpgradeStage } from '../app.js';
import type { Principal } from '../request-context.js';
import type { Authenticator } from './authenticator.js';
import { bearerTokenFromHeaders, webSocketToken } from './extract.js';
import { AuthFailure, unauthenticated, type AuthFailureReason } from './failure.js';

export type OnAuthFailure = (reason: AuthFailureReason) => void;

async function principalOf(authenticator: Authenticator, token: () => string, onFailure: OnAuthFailure): Promise<Principal> {
  try {
    return await authenticator.authenticate(token());
  } catch (error) {
    if (!(error instanceof AuthFailure)) throw error;
    onFailure(error.reason);
    throw unauthenticated(error);
  }
}

/** onRequest: sets request.principal or throws the 401 (the app's error handler renders it). */
export function authenticationHook(authenticator: Authenticator, onFailure: OnAuthFailure) {
  return async function authenticateRequest(request: FastifyRequest): Promise<void> {
    if (!authenticator.requiresToken(request.operation)) return;
    request.principal = await principalOf(authenticator, () => bearerTokenFromHeaders(request.raw.rawHeaders), onFailure);
  };
}

/** The same for an upgrade: token from Authorization or the `jwt.token.` subprotocol (FACTS.md §4.1). */
export function authenticationUpgradeStage(authenticator: Authenticator, onFailure: OnAuthFailure): UpgradeStage {
  return async (context) => {
    if (!authenticator.requiresToken(context.operation)) return;
    context.principal = await principalOf(authenticator, () => webSocketToken(context.request.rawHeaders), onFailure);
  };
}
