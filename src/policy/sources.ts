// Source rules (policy.sources): where a call may come from, whatever its token. By client address,
// resolved through server.trustedProxies as the limits resolve it (Kong's ip-restriction, Traefik's
// ipAllowList, Envoy RBAC's remote_ip), and by the client certificate the API listener verified with
// server.tls.clientCaFile. A certificate only narrows who may call: the token is still required.
import type { IncomingMessage } from 'node:http';
import proxyAddr from '@fastify/proxy-addr';
import type { SourceRuleConfig } from '../config/schema.js';
import { clientAddress } from '../exchange/caller.js';
import { certificateAccepted, certificateNames, type CertificateNames } from '../exchange/client-certificate.js';

export type SourceRefusal = 'address' | 'certificate';

/** Undefined when the call may come from where it comes from; otherwise what refused it. */
export type SourceCheck = (operation: string, request: IncomingMessage) => SourceRefusal | undefined;

type AddressMatcher = (address: string) => boolean;

interface CompiledRule {
  readonly operations: ReadonlySet<string> | undefined;
  readonly deny: AddressMatcher | undefined;
  readonly allow: AddressMatcher | undefined;
  readonly certificate: CertificateNames | undefined;
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

function compile(rule: SourceRuleConfig): CompiledRule {
  const certificate = rule.clientCertificate;
  return {
    operations: rule.operations === undefined ? undefined : new Set(rule.operations),
    deny: addressMatcher(rule.deny),
    allow: addressMatcher(rule.allow),
    certificate: certificate === undefined ? undefined : certificateNames(certificate.subjects, certificate.dnsNames),
  };
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
      if (rule.certificate !== undefined && !certificateAccepted(rule.certificate, request)) return 'certificate';
    }
    return undefined;
  };
}
