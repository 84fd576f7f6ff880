// Who a call is counted against: its principal (the token's `sub`, the Ledger API user id), or,
// for a call without one (a public operation), its client address.
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import type { Principal } from '../exchange.js';

function plainAddress(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}

/**
 * The client's address: the peer, or behind trusted proxies the right-most X-Forwarded-For hop
 * that is not itself a trusted proxy (the left-most hops are whatever the client wrote).
 */
export function clientAddress(peer: string, forwardedFor: string | string[] | undefined, isTrustedProxy: (address: string) => boolean): string {
  if (forwardedFor === undefined || !isTrustedProxy(peer)) return plainAddress(peer);
  const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor).split(',').map((hop) => hop.trim());
  let candidate = plainAddress(peer);
  for (let i = hops.length - 1; i >= 0; i -= 1) {
    const hop = plainAddress(hops[i]!);
    if (isIP(hop) === 0) break; // not an address: the chain cannot be followed further
    candidate = hop;
    if (!isTrustedProxy(hop)) break;
  }
  return candidate;
}

export function callerOf(principal: Principal | null, request: IncomingMessage, isTrustedProxy: (address: string) => boolean): string {
  if (principal !== null) return `p:${principal.subject}`;
  return `a:${clientAddress(request.socket.remoteAddress ?? '', request.headers['x-forwarded-for'], isTrustedProxy)}`;
}
