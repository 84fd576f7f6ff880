// The credential the participant is sent for an exchange in place of the client's own, when the
// gateway brokers it (consumers/: a consumer's Canton token, or none for a gateway key, which never
// leaves the gateway). Set by a stage on the exchange's request, read by the forwarder and the tunnel.
import type { IncomingMessage } from 'node:http';

export interface UpstreamCredential {
  /** The token to send (the freshest the broker holds), or undefined to send none. */
  token(): string | undefined;
}

const kUpstreamCredential = Symbol('ledger-gateway.upstreamCredential');
type Carrying = IncomingMessage & { [kUpstreamCredential]?: UpstreamCredential };

/** From now on the participant is sent `credential` for this request, never the client's Authorization or jwt.token. */
export function replaceUpstreamCredential(request: IncomingMessage, credential: UpstreamCredential): void {
  (request as Carrying)[kUpstreamCredential] = credential;
}

/** The credential that replaces the client's for this request, or undefined: the client's own goes on. */
export function upstreamCredentialOf(request: IncomingMessage): UpstreamCredential | undefined {
  return (request as Carrying)[kUpstreamCredential];
}

/** A gateway key's calls without a brokered token: nothing is sent in its place. */
export const NO_UPSTREAM_CREDENTIAL: UpstreamCredential = Object.freeze({ token: () => undefined });
