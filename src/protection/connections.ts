// Caps on the API listener's open client connections, checked as each is accepted: in total (Node's
// own server.maxConnections) and per peer address. A connection over a cap is closed at once,
// unanswered, as Envoy's global_downstream_max_connections and HAProxy's
// `tcp-request connection reject` close it: at accept time there is no request to answer yet (and,
// with TLS, no handshake), and a 503 would first cost reading one. The peer is the address counted:
// X-Forwarded-For is not known before a request, and trusted proxies, which carry many clients on
// their connections, are counted in the total only.
import type { Server } from 'node:net';
import type { Socket } from 'node:net';
import { addressKey, clientAddress } from './caller.js';
import { SlotCounts } from './slot-counts.js';

export type ConnectionLimit = 'total' | 'perAddress';

export interface ConnectionCaps {
  /** Open connections in this process; undefined: no cap. */
  readonly max: number | undefined;
  /** Open connections from one peer address (an IPv6 one by its /64); undefined: no cap. */
  readonly maxPerAddress: number | undefined;
}

export interface ConnectionLimitOptions {
  readonly isTrustedProxy: (address: string) => boolean;
  /** A connection closed at accept because of `limit`. */
  readonly onRefused?: (limit: ConnectionLimit) => void;
}

export interface ConnectionCount {
  /** Client connections open now (upgraded WebSocket streams included). */
  readonly open: number;
  /** Peer addresses with at least one connection counted against maxPerAddress (tests: no leaks). */
  readonly addresses: number;
}

/** Applies `caps` to the connections `server` accepts from now on. */
export function limitConnections(
  server: Server,
  caps: ConnectionCaps,
  options: ConnectionLimitOptions,
): ConnectionCount {
  const { maxPerAddress } = caps;
  if (caps.max !== undefined) {
    server.maxConnections = caps.max;
    server.on('drop', () => options.onRefused?.('total'));
  }
  const byAddress = new SlotCounts();
  let open = 0;
  server.on('connection', (socket: Socket) => {
    const peer = socket.remoteAddress;
    let key: string | undefined;
    if (maxPerAddress !== undefined && peer !== undefined && !options.isTrustedProxy(peer)) {
      key = addressKey(clientAddress(peer, undefined, options.isTrustedProxy));
      if (byAddress.count(key) >= maxPerAddress) {
        options.onRefused?.('perAddress');
        socket.destroy();
        return;
      }
      byAddress.take(key);
    }
    open += 1;
    socket.once('close', () => {
      open -= 1;
      if (key !== undefined) byAddress.give(key);
    });
  });
  return {
    get open() {
      return open;
    },
    get addresses() {
      return byAddress.heldKeys;
    },
  };
}
