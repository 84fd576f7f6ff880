// The elements of a WebSocket upgrade's Sec-WebSocket-Protocol offer: read by auth/ (the token in a
// `jwt.token.` element) and by proxy/ (the one line forwarded to the participant), owned by neither.

/** Optional whitespace around a list element (RFC 9110 §5.6.1): spaces and horizontal tabs only. */
const LIST_OWS = /^[ \t]+|[ \t]+$/g;

/**
 * The elements of one Sec-WebSocket-Protocol value, a comma-separated list (RFC 6455 §11.3.4) that
 * browsers send as `a, b`: each trimmed of the list's optional whitespace, empty ones dropped
 * (RFC 9110 §5.6.1). The forwarded header is these elements joined by "," (proxy/websocket.ts).
 */
export function subprotocolElements(value: string): string[] {
  const elements: string[] = [];
  for (const element of value.split(',')) {
    const trimmed = element.replace(LIST_OWS, '');
    if (trimmed !== '') elements.push(trimmed);
  }
  return elements;
}

/** The subprotocol element that carries a bearer token on a WebSocket upgrade (Canton `Endpoints.scala`). */
export const WEBSOCKET_TOKEN_PREFIX = 'jwt.token.';
