// Where the participant's IdPs may have their keys fetched from. Their jwksUrls are set by whoever
// administers the participant (POST/PATCH /v2/idps), not by the gateway's operator, so they get a
// stricter rule than the config file's issuers: https only, and no loopback, link-local or private
// address (whether written in the URL or resolved from its name at connection time) unless
// auth.participantIdentityProviders.allowedJwksHosts allows it. Otherwise an IdP could make the
// gateway fetch from its own pod network or a cloud metadata address (169.254.169.254).
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { Agent } from 'undici';

/**
 * IPv4-compatible IPv6 (::a.b.c.d, RFC 4291 §2.5.5.1, deprecated): ipaddr.js calls it unicast, but it
 * carries an IPv4 address as the transition forms do.
 */
const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96');

/**
 * Whether an address is publicly routable: ipaddr.js's "unicast", i.e. none of the IANA IPv4 and IPv6
 * Special-Purpose Address Registries' ranges (RFC 6890). Every form that carries an IPv4 address inside
 * IPv6 is refused whatever it carries: IPv4-mapped and -compatible, NAT64 (64:ff9b::/96, RFC 6052;
 * 64:ff9b:1::/48, RFC 8215), 6to4 (2002::/16, RFC 3056), Teredo (2001::/32, RFC 4380), SIIT (RFC 6145);
 * a gateway next to a NAT64 or 6to4 relay would otherwise reach 127.0.0.1 or 169.254.169.254 through them.
 */
function isPublic(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).match(IPV4_COMPATIBLE)) return false;
  return parsed.range() === 'unicast';
}

const isLoopback = (address: string) => ipaddr.isValid(address) && ipaddr.process(address).range() === 'loopback';

/** An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is matched against allowedJwksHosts as the IPv4 address it carries. */
function normalized(address: string): { address: string; family: 'ipv4' | 'ipv6' } {
  const plain = ipaddr.isValid(address) ? ipaddr.process(address) : undefined;
  if (plain === undefined) return { address, family: isIP(address) === 6 ? 'ipv6' : 'ipv4' };
  return { address: plain.toString(), family: plain.kind() };
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
  const nonPublic = (address: string) => !isPublic(address);

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
      const loopback = literal ? isLoopback(host) : isLoopbackName(host);
      if (url.protocol !== 'https:' && !(url.protocol === 'http:' && allowed && loopback))
        return 'jwksUrl: must be https (http only for a loopback host allowed in auth.participantIdentityProviders.allowedJwksHosts)';
      if (!allowed && (literal ? nonPublic(host) : isLoopbackName(host)))
        return 'jwksUrl: names a loopback, link-local or private address (or another special-purpose one, IPv4 inside IPv6 included); allow it in auth.participantIdentityProviders.allowedJwksHosts';
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
