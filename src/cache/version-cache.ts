// The GET /v2/version cache: the participant's version changes only when it is upgraded, so the
// gateway answers from memory. Fresh for ttlSeconds; concurrent misses share one upstream call
// (lru-cache's fetch); when a refresh fails with a 5xx or no answer, the last good answer is served
// while younger than staleIfErrorSeconds (RFC 5861 stale-if-error), marked STALE.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { LRUCache } from 'lru-cache';
import { Errors, GatewayError } from '../errors.js';
import { combinedVary, gatewayHeaders, writeAnswerHead } from '../exchange/answer.js';
import { upstreamErrorCode } from '../exchange/upstream-error-code.js';
import type { VersionCacheResult } from '../telemetry/metrics.js';

export interface UpstreamAnswer {
  readonly statusCode: number;
  readonly headers: Record<string, string | string[]>;
  readonly body: Buffer;
}

interface CachedVersion {
  readonly headers: Record<string, string | string[]>;
  /**
   * The participant's bytes as a latin1 string (one char per byte, written back byte for byte):
   * Node then sends head and body as one write instead of a corked two-chunk writev.
   */
  readonly body: string;
  readonly bodyBytes: number;
  readonly storedAt: number;
}

/** A refresh that got an answer other than 200 JSON: passed to the client unchanged. */
class UncacheableAnswer extends Error {
  constructor(readonly answer: UpstreamAnswer) {
    super(`upstream answered ${answer.statusCode}`);
  }
}

export interface VersionCacheOptions {
  /** One GET /v2/version upstream on behalf of `request`, read whole (bounded by the upstream timeout). */
  readonly fetchVersion: (request: FastifyRequest) => Promise<UpstreamAnswer>;
  readonly count: (result: VersionCacheResult) => void;
  readonly now?: () => number;
}

/** How long an answer is fresh, and how long past that it may be served when a refresh fails. */
export interface VersionCacheSettings {
  readonly ttlSeconds: number;
  readonly staleIfErrorSeconds: number;
}

export interface VersionCache {
  /**
   * Answers from memory under `settings` (the call's configuration; ttlSeconds above 0). An answer is
   * stored with the TTL of the call that fetched it: clear() when the settings change.
   */
  serve(
    request: FastifyRequest,
    reply: FastifyReply,
    upstreamKey: string,
    settings: VersionCacheSettings,
  ): Promise<void> | undefined;
  /** Empties the cache (the admin purge, a reload that changes the TTLs). */
  readonly clear: () => void;
}

/** Answer headers that are about this one exchange, never replayed from the cache. */
const NOT_REPLAYED = new Set([
  'content-length',
  'date',
  'set-cookie',
  'age',
  'x-request-id',
  'x-cache',
  'traceresponse',
]);

function isJson(headers: Record<string, string | string[]>): boolean {
  const type = headers['content-type'];
  return typeof type === 'string' && /\bjson\b/i.test(type);
}

/** Stored only in the identity encoding, which every caller can read (the fetch asks for it). */
function isIdentity(headers: Record<string, string | string[]>): boolean {
  const encoding = headers['content-encoding'];
  return encoding === undefined || (typeof encoding === 'string' && /^\s*identity\s*$/i.test(encoding));
}

export function createVersionCache(options: VersionCacheOptions): VersionCache {
  const now = options.now ?? Date.now;

  const cache = new LRUCache<string, CachedVersion, FastifyRequest>({
    max: 16, // one entry per upstream; a handful at most
    ttl: 1_000, // each fetch sets its entry's own (the call's configuration)
    perf: { now },
    allowStale: false,
    noDeleteOnStaleGet: true, // the stale answer stays for stale-if-error
    allowStaleOnFetchRejection: false, // decided below, by error kind and age
    noDeleteOnFetchRejection: true,
    // A purge (clear()) aborts a refresh in flight: its callers still get the answer it brings (they
    // got a 500 from the abort), which is then not stored, as the purge asked.
    ignoreFetchAbort: true,
    fetchMethod: async (_key, _stale, { context }) => {
      const answer = await options.fetchVersion(context);
      if (answer.statusCode !== 200 || !isJson(answer.headers) || !isIdentity(answer.headers))
        throw new UncacheableAnswer(answer);
      const headers: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(answer.headers)) if (!NOT_REPLAYED.has(name)) headers[name] = value;
      return { headers, body: answer.body.toString('latin1'), bodyBytes: answer.body.length, storedAt: now() };
    },
  });

  /** The stored answer, written straight to the socket (exchange/answer.ts), as a forwarded one is. */
  function send(
    request: FastifyRequest,
    reply: FastifyReply,
    entry: CachedVersion,
    status: 'HIT' | 'MISS' | 'STALE',
  ): undefined {
    const head = gatewayHeaders(request, reply);
    const ownVary = head.vary;
    for (const name in entry.headers) head[name] = entry.headers[name]!;
    if (typeof ownVary === 'string' && entry.headers.vary !== undefined)
      head.vary = combinedVary(entry.headers.vary, ownVary);
    head['content-length'] = entry.bodyBytes;
    head.age = String(Math.max(0, Math.floor((now() - entry.storedAt) / 1000)));
    head['x-cache'] = status;
    writeAnswerHead(reply, 200, head).end(entry.body, 'latin1');
    return undefined; // the reply is hijacked: nothing for Fastify to send or wait for
  }

  async function refresh(
    request: FastifyRequest,
    reply: FastifyReply,
    key: string,
    settings: VersionCacheSettings,
  ): Promise<void> {
    const status: LRUCache.Status<string, CachedVersion, FastifyRequest> = {};
    const ttlMs = settings.ttlSeconds * 1000;
    try {
      const entry = (await cache.fetch(key, { context: request, status, ttl: ttlMs }))!;
      options.count(status.fetch === 'inflight' ? 'coalesced' : 'miss');
      return send(request, reply, entry, 'MISS');
    } catch (error) {
      const upstreamFailed =
        error instanceof GatewayError || (error instanceof UncacheableAnswer && error.answer.statusCode >= 500);
      const stale = upstreamFailed ? cache.peek(key, { allowStale: true }) : undefined;
      if (stale !== undefined && now() - stale.storedAt <= ttlMs + settings.staleIfErrorSeconds * 1000) {
        options.count('stale');
        return send(request, reply, stale, 'STALE');
      }
      const joined = status.fetch === 'inflight';
      options.count(joined ? 'coalesced' : 'miss');
      if (error instanceof UncacheableAnswer) {
        // A participant failing (5xx) fails every caller alike: one that joined the refresh is told
        // so by the gateway, rather than each asking again (50 callers were 50 more calls to a
        // participant already failing) or being handed the first caller's body (its correlation and
        // trace ids).
        if (joined && error.answer.statusCode >= 500) {
          throw new GatewayError(
            Errors.GATEWAY_UPSTREAM_UNAVAILABLE,
            { cause: `The participant answered ${error.answer.statusCode} to the version fetch this call joined.` },
            { reason: `version fetch answered ${error.answer.statusCode}` },
          );
        }
        // Not cached, passed on whole: the participant's own error (or non-JSON) answer. A refusal
        // given to the caller whose refresh this one joined is that caller's (its token: a 403 for a
        // user the participant does not know): a caller that only joined asks the participant itself.
        const answer = joined ? await options.fetchVersion(request) : error.answer;
        if (answer.statusCode >= 400) {
          const type = answer.headers['content-type'];
          request.errorCode = upstreamErrorCode(typeof type === 'string' ? type : undefined, answer.body, false);
        }
        reply.code(answer.statusCode).headers(answer.headers).header('x-cache', 'MISS').send(answer.body);
        return;
      }
      throw error;
    }
  }

  return {
    serve(request, reply, upstreamKey, settings) {
      const entry = cache.get(upstreamKey);
      if (entry !== undefined) {
        options.count('hit');
        return send(request, reply, entry, 'HIT');
      }
      return refresh(request, reply, upstreamKey, settings);
    },
    clear: () => cache.clear(),
  };
}
