// Shared test plumbing: a real sandbox on 127.0.0.1:0, real fetch, and the JsCantonError checks.

import { request } from 'undici';
import { expect } from 'vitest';
import { buildSandbox, type SandboxApp, type SandboxOptions } from '../../src/sandbox/app.js';
import { JS_CANTON_ERROR_KEYS } from '../helpers/canton-error-shape.js';

export interface RunningSandbox {
  readonly app: SandboxApp;
  readonly url: string;
  close(): Promise<void>;
}

export async function startSandbox(options: SandboxOptions = {}): Promise<RunningSandbox> {
  const app = await buildSandbox(options);
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, url, close: () => app.close() };
}

/** Runs `body` against a fresh sandbox and always closes it. */
export async function withSandbox<T>(
  body: (sandbox: RunningSandbox) => Promise<T>,
  options: SandboxOptions = {},
): Promise<T> {
  const sandbox = await startSandbox(options);
  try {
    return await body(sandbox);
  } finally {
    await sandbox.close();
  }
}

export function sendJson(
  url: string,
  method: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(url, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** GET with a JSON body (fetch refuses one; Canton serves GET /v2/package-vetting with a body). */
export async function getWithJsonBody(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  const answer = await request(url, {
    method: 'GET',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const responseHeaders = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) {
    if (typeof value === 'string') responseHeaders.set(name, value);
  }
  return new Response(Buffer.from(await answer.body.arrayBuffer()), {
    status: answer.statusCode,
    headers: responseHeaders,
  });
}

export const postJson = (url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> =>
  sendJson(url, 'POST', body, headers);

const GRPC_BY_CATEGORY: Record<number, number> = { 8: 3, 9: 9, 10: 6, 11: 5, 12: 11, 4: 13 };

// The participant's JSON answers, walked freely by the assertions: a wrong path fails the test that takes it.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type JsonBody = Record<string, any>;

/** The JSON body, typed loosely for assertions. */
export async function readJson(response: Response): Promise<JsonBody> {
  return (await response.json()) as JsonBody;
}

/** Asserts a gRPC-originated Canton error body (Canton `JsSchema.scala`) and returns it. */
export async function expectCantonError(
  response: Response,
  expected: { status: number; code: string; category: number },
): Promise<JsonBody> {
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  const body = (await response.json()) as JsonBody;
  expect({ status: response.status, code: body['code'] }).toEqual({ status: expected.status, code: expected.code });
  expect(Object.keys(body).sort()).toEqual(JS_CANTON_ERROR_KEYS);
  expect(body['errorCategory']).toBe(expected.category);
  expect(body['grpcCodeValue']).toBe(GRPC_BY_CATEGORY[expected.category]);
  expect(body['correlationId']).toBeNull();
  expect(body['definiteAnswer']).toBeNull();
  expect(body['retryInfo']).toBe(expected.category === 12 ? '1 second' : null);
  expect(body['traceId']).toMatch(/^[0-9a-f]{32}$/);
  expect(body['context']).toMatchObject({ category: String(expected.category), tid: body['traceId'] });
  expect(Array.isArray(body['resources'])).toBe(true);
  return body;
}

/** Asserts a tapir decode failure: 400 text/plain "Invalid value for: body (...)" (Canton `V2Routes.scala`). */
export async function expectDecodeFailure(response: Response): Promise<string> {
  expect(response.status).toBe(400);
  expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
  const text = await response.text();
  expect(text).toMatch(/^Invalid value for: body \(.+\)$/s);
  return text;
}

/** An unsigned JWT carrying `claims`; the sandbox reads `sub` without verifying. */
export function unsignedJwt(claims: Record<string, unknown>): string {
  const encode = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${encode({ alg: 'HS256', typ: 'JWT' })}.${encode(claims)}.c2lnbmF0dXJl`;
}

export const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
export const TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;
