// Source rules (policy.sources): where a call may come from, whatever its token. By client address,
// resolved through server.trustedProxies as the limits resolve it (Kong's ip-restriction, Traefik's
// ipAllowList, Envoy RBAC's remote_ip), and by the client certificate the API listener verified with
// server.tls.clientCaFile. A certificate only narrows who may call: the token is still required.
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import proxyAddr from '@fastify/proxy-addr';
import type { SourceRuleConfig } from '../config/schema.js';
import { clientAddress } from '../exchange/caller.js';

export type SourceRefusal = 'address' | 'certificate';

/** Undefined when the call may come from where it comes from; otherwise what refused it. */
export type SourceCheck = (operation: string, request: IncomingMessage) => SourceRefusal | undefined;

type AddressMatcher = (address: string) => boolean;

interface CompiledRule {
  readonly operations: ReadonlySet<string> | undefined;
  readonly deny: AddressMatcher | undefined;
  readonly allow: AddressMatcher | undefined;
  readonly subjects: ReadonlyArray<ReadonlySet<string>> | undefined;
  readonly dnsNames: ReadonlySet<string> | undefined;
}

/** Why a rule cannot be applied: unknown operations, entries that are not addresses, no condition. */
export function sourceRuleProblems(rules: readonly SourceRuleConfig[], operationNames: readonly string[]): string[] {
  const problems: string[] = [];
  rules.forEach((rule, index) => {
    const at = `policy.sources[${index}]`;
    for (const operation of rule.operations ?? []) {
      if (!operationNames.includes(operation)) problems.push(`${at}.operations: unknown operation "${operation}"`);
    }
    for (const list of ['allow', 'deny'] as const) {
      (rule[list] ?? []).forEach((entry, entryIndex) => {
        if (!isAddressOrCidr(entry))
          problems.push(
            `${at}.${list}[${entryIndex}]: "${entry}" is not an IP address or CIDR (e.g. 10.0.0.0/8, fd00::/8)`,
          );
      });
    }
    const certificate = rule.clientCertificate;
    if (certificate !== undefined && certificate.subjects === undefined && certificate.dnsNames === undefined)
      problems.push(`${at}.clientCertificate: name subjects or dnsNames`);
    if (rule.allow === undefined && rule.deny === undefined && certificate === undefined)
      problems.push(`${at}: the rule has no condition (allow, deny or clientCertificate)`);
  });
  return problems;
}

function isAddressOrCidr(entry: string): boolean {
  try {
    proxyAddr.compile(entry);
    return true;
  } catch {
    return false;
  }
}

function addressMatcher(entries: readonly string[] | undefined): AddressMatcher | undefined {
  if (entries === undefined) return undefined;
  // proxy-addr reads an IPv4-mapped IPv6 address (::ffff:10.0.0.1) as the IPv4 address it carries.
  const trust = proxyAddr.compile([...entries]);
  return (address) => trust(address, 0);
}

/** An RFC 4514 name as the set of its attribute=value pairs, so that order and spacing do not matter. */
function nameParts(name: string, separator: RegExp): Set<string> {
  return new Set(
    name
      .split(separator)
      .map((part) => part.trim())
      .filter(Boolean)
      .map((part) => {
        const equals = part.indexOf('=');
        return equals === -1 ? part : `${part.slice(0, equals).trim().toUpperCase()}=${part.slice(equals + 1).trim()}`;
      }),
  );
}

function compile(rule: SourceRuleConfig): CompiledRule {
  const certificate = rule.clientCertificate;
  return {
    operations: rule.operations === undefined ? undefined : new Set(rule.operations),
    deny: addressMatcher(rule.deny),
    allow: addressMatcher(rule.allow),
    subjects: certificate?.subjects?.map((subject) => nameParts(subject, /,/)),
    dnsNames: certificate?.dnsNames === undefined ? undefined : new Set(certificate.dnsNames),
  };
}

/**
 * The certificate the listener verified on this connection and valid now, or undefined (none, not
 * verified, or outside its validity dates). The handshake checked the dates once; a kept-alive
 * connection or a resumed TLS session outlives them, so they are judged at each call (RFC 5280 §4.1.2.5).
 */
function verifiedCertificate(request: IncomingMessage) {
  const socket = request.socket as Partial<TLSSocket>;
  if (socket.authorized !== true || typeof socket.getPeerX509Certificate !== 'function') return undefined;
  const certificate = socket.getPeerX509Certificate();
  if (certificate === undefined) return undefined;
  const now = Date.now();
  return now > Date.parse(certificate.validTo) || now < Date.parse(certificate.validFrom) ? undefined : certificate;
}

function certificateAccepted(rule: CompiledRule, request: IncomingMessage): boolean {
  const certificate = verifiedCertificate(request);
  if (certificate === undefined) return false;
  if (rule.subjects !== undefined) {
    // Node writes the subject one attribute a line (X509Certificate.subject).
    const subject = nameParts(certificate.subject, /\n/);
    if (rule.subjects.some((accepted) => accepted.size === subject.size && [...accepted].every((p) => subject.has(p))))
      return true;
  }
  if (rule.dnsNames !== undefined) {
    const names = (certificate.subjectAltName ?? '')
      .split(', ')
      .filter((entry) => entry.startsWith('DNS:'))
      .map((entry) => entry.slice(4));
    if (names.some((name) => rule.dnsNames!.has(name))) return true;
  }
  return false;
}

/** The check for the configured rules, or undefined when there are none (nothing to do per call). */
export function createSourceCheck(
  rules: readonly SourceRuleConfig[],
  isTrustedProxy: (address: string) => boolean,
): SourceCheck | undefined {
  if (rules.length === 0) return undefined;
  const compiled = rules.map(compile);
  return (operation, request) => {
    let address: string | undefined;
    for (const rule of compiled) {
      if (rule.operations !== undefined && !rule.operations.has(operation)) continue;
      if (rule.deny !== undefined || rule.allow !== undefined) {
        address ??= clientAddress(
          request.socket.remoteAddress ?? '',
          request.headers['x-forwarded-for'],
          isTrustedProxy,
        );
        if (rule.deny?.(address) === true || rule.allow?.(address) === false) return 'address';
      }
      if ((rule.subjects !== undefined || rule.dnsNames !== undefined) && !certificateAccepted(rule, request))
        return 'certificate';
    }
    return undefined;
  };
}
