// The request context stage, for calls and upgrades alike: sound framing, no Connection header that
// would strip the credential on its way to the participant, for a call Content-Type lines that agree,
// a target under server.pathPrefix when one is set (path-prefix.ts), a clean target and the operation
// from the route catalogue (request-context.ts); and no new exchange once the gateway is shutting down.
import type { IncomingMessage } from 'node:http';
import { parseContentType } from '../body/content-type.js';
import type { RoutesConfig } from '../config/schema.js';
import { Errors, GatewayError } from '../errors.js';
import type { Exchange, Stage } from './exchange.js';
import { outsidePathPrefix, outsidePathPrefixRefusal } from './path-prefix.js';
import {
  connectionOptionProblem,
  contentTypeProblem,
  expectationProblem,
  framingProblem,
  framingRefusal,
  resolveOperation,
  resolveUpgradeOperation,
} from './request-context.js';

export interface ContextStageOptions {
  readonly routes: RoutesConfig;
  /** Called once the operation is known (the exchange counts as in flight). */
  readonly enter: (exchange: Exchange) => void;
  /** Shutdown has begun (readiness reports 503). */
  readonly shuttingDown: () => boolean;
  /** Shutdown's drain delay is over and the listener is closing. */
  readonly closing: () => boolean;
}

export function createContextStage(options: ContextStageOptions): Stage {
  const { routes, enter, shuttingDown, closing } = options;
  return function establishContext(exchange) {
    const raw = exchange.raw;
    const framing = framingProblem(raw);
    if (framing !== undefined) throw framingRefusal(framing);
    const expectation = expectationProblem(raw.headers.expect);
    if (expectation !== undefined)
      throw new GatewayError(
        Errors.GATEWAY_EXPECTATION_FAILED,
        { cause: `Expectation failed: ${expectation}.` },
        { headers: { connection: 'close' } },
      );
    const upgrade = exchange.kind === 'upgrade';
    const headProblem =
      connectionOptionProblem(raw.headers.connection, upgrade) ??
      (upgrade ? undefined : contentTypeProblem(raw.rawHeaders));
    if (headProblem !== undefined)
      throw new GatewayError(Errors.GATEWAY_MALFORMED_REQUEST, { cause: `The request is malformed: ${headProblem}.` });
    if (!upgrade) showUnparseableTypeAsUntyped(raw);
    if (outsidePathPrefix(raw)) throw outsidePathPrefixRefusal(raw);
    exchange.operation = upgrade ? resolveUpgradeOperation(raw) : resolveOperation(raw.method!, raw.url!, routes);
    enter(exchange);
    // A call is served through the drain delay, while load balancers take the gateway out of
    // rotation (each answer closes its connection), and refused once the listener closes. A stream
    // opened after the signal would be cut when the grace ends and hold the shutdown that long: it
    // is refused from the signal on, so that its client reconnects elsewhere.
    if (upgrade ? shuttingDown() : closing()) {
      throw new GatewayError(
        Errors.GATEWAY_UPSTREAM_UNAVAILABLE,
        { cause: 'The gateway is shutting down.' },
        { headers: { connection: 'close' } },
      );
    }
  };
}

/**
 * Fastify answers 415 to a Content-Type it cannot parse, before any handler; pekko-http keeps such a
 * line as a raw header and reads the body as untyped. Fastify (which reads the request's parsed
 * headers) is shown the type pekko then assumes; the line itself is forwarded as sent (the forwarder
 * and the body readers read the raw header lines).
 */
function showUnparseableTypeAsUntyped(raw: IncomingMessage): void {
  const contentType = raw.headers['content-type'];
  if (contentType !== undefined && parseContentType(contentType) === undefined)
    raw.headers['content-type'] = 'application/octet-stream';
}
