// Who a call is counted against: its principal (the token's `sub`, the Ledger API user id), or,
// for a call without one (a public operation), its client address.
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import type { Principal } from './exchange.js';

function plainAddress(address: string): string {
  return address.startsWith('::ffff:') ? address.slice(7) : address;
}

/**
 * The client's address: the peer, or behind trusted proxies the right-most X-Forwarded-For hop
 * that is not itself a trusted proxy (the left-most hops are whatever the client wrote).
 */
export function clientAddress(
  peer: string,
  forwardedFor: string | string[] | undefined,
  isTrustedProxy: (address: string) => boolean,
): string {
  if (forwardedFor === undefined || !isTrustedProxy(peer)) return plainAddress(peer);
  const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor)
    .split(',')
    .map((hop) => hop.trim());
  let candidate = plainAddress(peer);
  for (let i = hops.length - 1; i >= 0; i -= 1) {
    const hop = plainAddress(hops[i]!);
    if (isIP(hop) === 0) break; // not an address: the chain cannot be followed further
    candidate = hop;
    if (!isTrustedProxy(hop)) break;
  }
  return candidate;
}

/**
 * What one client controls, for counting by address: an IPv4 address whole, an IPv6 address by its
 * /64, since a host is handed a /64 and may use any address in it (RFC 4291 §2.5.4, RFC 8273). An
 * IPv6 address that embeds an IPv4 one (NAT64, RFC 6052) stays whole: it stands for one IPv4 client.
 */
export function addressKey(address: string): string {
  const zone = address.indexOf('%');
  const plain = zone === -1 ? address : address.slice(0, zone);
  if (isIP(plain) !== 6 || plain.includes('.')) return plain;
  const [left = '', right] = plain.split('::');
  const head = left === '' ? [] : left.split(':');
  const tail = right === undefined || right === '' ? [] : right.split(':');
  const zeros = Array<string>(8 - head.length - tail.length).fill('0');
  const groups = right === undefined ? head : [...head, ...zeros, ...tail];
  return `${groups
    .slice(0, 4)
    .map((group) => Number.parseInt(group, 16).toString(16))
    .join(':')}::/64`;
}

/** The address a call is counted by: its client address (clientAddress), keyed as addressKey says. */
export function addressOf(request: IncomingMessage, isTrustedProxy: (address: string) => boolean): string {
  const peer = request.socket.remoteAddress ?? '';
  return addressKey(clientAddress(peer, request.headers['x-forwarded-for'], isTrustedProxy));
}

export function callerOf(
  principal: Principal | null,
  request: IncomingMessage,
  isTrustedProxy: (address: string) => boolean,
): string {
  if (principal !== null) return `p:${principal.subject}`;
  return `a:${addressOf(request, isTrustedProxy)}`;
}
