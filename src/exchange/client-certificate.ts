// The client certificate the API listener verified on a call's connection (server.tls.clientCaFile),
// matched by subject or DNS name: read by the source rules (policy/sources.ts) and by consumers
// recognised by certificate (consumers/), so it lives below both.
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';

/** Accepted certificates: by RFC 4514 subject (attribute order and spacing aside) or subjectAltName DNS name. */
export interface CertificateNames {
  readonly subjects: ReadonlyArray<ReadonlySet<string>> | undefined;
  readonly dnsNames: ReadonlySet<string> | undefined;
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

/** The names as configured (subjects as RFC 4514 strings). */
export function certificateNames(
  subjects: readonly string[] | undefined,
  dnsNames: readonly string[] | undefined,
): CertificateNames {
  return {
    subjects: subjects?.map((subject) => nameParts(subject, /,/)),
    dnsNames: dnsNames === undefined ? undefined : new Set(dnsNames),
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

/** Whether the call's connection has a verified certificate with one of these subjects or DNS names. */
export function certificateAccepted(names: CertificateNames, request: IncomingMessage): boolean {
  const certificate = verifiedCertificate(request);
  if (certificate === undefined) return false;
  if (names.subjects !== undefined) {
    // Node writes the subject one attribute a line (X509Certificate.subject).
    const subject = nameParts(certificate.subject, /\n/);
    if (names.subjects.some((accepted) => accepted.size === subject.size && [...accepted].every((p) => subject.has(p))))
      return true;
  }
  if (names.dnsNames !== undefined) {
    if (dnsNamesOf(certificate).some((name) => names.dnsNames!.has(name))) return true;
  }
  return false;
}

function dnsNamesOf(certificate: { readonly subjectAltName: string | undefined }): string[] {
  return (certificate.subjectAltName ?? '')
    .split(', ')
    .filter((entry) => entry.startsWith('DNS:'))
    .map((entry) => entry.slice(4));
}

/**
 * The call's verified certificate as facts a rule reads: its subject as RFC 4514 writes it (the most
 * specific attribute first, comma-separated) and its DNS names; undefined without one valid now.
 */
export function certificateFacts(request: IncomingMessage): { subject: string; dnsNames: string[] } | undefined {
  const certificate = verifiedCertificate(request);
  if (certificate === undefined) return undefined;
  return { subject: certificate.subject.split('\n').reverse().join(','), dnsNames: dnsNamesOf(certificate) };
}

/** Whether two RFC 4514 names are the same, attribute order and spacing aside. */
export function sameName(a: string, b: string): boolean {
  const left = nameParts(a, /,/);
  const right = nameParts(b, /,/);
  return left.size === right.size && [...left].every((part) => right.has(part));
}
