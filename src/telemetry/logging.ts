// pino, configured once: JSON lines, tokens never written. The app writes one line per request
// (request-telemetry.ts); this file decides what a line may contain.
import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';

/** Keys whose values are credentials wherever they appear (headers, claims, config, errors). */
const SECRET_KEYS = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'sec-websocket-protocol',
  'token',
  'accessToken',
  'access_token',
  'idToken',
  'id_token',
  'refreshToken',
  'refresh_token',
  'jwt',
  'password',
  'secret',
  'clientSecret',
  'client_secret',
  'unsafeHmacSecret',
];

const key = (name: string) => (/^[A-Za-z_$][\w$]*$/.test(name) ? `.${name}` : `["${name}"]`);

/** pino redact paths: each secret key at the top and up to three levels down. */
export const REDACT_PATHS: readonly string[] = SECRET_KEYS.flatMap((name) => {
  const tail = key(name);
  return [tail.startsWith('.') ? tail.slice(1) : tail, `*${tail}`, `*.*${tail}`, `*.*.*${tail}`];
});

export const REDACTED = '[Redacted]';

// A bearer credential inside free text (an error message, a cause): the scheme stays, the secret goes.
const BEARER = /\b(Bearer\s+)[^\s",;]+/gi;
const WEBSOCKET_TOKEN = /\b(jwt\.token\.)[^\s",;]+/g;
const JWT = /\beyJ[\w-]{2,}\.[\w-]{2,}\.[\w-]*/g;

/** Removes bearer tokens and JWTs from a text that is about to be logged. */
export function scrubSecrets(text: string): string {
  if (!text.includes('Bearer') && !text.includes('bearer') && !text.includes('jwt.token.') && !text.includes('eyJ')) return text;
  return text.replace(BEARER, `$1${REDACTED}`).replace(WEBSOCKET_TOKEN, `$1${REDACTED}`).replace(JWT, REDACTED);
}

function serializeError(error: unknown): unknown {
  const serialized = pino.stdSerializers.err(error as Error) as unknown as Record<string, unknown>;
  if (serialized === null || typeof serialized !== 'object') return serialized;
  for (const field of ['message', 'stack'] as const) {
    const value = serialized[field];
    if (typeof value === 'string') serialized[field] = scrubSecrets(value);
  }
  return serialized;
}

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: { paths: [...REDACT_PATHS], censor: REDACTED },
    serializers: { err: serializeError, error: serializeError },
    formatters: { level: (label) => ({ level: label }) },
    timestamp: pino.stdTimeFunctions.isoTime,
    hooks: {
      logMethod(args, method) {
        for (let i = 0; i < args.length; i++) {
          if (typeof args[i] === 'string') args[i] = scrubSecrets(args[i] as string);
        }
        return method.apply(this, args as Parameters<typeof method>);
      },
    },
  };
}

/**
 * The process logger. By default it writes to stdout asynchronously (lines are buffered and
 * written off the request path); pino flushes that buffer when the process exits.
 */
export function createLogger(level: string, destination: DestinationStream = pino.destination({ dest: 1, sync: false })): Logger {
  return pino(loggerOptions(level), destination);
}
