// GET /livez and GET /readyz as Canton's JSON API serves them (`JsHealthService.scala`). No token needed.

import type { FastifyInstance } from 'fastify';

export const READYZ_BODY = '[+] ledger ok (SERVING)\nreadyz check passed\n';

export function registerHealthRoutes(app: FastifyInstance): void {
  app.get('/livez', async (_request, reply) => reply.code(200).send());
  app.get('/readyz', async (_request, reply) => reply.code(200).type('text/plain; charset=UTF-8').send(READYZ_BODY));
}
