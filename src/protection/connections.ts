// Caps on the API listener's open client connections, checked as each is accepted: in total (Node's
// own server.maxConnections) and per peer address. A connection over a cap is closed at once,
// unanswered, as Envoy's global_downstream_max_connections and HAProxy's
// `tcp-request connection reject` close it: at accept time there is no request to answer yet (and,
// with TLS, no handshake), and a 503 would first cost reading one. The peer is the address counted:
// X-Forwarded-For is not known before a request, and trusted proxies, which carry many clients on
// their connections, are counted in the total only.
import type { Server } from 'node:net';
import type { Socket } from 'node:net';
import { addressKey, clientAddress } from '../exchange/caller.js';
import type { GatewayMetrics } from '../telemetry/metrics.js';
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
  /**
   * Applies new caps (a reload) to the connections accepted from now on; those already open stay
   * open, and a lowered cap refuses new ones until enough have closed.
   */
  setCaps(caps: ConnectionCaps): void;
}

/** Applies `caps` to the connections `server` accepts from now on. */
export function limitConnections(
  server: Server,
  initialCaps: ConnectionCaps,
  options: ConnectionLimitOptions,
): ConnectionCount {
  let maxPerAddress: number | undefined;
  function setCaps(caps: ConnectionCaps): void {
    // Node checks maxConnections at each accept; Infinity is its own default (no cap).
    server.maxConnections = caps.max ?? Infinity;
    maxPerAddress = caps.maxPerAddress;
  }
  setCaps(initialCaps);
  server.on('drop', () => options.onRefused?.('total'));
  // Counted for every connection, capped or not, so that a cap set by a reload counts those already open.
  const byAddress = new SlotCounts();
  let open = 0;
  server.on('connection', (socket: Socket) => {
    const peer = socket.remoteAddress;
    let key: string | undefined;
    if (peer !== undefined && !options.isTrustedProxy(peer)) {
      key = addressKey(clientAddress(peer, undefined, options.isTrustedProxy));
      if (maxPerAddress !== undefined && byAddress.count(key) >= maxPerAddress) {
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
    setCaps,
  };
}

/**
 * The API listener's connections capped as they are accepted, before TLS or any request
 * (protection.connections; a reload's caps apply to the connections accepted after it), and counted:
 * each refusal, and the connections open at scrape.
 */
export function capConnections(
  server: Server,
  caps: ConnectionCaps,
  options: {
    readonly isTrustedProxy: (address: string) => boolean;
    readonly metrics: Pick<GatewayMetrics, 'connectionRefused' | 'watchConnections'>;
  },
): ConnectionCount {
  const { metrics } = options;
  const connections = limitConnections(server, caps, {
    isTrustedProxy: options.isTrustedProxy,
    onRefused: (limit) => metrics.connectionRefused(limit),
  });
  metrics.watchConnections(() => connections.open);
  return connections;
}
