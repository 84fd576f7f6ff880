// Where the participant's IdPs may have their keys fetched from. Their jwksUrls are set by whoever
// administers the participant (POST/PATCH /v2/idps), not by the gateway's operator, so they get a
// stricter rule than the config file's issuers: https only, and no loopback, link-local or private
// address (whether written in the URL or resolved from its name at connection time) unless
// auth.participantIdentityProviders.allowedJwksHosts allows it. Otherwise an IdP could make the
// gateway fetch from its own pod network or a cloud metadata address (169.254.169.254).
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { Agent } from 'undici';

/** Special-purpose ranges (IANA IPv4 and IPv6 Special-Purpose Address Registries, RFC 6890) not reachable publicly. */
const NON_PUBLIC_RANGES: ReadonlyArray<readonly [string, number, 'ipv4' | 'ipv6']> = [
  ['0.0.0.0', 8, 'ipv4'], // "this network" (RFC 791)
  ['10.0.0.0', 8, 'ipv4'], // private (RFC 1918)
  ['100.64.0.0', 10, 'ipv4'], // shared address space, carrier-grade NAT (RFC 6598)
  ['127.0.0.0', 8, 'ipv4'], // loopback
  ['169.254.0.0', 16, 'ipv4'], // link-local, cloud metadata (RFC 3927)
  ['172.16.0.0', 12, 'ipv4'], // private (RFC 1918)
  ['192.0.0.0', 24, 'ipv4'], // IETF protocol assignments (RFC 6890)
  ['192.168.0.0', 16, 'ipv4'], // private (RFC 1918)
  ['198.18.0.0', 15, 'ipv4'], // benchmarking (RFC 2544)
  ['224.0.0.0', 3, 'ipv4'], // multicast and reserved, broadcast
  ['::', 128, 'ipv6'], // unspecified
  ['::1', 128, 'ipv6'], // loopback
  ['fc00::', 7, 'ipv6'], // unique local (RFC 4193)
  ['fe80::', 10, 'ipv6'], // link-local
  ['fec0::', 10, 'ipv6'], // site-local, deprecated (RFC 3879)
  ['ff00::', 8, 'ipv6'], // multicast
];

const NON_PUBLIC = new BlockList();
for (const [network, prefix, family] of NON_PUBLIC_RANGES) NON_PUBLIC.addSubnet(network, prefix, family);

/** An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is judged as the IPv4 address it carries. */
function normalized(address: string): { address: string; family: 'ipv4' | 'ipv6' } {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped !== null) return { address: mapped[1]!, family: 'ipv4' };
  return { address, family: isIP(address) === 6 ? 'ipv6' : 'ipv4' };
}

function isLoopbackName(host: string): boolean {
  return host === 'localhost' || host.endsWith('.localhost'); // RFC 6761 §6.3
}

/** Why an allowedJwksHosts entry is not a host name, an IP address or a CIDR; undefined when it is one. */
export function allowedJwksHostProblem(entry: string): string | undefined {
  const slash = entry.indexOf('/');
  if (slash !== -1) {
    const address = entry.slice(0, slash);
    const prefix = Number(entry.slice(slash + 1));
    const family = isIP(address);
    const max = family === 4 ? 32 : 128;
    if (
      family === 0 ||
      !Number.isInteger(prefix) ||
      prefix < 0 ||
      prefix > max ||
      !/^\d+$/.test(entry.slice(slash + 1))
    )
      return 'not a CIDR (address/prefix)';
    return undefined;
  }
  if (isIP(entry.replace(/^\[|\]$/g, '')) !== 0) return undefined;
  return /^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?$/.test(entry)
    ? undefined
    : 'not a host name, an IP address or a CIDR';
}

export interface JwksHostRule {
  /** Why a participant IdP's jwksUrl is refused by its address or scheme, or undefined. */
  problemOf(jwksUrl: string): string | undefined;
  /** Whether an address that `hostname` resolved to may be connected to. */
  addressAllowed(hostname: string, address: string): boolean;
}

/** The rule for these allowedJwksHosts entries (each checked by allowedJwksHostProblem at start). */
export function jwksHostRule(allowedHosts: readonly string[]): JwksHostRule {
  const names = new Set<string>();
  const addresses = new BlockList();
  for (const entry of allowedHosts) {
    const slash = entry.indexOf('/');
    if (slash !== -1) {
      const network = entry.slice(0, slash);
      addresses.addSubnet(network, Number(entry.slice(slash + 1)), isIP(network) === 6 ? 'ipv6' : 'ipv4');
    } else if (isIP(entry.replace(/^\[|\]$/g, '')) !== 0) {
      const { address, family } = normalized(entry.replace(/^\[|\]$/g, ''));
      addresses.addAddress(address, family);
    } else names.add(entry.toLowerCase().replace(/\.$/, ''));
  }
  const allowedAddress = (address: string) => {
    const { address: plain, family } = normalized(address);
    return addresses.check(plain, family);
  };
  const nonPublic = (address: string) => {
    const { address: plain, family } = normalized(address);
    return NON_PUBLIC.check(plain, family);
  };

  return {
    problemOf(jwksUrl) {
      let url: URL;
      try {
        url = new URL(jwksUrl);
      } catch {
        return 'jwksUrl: not a URL';
      }
      const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
      const literal = isIP(host) !== 0;
      const allowed = names.has(host.replace(/\.$/, '')) || (literal && allowedAddress(host));
      const loopback = literal ? nonPublic(host) && /^(127\.|::1$|::ffff:127\.)/.test(host) : isLoopbackName(host);
      if (url.protocol !== 'https:' && !(url.protocol === 'http:' && allowed && loopback))
        return 'jwksUrl: must be https (http only for a loopback host allowed in auth.participantIdentityProviders.allowedJwksHosts)';
      if (!allowed && (literal ? nonPublic(host) : isLoopbackName(host)))
        return 'jwksUrl: names a loopback, link-local or private address; allow it in auth.participantIdentityProviders.allowedJwksHosts';
      return undefined;
    },
    addressAllowed(hostname, address) {
      return names.has(hostname.toLowerCase().replace(/\.$/, '')) || allowedAddress(address) || !nonPublic(address);
    },
  };
}

/**
 * The connections the participant's key sets are fetched on: a host name is resolved here, and an
 * address the rule refuses is never connected to (checked at each connection, so a name that
 * resolves to a private address later, DNS rebinding, is refused then too). `rule()` is read at each
 * lookup: a reload's allowedJwksHosts applies to the next connection.
 */
export function guardedKeySetAgent(rule: () => JwksHostRule): Agent {
  const lookup: LookupFunction = (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, found: LookupAddress[]) => {
      if (error !== null) {
        callback(error, '', 4);
        return;
      }
      const allowed = found.filter((entry) => rule().addressAllowed(hostname, entry.address));
      if (allowed.length === 0) {
        const refused = Object.assign(new Error('the host resolves to a loopback, link-local or private address'), {
          code: 'EJWKSHOSTNOTALLOWED',
        });
        callback(refused, '', 4);
        return;
      }
      if (options.all === true) (callback as unknown as (e: null, all: LookupAddress[]) => void)(null, allowed);
      else callback(null, allowed[0]!.address, allowed[0]!.family);
    });
  };
  // Key sets are fetched rarely: a kept-alive connection would only sit idle.
  return new Agent({ connect: { lookup }, keepAliveTimeout: 1_000, keepAliveMaxTimeout: 1_000 });
}
