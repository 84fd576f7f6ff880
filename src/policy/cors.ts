// CORS for browser dApps, by @fastify/cors. Its onRequest hook answers a preflight itself, so it
// must run before authentication: browsers never send credentials on a preflight (Fetch standard,
// CORS-preflight request). Off by default.
import fastifyCors, { type FastifyCorsOptions } from '@fastify/cors';
import type { FastifyInstance } from 'fastify';
import type { CorsConfig } from '../config/schema.js';

/** The @fastify/cors options for the configured policy, or undefined when CORS is off. */
export function corsOptions(cors: CorsConfig): FastifyCorsOptions | undefined {
  if (!cors.enabled) return undefined;
  const anyOrigin = cors.origins.includes('*');
  const listed = new Set(cors.origins);
  const common = {
    methods: [...cors.methods],
    allowedHeaders: [...cors.allowedHeaders],
    maxAge: cors.maxAgeSeconds,
    // Any OPTIONS is a preflight here: the participant serves no OPTIONS route of its own.
    strictPreflight: false,
  } satisfies FastifyCorsOptions;
  // An allowed origin is echoed with the grant. Any other, or none, gets no Access-Control-Allow-Origin
  // and no Allow-Credentials or Expose-Headers either: @fastify/cors would send those whatever the origin.
  const grant: FastifyCorsOptions = { ...common, origin: anyOrigin ? '*' : true, credentials: cors.credentials, exposedHeaders: [...cors.exposedHeaders] };
  const noGrant: FastifyCorsOptions = { ...common, origin: [], credentials: false };
  return {
    hook: 'onRequest',
    delegator: (request, decide) => {
      const origin = request.headers.origin;
      decide(null, anyOrigin || (origin !== undefined && listed.has(origin)) ? grant : noGrant);
    },
  };
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
