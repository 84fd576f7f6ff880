// Who a call is counted against: its principal (the token's `sub`, the Ledger API user id), or,
// for a call without one (a public operation), its client address.
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import proxyAddr from '@fastify/proxy-addr';
import type { Principal } from './exchange.js';

/** Whether a peer is one of server.trustedProxies (addresses and CIDR ranges), whose X-Forwarded-For is believed. */
export function trustedProxyMatcher(entries: readonly string[]): (address: string) => boolean {
  if (entries.length === 0) return () => false;
  // @fastify/proxy-addr reads IPv4-mapped IPv6 peers (::ffff:10.0.0.1) as the IPv4 address they carry.
  const trust = proxyAddr.compile([...entries]);
  return (address) => trust(address, 0);
}

function plainAddress(address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}

/**
 * The address of one X-Forwarded-For element, or undefined when it is none. Accepted: an IPv4
 * address, with or without `:port` (`203.0.113.5`, `203.0.113.5:41234`); an IPv6 address, bare or
 * in brackets, the bracketed form with or without `:port` (`2001:db8::1`, `[2001:db8::1]`,
 * `[2001:db8::1]:41234`). Proxies that write the port (Azure's application gateway, some ingress
 * controllers) would otherwise have every client counted as the proxy itself.
 */
export function forwardedHopAddress(element: string): string | undefined {
  const hop = element.trim();
  if (hop.startsWith('[')) {
    const close = hop.indexOf(']');
    const rest = close === -1 ? '' : hop.slice(close + 1);
    const address = close === -1 ? '' : hop.slice(1, close);
    if (isIP(address) !== 6 || (rest !== '' && !/^:\d{1,5}$/.test(rest))) return undefined;
    return plainAddress(address);
  }
  const family = isIP(hop);
  if (family !== 0) return plainAddress(hop);
  const colon = hop.lastIndexOf(':');
  if (colon === -1 || !/^\d{1,5}$/.test(hop.slice(colon + 1))) return undefined;
  const address = hop.slice(0, colon);
  return isIP(address) === 4 ? address : undefined; // a bare IPv6 address with a port is ambiguous
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
  const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor).split(',');
  let candidate = plainAddress(peer);
  for (let i = hops.length - 1; i >= 0; i -= 1) {
    const hop = forwardedHopAddress(hops[i]!);
    if (hop === undefined) break; // not an address: the chain cannot be followed further
    candidate = hop;
    if (!isTrustedProxy(hop)) break;
  }
  return candidate;
}

/** The eight 16-bit groups of an IPv6 address (a dotted IPv4 tail counts as the last two). */
function ipv6Groups(address: string): number[] {
  let text = address;
  if (text.includes('.')) {
    const at = text.lastIndexOf(':');
    const [a = 0, b = 0, c = 0, d = 0] = text
      .slice(at + 1)
      .split('.')
      .map(Number);
    text = `${text.slice(0, at + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const parse = (part: string | undefined) =>
    part === undefined || part === '' ? [] : part.split(':').map((group) => Number.parseInt(group, 16));
  const [left, right] = text.split('::');
  const head = parse(left);
  if (right === undefined) return head;
  const tail = parse(right);
  return [...head, ...Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}

const dotted = (high: number, low: number) => `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;

/**
 * What one client controls, for counting by address: an IPv4 address whole, an IPv6 address by its
 * /64, since a host is handed a /64 and may use any address in it (RFC 4291 §2.5.4, RFC 8273). An
 * IPv6 address that stands for one IPv4 client counts whole, however it is written: one under
 * NAT64's well-known prefix 64:ff9b::/96 (RFC 6052 §2.1: `64:ff9b::a01:203` and `64:ff9b::10.1.2.3`
 * are one key), and an IPv4-mapped one (::ffff:0:0/96, keyed as its IPv4 address).
 */
export function addressKey(address: string): string {
  const zone = address.indexOf('%');
  const plain = zone === -1 ? address : address.slice(0, zone);
  if (isIP(plain) !== 6) return plain;
  const groups = ipv6Groups(plain);
  const prefix96 = groups.slice(0, 6).join(':');
  if (prefix96 === '0:0:0:0:0:65535') return dotted(groups[6]!, groups[7]!);
  if (prefix96 === '100:65435:0:0:0:0') return `64:ff9b::${dotted(groups[6]!, groups[7]!)}`;
  return `${groups
    .slice(0, 4)
    .map((group) => group.toString(16))
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
