// CORS for browser dApps, by @fastify/cors. Its onRequest hook answers a preflight itself, so it
// must run before authentication: browsers never send credentials on a preflight (Fetch standard,
// CORS-preflight request). Off by default.
import fastifyCors, { type FastifyCorsOptions } from '@fastify/cors';
import type { FastifyInstance } from 'fastify';
import type { CorsConfig } from '../config/schema.js';

/**
 * The @fastify/cors options for one request's Origin. An allowed origin is echoed with the grant;
 * any other, or none, gets no Access-Control-Allow-Origin and no Allow-Credentials or Expose-Headers
 * either (@fastify/cors would send those two whatever the origin).
 */
export function corsOptionsFor(cors: CorsConfig): (origin: string | undefined) => FastifyCorsOptions {
  const anyOrigin = cors.origins.includes('*');
  const listed = new Set(cors.origins);
  const common = {
    methods: [...cors.methods],
    allowedHeaders: [...cors.allowedHeaders],
    maxAge: cors.maxAgeSeconds,
    // Any OPTIONS is a preflight here: the participant serves no OPTIONS route of its own.
    strictPreflight: false,
  } satisfies FastifyCorsOptions;
  const grant: FastifyCorsOptions = {
    ...common,
    origin: anyOrigin ? '*' : [...cors.origins],
    credentials: cors.credentials,
    exposedHeaders: [...cors.exposedHeaders],
  };
  const noGrant: FastifyCorsOptions = { ...common, origin: [], credentials: false };
  return (origin) => (anyOrigin || (origin !== undefined && listed.has(origin)) ? grant : noGrant);
}

/** The @fastify/cors plugin options for the configured policy, or undefined when CORS is off. */
export function corsOptions(cors: CorsConfig): FastifyCorsOptions | undefined {
  if (!cors.enabled) return undefined;
  const forOrigin = corsOptionsFor(cors);
  return { hook: 'onRequest', delegator: (request, decide) => decide(null, forOrigin(request.headers.origin)) };
}

/**
 * Registers CORS on the API instance. @fastify/cors adds its own `OPTIONS *` route for preflights,
 * so the catch-all forwarding route, registered later, leaves OPTIONS to it.
 */
export async function registerCors(api: FastifyInstance, cors: CorsConfig): Promise<void> {
  const options = corsOptions(cors);
  if (options === undefined) return;
  api.addHook('onRoute', (route) => {
    if (route.url === '/*' && Array.isArray(route.method) && route.method.includes('OPTIONS')) {
      route.method = route.method.filter((method) => method !== 'OPTIONS');
    } else if (route.url === '*' && route.method === 'OPTIONS') {
      // The preflight route is built before app.ts sets the gateway's error handler, and would keep
      // Fastify's default: a refusal before the preflight (a path not served) answered a bare 500.
      route.errorHandler = (error, request, reply) => api.errorHandler(error, request, reply);
    }
  });
  await api.register(fastifyCors, options);
}
