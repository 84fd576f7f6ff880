// CORS for browser dApps, by @fastify/cors. Its onRequest hook answers a preflight itself, so it
// must run before authentication: browsers never send credentials on a preflight (Fetch standard,
// CORS-preflight request). Off by default.
import fastifyCors, { type FastifyCorsOptions } from '@fastify/cors';
import type { FastifyInstance } from 'fastify';
import type { CorsConfig } from '../config/schema.js';

/** The @fastify/cors options for the configured policy, or undefined when CORS is off. */
export function corsOptions(cors: CorsConfig): FastifyCorsOptions | undefined {
  if (!cors.enabled) return undefined;
  return {
    origin: cors.origins.includes('*') ? '*' : [...cors.origins],
    methods: [...cors.methods],
    allowedHeaders: [...cors.allowedHeaders],
    exposedHeaders: [...cors.exposedHeaders],
    maxAge: cors.maxAgeSeconds,
    credentials: cors.credentials,
    // Any OPTIONS is a preflight here: the participant serves no OPTIONS route of its own.
    strictPreflight: false,
    hook: 'onRequest',
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
    }
  });
  await api.register(fastifyCors, options);
}
