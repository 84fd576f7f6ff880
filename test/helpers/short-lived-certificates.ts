// A throwaway client CA and client certificates whose validity a test chooses (seconds, not the
// fixtures' years): what it takes to see a certificate expire while a connection or a TLS session
// lives on. Keys come from node:crypto (fast); node-forge writes and signs the certificates.
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import forge from 'node-forge';

export interface ClientCertificate {
  readonly cert: string;
  readonly key: string;
}

export interface ClientCa {
  /** The CA certificate's PEM file: server.tls.clientCaFile. */
  readonly caFile: string;
  /**
   * A client certificate `CN=<commonName>` (with `O=<organization>` after it, and DNS names in its
   * subjectAltName, when given) signed by this CA, valid from a minute ago until `notAfter`.
   */
  issue(commonName: string, notAfter: Date, names?: SubjectNames): ClientCertificate;
}

export interface SubjectNames {
  readonly organization?: string;
  readonly dnsNames?: readonly string[];
}

function keyPair() {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  const key = forge.pki.privateKeyFromPem(pem);
  return { pem, key, publicKey: forge.pki.setRsaPublicKey(key.n, key.e) };
}

let serial = 1;

function certificate(
  subject: string,
  publicKey: forge.pki.PublicKey,
  issuer: { name: string; key: forge.pki.rsa.PrivateKey },
  notAfter: Date,
  ca: boolean,
  names: SubjectNames = {},
): forge.pki.Certificate {
  const certificate = forge.pki.createCertificate();
  certificate.publicKey = publicKey;
  certificate.serialNumber = (serial++).toString(16).padStart(2, '0');
  certificate.validity.notBefore = new Date(Date.now() - 60_000);
  certificate.validity.notAfter = notAfter;
  certificate.setSubject([
    { name: 'commonName', value: subject },
    ...(names.organization === undefined ? [] : [{ name: 'organizationName', value: names.organization }]),
  ]);
  certificate.setIssuer([{ name: 'commonName', value: issuer.name }]);
  certificate.setExtensions(
    ca
      ? [
          { name: 'basicConstraints', cA: true, critical: true },
          { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
        ]
      : [
          { name: 'basicConstraints', cA: false },
          { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
          { name: 'extKeyUsage', clientAuth: true },
          ...(names.dnsNames === undefined
            ? []
            : [{ name: 'subjectAltName', altNames: names.dnsNames.map((value) => ({ type: 2, value })) }]),
        ],
  );
  certificate.sign(issuer.key, forge.md.sha256.create());
  return certificate;
}

/** A new client CA, its files in a temporary directory. */
export function createClientCa(): ClientCa {
  const directory = mkdtempSync(join(tmpdir(), 'client-ca-'));
  const caKeys = keyPair();
  const name = 'ledger-gateway test client CA';
  const caCertificate = certificate(
    name,
    caKeys.publicKey,
    { name, key: caKeys.key },
    new Date(Date.now() + 86_400_000),
    true,
  );
  const caFile = join(directory, 'client-ca.pem');
  writeFileSync(caFile, forge.pki.certificateToPem(caCertificate));
  return {
    caFile,
    issue(commonName, notAfter, names) {
      const keys = keyPair();
      const issued = certificate(commonName, keys.publicKey, { name, key: caKeys.key }, notAfter, false, names);
      return { cert: forge.pki.certificateToPem(issued), key: keys.pem };
    },
  };
}
