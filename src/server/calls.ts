// Plain calls: the same exchange as an upgrade, walking the same stage list (app.ts) as the API's one
// onRequest hook, then its own stages (app.ts declares them too: the IdP change watch, the request
// rules, the audit intent, cache-or-forward) in its route handler, once Fastify has checked the media
// type. A refusal, from either list, is answered by the error handler (exchange/refusal.ts). An
// upgrade's counterpart is upgrades.ts.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { VersionCache } from '../cache/version-cache.js';
import { Errors, GatewayError } from '../errors.js';
import type { CallStage, Stage } from '../exchange/exchange.js';
import { asGatewayError, sendGatewayError } from '../exchange/refusal.js';
import { runStages, stageHook } from '../exchange/stage-runner.js';
import { callStagesUnder, type CallStageEntry, type Generation, type PinnedExchange } from '../live/generations.js';
import { NamedOperations } from '../operations.js';
import type { Forwarder } from '../proxy/forward.js';

const API_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

export interface CallHandlerOptions {
  /** The gateway's stage list, the same one every upgrade walks. */
  readonly stages: readonly Stage<PinnedExchange>[];
  /** A call's own stages, in order (some picked by each generation: live.pinned); the last answers it. */
  readonly callStages: readonly CallStageEntry[];
  /** The stage of `stages` before which CORS may answer a preflight (authentication: a preflight carries no token). */
  readonly corsBefore: Stage<PinnedExchange>;
  readonly log: { error(details: object, message: string): void };
}

/**
 * Before `corsBefore`, CORS (when the call's configuration has it: policy/cors.ts) adds its headers
 * and answers a preflight: browsers send a preflight without any token.
 */
function answerPreflight(request: FastifyRequest, reply: FastifyReply): boolean {
  const cors = request.generation.cors;
  if (cors === undefined) return false;
  request.replyHeaders = true; // the answers the gateway writes itself copy them (exchange/answer.ts)
  return cors(request, reply);
}

/** The Content-Length Fastify sends with `payload` (its own, or the one a stage set), for the access log. */
function answerLength(reply: FastifyReply, payload: unknown): string | number | undefined {
  const set = reply.getHeader('content-length');
  if (typeof set === 'string' || typeof set === 'number') return set;
  if (typeof payload === 'string') return Buffer.byteLength(payload);
  return Buffer.isBuffer(payload) ? payload.length : undefined;
}

/** Serves every call on `api`: the stage list, the call's own stages, the error answers. */
export function serveCalls(api: FastifyInstance, options: CallHandlerOptions): void {
  const { callStages, log } = options;
  // The list runs as one hook (exchange/stage-runner.ts), synchronously unless a stage has to wait.
  api.addHook('onRequest', stageHook(options.stages, { before: options.corsBefore, answer: answerPreflight }));
  // The gateway's own headers on the answers Fastify sends (refusals, CORS preflights, a version
  // answer passed on whole); the answers the gateway writes itself get them from gatewayHeaders
  // (exchange/answer.ts). One the answer already has (the participant's) is kept.
  api.addHook('onSend', (request, reply, payload, done) => {
    if (!reply.hasHeader('x-request-id')) reply.header('x-request-id', request.id);
    if (request.traceresponse !== undefined && !reply.hasHeader('traceresponse'))
      reply.header('traceresponse', request.traceresponse);
    request.answerContentLength = answerLength(reply, payload);
    done(null, payload);
  });
  // A call's own stages run in its handler: a promise only when one has to wait (no preHandler
  // hook for every call). Their list under a generation is built when its first call comes (and again
  // when calls of an old and a new one alternate, while a reload retires the old).
  let builtFor: Generation | undefined;
  let built: readonly CallStage[] = [];
  api.route({
    method: [...API_METHODS],
    url: '/*',
    handler: (request, reply) => {
      const generation = request.generation;
      if (generation !== builtFor) {
        built = callStagesUnder(callStages, generation);
        builtFor = generation;
      }
      return runStages(built, request, reply);
    },
  });
  api.setErrorHandler((error: FastifyError | GatewayError, request, reply) => {
    const gatewayError = asGatewayError(error, request.id);
    if (gatewayError.definition === Errors.GATEWAY_INTERNAL_ERROR)
      log.error({ reqId: request.id, err: error }, 'unexpected failure');
    if (reply.sent || reply.raw.headersSent) {
      if (gatewayError.reason !== undefined) request.refusalReason = gatewayError.reason;
      reply.raw.destroy();
      return reply;
    }
    return sendGatewayError(request, reply, gatewayError);
  });
  api.setNotFoundHandler((request, reply) => {
    // Only methods outside API_METHODS end here (every path is routed).
    sendGatewayError(
      request,
      reply,
      new GatewayError(Errors.GATEWAY_ROUTE_NOT_EXPOSED, {
        cause: `Method ${request.method} is not served by the gateway.`,
      }),
    );
  });
}

/**
 * The call stage that answers: GET /v2/version from memory while the call's configuration caches it
 * (versionCache.ttlSeconds above 0; keyed by `upstreamKey`, so another participant's answer is never
 * served), every other call forwarded to the participant.
 */
export function cacheOrForward(versionCache: VersionCache, forwarder: Forwarder, upstreamKey: string): CallStage {
  return (call, reply) => {
    const cached = call.generation.versionCache;
    return cached.ttlSeconds > 0 && call.method === 'GET' && call.operation.name === NamedOperations.getVersion
      ? versionCache.serve(call, reply, upstreamKey, cached)
      : forwarder.forward(call, reply);
  };
}
