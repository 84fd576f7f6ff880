// TLS on the API listener (server.tls): the options Node's HTTPS server takes, and the reload of
// the files, so that a renewed certificate (cert-manager writes the Secret's files anew) serves new
// connections without a restart. Connections already open keep the context they began with.
import { constants } from 'node:crypto';
import { createSecureContext, type Server as TlsServer } from 'node:tls';
import type { ListenerTlsConfig } from '../config/schema.js';
import { readServerTls } from '../config/load.js';

export interface ListenerTlsFiles {
  readonly cert: Buffer;
  readonly key: Buffer;
  readonly ca?: Buffer;
}

export type ClientCertificateMode = ListenerTlsConfig['clientCertificate'];

/**
 * The secure context's options. With a client CA the listener asks every client for a certificate it
 * signs: "require" refuses the handshake without one; "request" accepts it, unverified connections
 * then have none as far as policy.sources is concerned. A resumed session restores the certificate
 * of the handshake it began with, unverified again (RFC 8446 §2.2): unless resumeSessions, the
 * listener issues no ticket (SSL_OP_NO_TICKET; Node keeps no session cache of its own without a
 * 'resumeSession' listener), so every connection makes a full handshake.
 */
export function listenerSecureOptions(
  files: ListenerTlsFiles,
  tls: { readonly clientCertificate: ClientCertificateMode; readonly resumeSessions: boolean },
) {
  return {
    cert: files.cert,
    key: files.key,
    ...(files.ca !== undefined && {
      ca: files.ca,
      requestCert: true,
      rejectUnauthorized: tls.clientCertificate === 'require',
      ...(!tls.resumeSessions && { secureOptions: constants.SSL_OP_NO_TICKET }),
    }),
  };
}

function same(a: ListenerTlsFiles, b: ListenerTlsFiles): boolean {
  return (
    a.cert.equals(b.cert) &&
    a.key.equals(b.key) &&
    (a.ca === undefined ? b.ca === undefined : b.ca !== undefined && a.ca.equals(b.ca))
  );
}

interface Log {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
}

/**
 * Reads the files again every reloadIntervalMs; changed and usable, they become the listener's
 * secure context; unreadable or unusable, the last good one stays (said once per problem). Returns
 * the function that stops it.
 */
export function watchListenerTls(
  server: TlsServer,
  tls: ListenerTlsConfig,
  initial: ListenerTlsFiles,
  log: Log,
): () => void {
  let current = initial;
  let reported: string | undefined;
  const timer = setInterval(() => {
    let next: ListenerTlsFiles;
    try {
      next = readServerTls(tls);
      if (same(next, current)) {
        reported = undefined;
        return;
      }
      createSecureContext(listenerSecureOptions(next, tls)); // throws for a key that does not match, or not PEM
    } catch (error) {
      const problem = (error as Error).message;
      if (problem !== reported)
        log.warn({ err: problem }, 'server TLS files cannot be used: the listener keeps its last good certificate');
      reported = problem;
      return;
    }
    server.setSecureContext(listenerSecureOptions(next, tls));
    current = next;
    reported = undefined;
    log.info({ certFile: tls.certFile }, 'server TLS certificate reloaded: new connections use it');
  }, tls.reloadIntervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
