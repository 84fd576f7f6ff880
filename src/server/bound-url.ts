// The URL a listener is bound to, as logged: Fastify's listen() answers a loopback URL for a
// wildcard host (0.0.0.0 became 127.0.0.1), which hides that the socket accepts on every interface.
import type { AddressInfo } from 'node:net';

/** `protocol//address:port` of `address` (a TCP listener's), an IPv6 address in brackets. */
export function boundUrl(address: AddressInfo | string | null, protocol: string): string {
  if (address === null || typeof address === 'string') return `${protocol}//${address ?? ''}`;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `${protocol}//${host}:${address.port}`;
}
