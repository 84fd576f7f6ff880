// A GET answered whole into memory (bounded), on the same slots, replicas and headers as any call:
// what the version cache (cache/version-cache.ts) is filled from.
import { performance } from 'node:perf_hooks';
import type { FastifyRequest } from 'fastify';
import type { Pool } from 'undici';
import { clientResponseHeaders } from './headers.js';
import { CONNECTION_LOST, queueTimeout, remaining, type CallContext } from './call-context.js';
import { UpstreamCall } from './upstream-call.js';
import { upstreamFailure } from './upstream-failure.js';
import type { Replica } from './upstream-replicas.js';

export interface WholeAnswer {
  statusCode: number;
  headers: Record<string, string | string[]>;
  body: Buffer;
}

/**
 * Not sent with a version fetch: a body (never replayed), and the caller's Accept-Encoding (the
 * fetch asks for identity), so that the answer cached for every caller is one any caller can read.
 */
const VERSION_FETCH_DROPPED: ReadonlySet<string> = new Set(['content-length', 'content-type', 'accept-encoding']);

/**
 * One upstream request. A keep-alive connection the participant closed just as it was reused fails
 * before any answer; a bodiless GET is then sent once more on a fresh connection (safe: idempotent,
 * and nothing was answered).
 */
async function requestOnce(pool: Pool, dispatch: Parameters<Pool['request']>[0]): ReturnType<Pool['request']> {
  try {
    return await pool.request(dispatch);
  } catch (error) {
    if (!CONNECTION_LOST.has((error as { code?: string }).code ?? '')) throw error;
    return pool.request(dispatch);
  }
}

export async function fetchWhole(
  context: CallContext,
  request: FastifyRequest,
  maxBytes: number,
): Promise<WholeAnswer> {
  const { slots } = context;
  const timeout = context.timeoutOf(request);
  const started = performance.now();
  const call = new UpstreamCall(context.replicas, started + timeout);
  if (!slots.tryTake()) {
    await new Promise<void>((resolve, reject) =>
      slots.wait({
        deadline: call.deadline,
        start: resolve,
        expire: () => {
          call.to('failed');
          reject(queueTimeout(slots.size, timeout));
        },
      }),
    );
  }
  try {
    return await fetchOnce(context, call, request, maxBytes, started, timeout);
  } catch (error) {
    if (!call.ended) call.to('failed');
    throw error;
  } finally {
    slots.release();
  }
}

async function fetchOnce(
  context: CallContext,
  call: UpstreamCall,
  request: FastifyRequest,
  maxBytes: number,
  started: number,
  timeout: number,
): Promise<WholeAnswer> {
  // identity: without any Accept-Encoding a server may choose any encoding (RFC 9110 §12.5.3).
  const headers = [...context.headersFor(request, VERSION_FETCH_DROPPED), 'accept-encoding', 'identity'];
  const fetchFrom = (replica: Replica) =>
    requestOnce(replica.pool, {
      path: replica.basePath + request.raw.url!,
      method: 'GET',
      headers,
      headersTimeout: remaining(started, timeout), // a wait for a connection counts against it
      bodyTimeout: timeout,
    });
  let response: Awaited<ReturnType<Pool['request']>>;
  call.to('connecting');
  try {
    response = await fetchFrom(call.replica);
  } catch (error) {
    // A GET: sent again to the next replica that answers, whatever reached the one that failed.
    const waiting = call.failOver((error as { code?: string }).code ?? '');
    const next = waiting === undefined ? undefined : await waiting;
    if (next === undefined) throw upstreamFailure(error);
    call.moveTo(next);
    try {
      response = await fetchFrom(next);
    } catch (again) {
      throw upstreamFailure(again);
    }
  }
  // pool.request() shows no socket: answered, the call was written whole.
  call.to('writing');
  call.to('waiting');
  call.to('streaming');
  context.onUpstreamTiming?.(request, (performance.now() - started) / 1000);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of response.body) {
      size += (chunk as Buffer).length;
      if (size > maxBytes) {
        response.body.destroy();
        throw Object.assign(new Error('upstream answer too large to cache'), { code: 'ANSWER_TOO_LARGE' });
      }
      chunks.push(chunk as Buffer);
    }
  } catch (error) {
    throw upstreamFailure(error);
  }
  call.to('done');
  return {
    statusCode: response.statusCode,
    headers: clientResponseHeaders(response.headers),
    body: Buffer.concat(chunks, size),
  };
}
