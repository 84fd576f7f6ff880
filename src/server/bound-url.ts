// The URL a listener is bound to, as logged: Fastify's listen() answers a loopback URL for a
// wildcard host (0.0.0.0 became 127.0.0.1), which hides that the socket accepts on every interface.
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { ServerConfig } from '../config/schema.js';
import type { AdminListener } from './admin-listener.js';

/** `protocol//address:port` of `address` (a TCP listener's), an IPv6 address in brackets. */
export function boundUrl(address: AddressInfo | string | null, protocol: string): string {
  if (address === null || typeof address === 'string') return `${protocol}//${address ?? ''}`;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `${protocol}//${host}:${address.port}`;
}

/** Listens on the admin address, then the API's (server.host, server.port); the bound URLs. */
export async function listenBoth(api: FastifyInstance, admin: AdminListener, server: ServerConfig) {
  const adminUrl = await admin.listen();
  const apiUrl = await api.listen({ host: server.host, port: server.port });
  return {
    api: boundUrl(api.server.address(), new URL(apiUrl).protocol),
    admin: boundUrl(admin.server.server.address(), new URL(adminUrl).protocol),
  };
}
