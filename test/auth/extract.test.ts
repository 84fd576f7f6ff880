import { describe, expect, it } from 'vitest';
import { bearerTokenFromHeaders, checkTokenShape, webSocketToken } from '../../src/auth/extract.js';
import { subprotocolElements } from '../../src/exchange/subprotocols.js';
import { AuthFailure } from '../../src/auth/failure.js';

const JWT = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl';

function reasonOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    if (error instanceof AuthFailure) return error.reason;
    throw error;
  }
  return 'accepted';
}

/** What the authenticator refuses before verifying: the header, then (for a token its cache does not know) the shape. */
function bearer(rawHeaders: string[]): string {
  const token = bearerTokenFromHeaders(rawHeaders);
  checkTokenShape(token, 'bearer token');
  return token;
}

function webSocket(rawHeaders: string[]): string {
  const { token, source } = webSocketToken(rawHeaders);
  checkTokenShape(token, source);
  return token;
}

describe('bearerTokenFromHeaders', () => {
  it('takes the token of a Bearer Authorization header, scheme case-insensitive (RFC 7235 §2.1)', () => {
    expect(bearer(['Authorization', `Bearer ${JWT}`])).toBe(JWT);
    expect(bearer(['authorization', `bearer  ${JWT}`])).toBe(JWT);
    expect(
      bearer([
        'Host',
        'ledger',
        'Authorisation',
        'Bearer x',
        'AUTHORIZATION',
        `BeArEr ${JWT}`,
        'Content-Type',
        'application/json',
      ]),
    ).toBe(JWT);
  });

  it.each([
    ['no header', [], 'missing'],
    ['another scheme', ['Authorization', 'Basic dXNlcjpwYXNz'], 'missing'],
    ['the scheme alone', ['Authorization', 'Bearer'], 'malformed'],
    ['an empty token', ['Authorization', 'Bearer    '], 'malformed'],
    ['garbage', ['Authorization', 'Bearer not-a-jwt'], 'malformed'],
    ['characters outside b64token', ['Authorization', 'Bearer a.b.c d'], 'malformed'],
    ['an encrypted JWT (five parts)', ['Authorization', 'Bearer a.b.c.d.e'], 'malformed'],
    ['an opaque Canton admin token', ['Authorization', 'Bearer 3f2a9c0d4e5b6a7f'], 'malformed'],
    ['two Authorization headers', ['Authorization', `Bearer ${JWT}`, 'Authorization', `Bearer ${JWT}`], 'malformed'],
    [
      'two Authorization headers named in different case',
      ['authorization', `Bearer ${JWT}`, 'X-Other', 'y', 'AUTHORIZATION', 'Bearer a.b.c'],
      'malformed',
    ],
    ['only a header of the same length (Authorisation)', ['Authorisation', `Bearer ${JWT}`], 'missing'],
  ])('refuses %s', (_name, rawHeaders, reason) => {
    expect(reasonOf(() => bearer(rawHeaders))).toBe(reason);
  });

  it('leaves the shape to checkTokenShape, which names what is wrong', () => {
    expect(bearerTokenFromHeaders(['Authorization', 'Bearer a.b.c d'])).toBe('a.b.c d');
    expect(() => checkTokenShape('a.b.c d', 'bearer token')).toThrow(/outside RFC 6750 b64token/);
    expect(() => checkTokenShape('3f2a9c0d4e5b6a7f', 'bearer token')).toThrow(
      /the bearer token is not a compact signed JWT/,
    );
    expect(webSocketToken(['Sec-WebSocket-Protocol', 'jwt.token.garbage,daml.ws.auth'])).toEqual({
      token: 'garbage',
      source: 'jwt.token. subprotocol',
    });
    expect(() => checkTokenShape('garbage', 'jwt.token. subprotocol')).toThrow(
      /the jwt.token. subprotocol is not a compact signed JWT/,
    );
  });

  it('lets an unsigned token through to the verifier, which names its alg', () => {
    expect(bearer(['Authorization', 'Bearer eyJhbGciOiJub25lIn0.e30.'])).toBe('eyJhbGciOiJub25lIn0.e30.');
  });
});

describe('webSocketToken', () => {
  it('reads the jwt.token. subprotocol offered first, as Canton does (Endpoints.scala baseEndpoint)', () => {
    expect(webSocket(['Sec-WebSocket-Protocol', `jwt.token.${JWT},daml.ws.auth`])).toBe(JWT);
    expect(webSocket(['Sec-WebSocket-Protocol', `daml.ws.auth,jwt.token.${JWT}`])).toBe(JWT);
  });

  // Canton trims them since digital-asset/canton#613.
  it('reads a browser\'s offer: elements separated by ", " (RFC 6455 §11.3.4), trimmed', () => {
    // new WebSocket(url, ['daml.ws.auth', `jwt.token.${JWT}`]) in a browser
    expect(webSocket(['Sec-WebSocket-Protocol', `daml.ws.auth, jwt.token.${JWT}`])).toBe(JWT);
    expect(webSocket(['Sec-WebSocket-Protocol', `daml.ws.auth ,\t jwt.token.${JWT}  `])).toBe(JWT);
    expect(webSocket(['Sec-WebSocket-Protocol', `, ,daml.ws.auth,, jwt.token.${JWT},`])).toBe(JWT);
  });

  it('takes the first element that starts with jwt.token. when several do, with or without a space', () => {
    const other = 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJib2IifQ.c2ln';
    expect(webSocket(['Sec-WebSocket-Protocol', `jwt.token.${JWT},jwt.token.${other}`])).toBe(JWT);
    expect(webSocket(['Sec-WebSocket-Protocol', `jwt.token.${JWT}, jwt.token.${other}`])).toBe(JWT);
    expect(webSocket(['Sec-WebSocket-Protocol', `daml.ws.auth,jwt.token.${JWT},jwt.token.${other},daml.ws.auth`])).toBe(
      JWT,
    );
    // Trimmed, the element after ", " is the first (a participant that does not trim reads it too:
    // the gateway forwards the list without spaces, test/proxy/websocket.test.ts).
    expect(webSocket(['Sec-WebSocket-Protocol', `daml.ws.auth, jwt.token.${other},jwt.token.${JWT}`])).toBe(other);
    // The first one decides even when it is bad: a later good one is not tried (Canton would not either).
    expect(reasonOf(() => webSocket(['Sec-WebSocket-Protocol', `jwt.token.,jwt.token.${JWT}`]))).toBe('malformed');
    expect(reasonOf(() => webSocket(['Sec-WebSocket-Protocol', `jwt.token.garbage,jwt.token.${JWT}`]))).toBe(
      'malformed',
    );
    const emptyFirst = ['Sec-WebSocket-Protocol', `daml.ws.auth, jwt.token., jwt.token.${JWT}`];
    expect(reasonOf(() => webSocket(emptyFirst))).toBe('malformed');
  });

  it("trims only the list's optional whitespace (spaces, tabs): after another character it is no token", () => {
    expect(subprotocolElements(' a ,\tb\t, ,,c')).toEqual(['a', 'b', 'c']);
    expect(subprotocolElements('')).toEqual([]);
    // A no-break space is no list whitespace (RFC 9110 §5.6.1) nor trimmed by Canton (Scala's trim stops at U+0020).
    const afterNoBreakSpace = ['Sec-WebSocket-Protocol', `daml.ws.auth,\u00a0jwt.token.${JWT}`];
    expect(reasonOf(() => webSocket(afterNoBreakSpace))).toBe('missing');
  });

  it('prefers the Authorization header when both are present', () => {
    const other = 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJib2IifQ.c2ln';
    expect(
      webSocket(['Authorization', `Bearer ${other}`, 'Sec-WebSocket-Protocol', `jwt.token.${JWT}, daml.ws.auth`]),
    ).toBe(other);
    expect(
      webSocket(['Sec-WebSocket-Protocol', `jwt.token.${JWT},jwt.token.${JWT}`, 'Authorization', `Bearer ${other}`]),
    ).toBe(other);
    // A malformed Authorization header is refused, not passed over for the subprotocol.
    expect(reasonOf(() => webSocket(['Authorization', 'Bearer', 'Sec-WebSocket-Protocol', `jwt.token.${JWT}`]))).toBe(
      'malformed',
    );
    expect(reasonOf(() => webSocket(['Authorization', 'Basic x', 'Sec-WebSocket-Protocol', `jwt.token.${JWT}`]))).toBe(
      'missing',
    );
  });

  it.each([
    ['no token anywhere', ['Sec-WebSocket-Protocol', 'daml.ws.auth'], 'missing'],
    [
      'two tokens in two header lines',
      ['Sec-WebSocket-Protocol', `jwt.token.${JWT}`, 'Sec-WebSocket-Protocol', `jwt.token.${JWT}`],
      'malformed',
    ],
    [
      'two tokens in two header lines, one after ", "',
      ['Sec-WebSocket-Protocol', `daml.ws.auth, jwt.token.${JWT}`, 'Sec-WebSocket-Protocol', `jwt.token.${JWT}`],
      'malformed',
    ],
    ['a header with only separators', ['Sec-WebSocket-Protocol', ' , ,'], 'missing'],
    ['an empty token', ['Sec-WebSocket-Protocol', 'jwt.token.,daml.ws.auth'], 'malformed'],
    ['garbage', ['Sec-WebSocket-Protocol', 'jwt.token.garbage,daml.ws.auth'], 'malformed'],
  ])('refuses %s', (_name, rawHeaders, reason) => {
    expect(reasonOf(() => webSocket(rawHeaders))).toBe(reason);
  });
});
