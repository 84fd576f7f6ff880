// Brokered Canton tokens: for a consumer with upstreamToken, the gateway asks the participant's
// identity provider for the consumer's token itself (OAuth 2.0 client credentials, RFC 6749 §4.4,
// through oauth4webapi), keeps it until shortly before it expires, and refreshes it ahead of time
// with one request however many calls wait. A token is never sent once it has less than
// minRemainingSeconds left; an identity provider that is down, slow or answers anything else than a
// token gives the waiting calls a coded 503 within timeoutMs, and the next try comes a second later.
import {
  allowInsecureRequests,
  ClientSecretBasic,
  ClientSecretPost,
  clientCredentialsGrantRequest,
  customFetch,
  processClientCredentialsResponse,
  type CustomFetchOptions,
} from 'oauth4webapi';
import type { ConsumerConfig, ConsumersConfig } from '../config/schema.js';
import { Errors, GatewayError } from '../errors.js';
import type { UpstreamCredential } from '../exchange/upstream-credential.js';

type UpstreamTokenConfig = NonNullable<ConsumerConfig['upstreamToken']>;
type Timing = ConsumersConfig['upstreamTokens'];

/** A token endpoint's answer is a few kilobytes: a larger one is not read further. */
const MAX_ANSWER_BYTES = 64 * 1024;
/** After a failed request, the calls that find no usable token are refused at once for this long. */
const RETRY_AFTER_FAILURE_MS = 1_000;

export interface TokenBroker {
  /** A credential with at least minRemainingSeconds left: at once, or after a refresh; rejects with the 503. */
  credential(): UpstreamCredential | Promise<UpstreamCredential>;
  /** What the status page shows of it: never the token. */
  status(): BrokeredTokenStatus;
}

export interface BrokeredTokenStatus {
  /** held: a token not yet expired; none: none asked for yet (the first call asks), or the last one expired. */
  readonly state: 'held' | 'none' | 'failing';
  /** ISO 8601, while one is held. */
  readonly expiresAt?: string;
  /** Why the last request failed (as logged: the kind of failure, never a body or a secret), while failing. */
  readonly lastFailure?: string;
}

export interface TokenBrokerOptions {
  readonly consumer: string;
  readonly timing: Timing;
  /** Each token request's result (metrics). */
  readonly onRequest?: (result: 'success' | 'failure') => void;
  readonly log: { warn(details: object, message: string): void; info(details: object, message: string): void };
  readonly now?: () => number;
}

interface HeldToken {
  readonly token: string;
  /** Epoch milliseconds. */
  readonly expiresAtMs: number;
}

/** fetch whose answer body is read only up to MAX_ANSWER_BYTES (the identity provider's answer is held in memory). */
async function boundedFetch(url: string, options: CustomFetchOptions<'POST', URLSearchParams>): Promise<Response> {
  const response = await fetch(url, { ...options, redirect: 'manual' });
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (response.body !== null) {
    for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
      size += chunk.byteLength;
      if (size > MAX_ANSWER_BYTES) throw new Error(`the token endpoint answered more than ${MAX_ANSWER_BYTES} bytes`);
      chunks.push(chunk);
    }
  }
  const empty = [101, 204, 205, 304].includes(response.status);
  return new Response(empty ? null : Buffer.concat(chunks), {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}

/** When the token stops being valid: its JWT exp, or expires_in, whichever comes first; undefined when neither says. */
function expiryOf(token: string, expiresIn: number | undefined, receivedAtMs: number): number | undefined {
  let exp: number | undefined;
  try {
    const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as {
      exp?: unknown;
    };
    if (typeof claims.exp === 'number' && Number.isFinite(claims.exp)) exp = claims.exp * 1000;
  } catch {
    exp = undefined; // an opaque token: expires_in alone
  }
  const byExpiresIn = typeof expiresIn === 'number' && expiresIn > 0 ? receivedAtMs + expiresIn * 1000 : undefined;
  if (exp === undefined) return byExpiresIn;
  return byExpiresIn === undefined ? exp : Math.min(exp, byExpiresIn);
}

/** One token request: the token and its expiry, or a throw whose message names what went wrong (never a secret). */
async function requestToken(config: UpstreamTokenConfig, timeoutMs: number, now: () => number): Promise<HeldToken> {
  const url = new URL(config.tokenUrl);
  const server = { issuer: url.origin, token_endpoint: config.tokenUrl };
  const client = { client_id: config.clientId };
  const authentication =
    config.clientAuthentication === 'post'
      ? ClientSecretPost(config.clientSecret)
      : ClientSecretBasic(config.clientSecret);
  const parameters: Record<string, string> = { ...config.parameters };
  if (config.scope !== undefined) parameters.scope = config.scope;
  const options = {
    signal: AbortSignal.timeout(timeoutMs),
    [customFetch]: boundedFetch,
    ...(url.protocol === 'http:' && { [allowInsecureRequests]: true }),
  };
  const sentAt = now();
  const response = await clientCredentialsGrantRequest(server, client, authentication, parameters, options);
  const answer = await processClientCredentialsResponse(server, client, response);
  const expiresAtMs = expiryOf(answer.access_token, answer.expires_in, sentAt);
  if (expiresAtMs === undefined) throw new Error('the token has neither an exp claim nor expires_in');
  return { token: answer.access_token, expiresAtMs };
}

export function upstreamTokenUnavailable(consumer: string, reason: string): GatewayError {
  return new GatewayError(
    Errors.GATEWAY_UPSTREAM_TOKEN_UNAVAILABLE,
    { cause: 'The gateway could not obtain the Canton token for this consumer.', context: { consumer } },
    { reason: `upstream token: ${reason}` },
  );
}

export function createTokenBroker(config: UpstreamTokenConfig, options: TokenBrokerOptions): TokenBroker {
  const now = options.now ?? Date.now;
  const { timeoutMs, refreshBeforeExpirySeconds, minRemainingSeconds } = options.timing;
  let held: HeldToken | undefined;
  let refreshing: Promise<void> | undefined;
  let failedAt = Number.NEGATIVE_INFINITY;
  let lastFailure = '';
  const credential: UpstreamCredential = {
    // Read when the call is sent: the freshest token held; never one past its expiry.
    token: () => (held !== undefined && held.expiresAtMs > now() ? held.token : undefined),
  };
  const usable = () => held !== undefined && held.expiresAtMs - now() > minRemainingSeconds * 1000;

  function refresh(): Promise<void> {
    refreshing ??= requestToken(config, timeoutMs, now)
      .then(
        (token) => {
          held = token;
          options.onRequest?.('success');
          if (failedAt !== Number.NEGATIVE_INFINITY)
            options.log.info({ consumer: options.consumer }, 'upstream token obtained again');
          failedAt = Number.NEGATIVE_INFINITY;
        },
        (error: unknown) => {
          options.onRequest?.('failure');
          lastFailure = describeFailure(error, timeoutMs);
          if (failedAt === Number.NEGATIVE_INFINITY)
            options.log.warn({ consumer: options.consumer, error: lastFailure }, 'upstream token request failed');
          failedAt = now();
        },
      )
      .finally(() => {
        refreshing = undefined;
      });
    return refreshing;
  }

  const refused = () =>
    upstreamTokenUnavailable(
      options.consumer,
      held !== undefined && !usable() && failedAt === Number.NEGATIVE_INFINITY
        ? `the tokens live shorter than minRemainingSeconds (${minRemainingSeconds} s)`
        : lastFailure,
    );

  return {
    status() {
      const current = held !== undefined && held.expiresAtMs > now() ? held : undefined;
      const failing = failedAt !== Number.NEGATIVE_INFINITY;
      return {
        state: failing ? 'failing' : current === undefined ? 'none' : 'held',
        ...(current !== undefined && { expiresAt: new Date(current.expiresAtMs).toISOString() }),
        ...(failing && { lastFailure: lastFailure }),
      };
    },
    credential() {
      if (usable()) {
        // Ahead of its expiry, one refresh for every call; the calls go on with the token held.
        if (
          held!.expiresAtMs - now() <= refreshBeforeExpirySeconds * 1000 &&
          now() - failedAt >= RETRY_AFTER_FAILURE_MS
        )
          void refresh();
        return credential;
      }
      if (refreshing === undefined && now() - failedAt < RETRY_AFTER_FAILURE_MS) throw refused();
      return refresh().then(() => {
        if (!usable()) throw refused();
        return credential;
      });
    },
  };
}

/** What the log says of a failed token request: the kind of failure, never the answer's body or a secret. */
function describeFailure(error: unknown, timeoutMs: number): string {
  const {
    name,
    message,
    status,
    error: code,
  } = error as {
    name?: string;
    message?: string;
    status?: unknown;
    error?: unknown;
  };
  if (name === 'TimeoutError' || name === 'AbortError') return `no answer within ${timeoutMs} ms`;
  // oauth4webapi's ResponseBodyError: the endpoint's OAuth error code (RFC 6749 §5.2), e.g. invalid_client.
  if (typeof code === 'string' && /^[\x20-\x7e]{1,64}$/.test(code))
    return `the token endpoint refused: ${code}${typeof status === 'number' ? ` (HTTP ${status})` : ''}`;
  return String(message ?? name ?? 'failed').slice(0, 200);
}
