// The access log: the request line with what an operator expects of an access line (Envoy's
// default access log is the model): when the call started, who called from where (the client
// address resolved through server.trustedProxies, the token's issuer and subject, never the
// token), the path (its query left out, chosen parameters redacted, JWT-shaped parts and credential
// query values always: logging.ts scrubUrl), the bytes each way, the
// upstream replica and its time, the user agent. A WebSocket stream's line is written when it ends
// (request-telemetry.ts): its bytes are those its tunnel carried, and `endedBy` says what ended it
// (the ended_by label of ledger_gateway_websocket_streams_ended_total). Which fields, the sampling
// of successes and the redaction follow log.access, live.
import type { AccessLogConfig, AccessLogField } from '../config/schema.js';
import { clientAddress } from '../exchange/caller.js';
import type { EndedStream, Exchange } from '../exchange/exchange.js';
import { pathOf, type Operation } from '../operations.js';
import { REDACTED, scrubSecrets, scrubUrl } from './logging.js';

/** What the telemetry stage knows of a call besides the exchange: its start and its upstream part. */
export interface AccessFacts {
  /** Epoch milliseconds when the first stage ran. */
  readonly startedAt: number;
  readonly upstreamMs: number | undefined;
  readonly upstreamReplica: string | undefined;
  /** A WebSocket stream's end, on the line written then; undefined for a call or a refused upgrade. */
  readonly stream: EndedStream | undefined;
}

export interface AccessLog {
  /** Whether a finished exchange's line is written: every refusal and error, a share of successes. */
  keeps(status: number): boolean;
  /** The line's access fields as JSON text (`,"name":value...`), in the configured order. */
  fields(exchange: Exchange, facts: AccessFacts): string;
}

const json = (value: string | number | null | undefined) => (value === undefined ? 'null' : JSON.stringify(value));

/** The request path with the configured template parameters (`{party}`, `{user-id}`) redacted. */
export function redactedPath(rawPath: string, operation: Operation | null, redact: ReadonlySet<string>): string {
  if (redact.size === 0 || operation === null || !operation.template.includes('{')) return rawPath;
  const template = operation.template.split('/');
  const segments = rawPath.split('/');
  if (template.length !== segments.length && template.length !== segments.length - 1) return rawPath;
  for (let i = 0; i < template.length; i++) {
    const part = template[i]!;
    if (part.startsWith('{') && redact.has(part.slice(1, -1))) segments[i] = REDACTED;
  }
  return segments.join('/');
}

export function bytesOf(value: string | string[] | number | undefined): number | null {
  if (typeof value === 'number') return value;
  if (typeof value !== 'string') return null;
  const n = Number(value);
  return Number.isSafeInteger(n) && n >= 0 ? n : null;
}

export function createAccessLog(
  config: AccessLogConfig,
  isTrustedProxy: (address: string) => boolean,
  random: () => number = Math.random,
): AccessLog {
  const redact = new Set(config.redactPathParameters);
  const ratio = config.successSampleRatio;
  const writers: Record<AccessLogField, (exchange: Exchange, facts: AccessFacts) => string> = {
    startTime: (_exchange, facts) => json(new Date(facts.startedAt).toISOString()),
    clientAddress: ({ raw }) =>
      json(clientAddress(raw.socket.remoteAddress ?? '', raw.headers['x-forwarded-for'], isTrustedProxy)),
    issuer: ({ principal }) => json(principal?.issuer ?? null),
    subject: ({ principal }) => json(principal?.subject ?? null),
    consumer: ({ principal }) => json(principal?.consumer ?? null),
    path: ({ raw, operation }) => {
      const url = raw.url ?? '';
      const path = redactedPath(pathOf(url), operation, redact);
      return json(
        scrubUrl(
          config.includeQuery && url.length > path.length && url.includes('?')
            ? `${path}${url.slice(url.indexOf('?'))}`
            : path,
        ),
      );
    },
    requestBytes: (exchange, facts) =>
      json(
        facts.stream?.requestBytes ??
          bytesOf(exchange.raw.headers['content-length']) ??
          (exchange as { rawBody?: Buffer }).rawBody?.length ??
          null,
      ),
    responseBytes: (exchange, facts) => json(facts.stream?.responseBytes ?? bytesOf(exchange.answerContentLength)),
    upstreamReplica: (_exchange, facts) => json(facts.upstreamReplica ?? facts.stream?.replica ?? null),
    upstreamMs: (_exchange, facts) => json(facts.upstreamMs ?? null),
    userAgent: ({ raw }) => {
      const agent = raw.headers['user-agent'];
      return json(agent === undefined ? null : scrubSecrets(agent));
    },
  };
  const chosen = config.fields.map((field) => [`,"${field}":`, writers[field]] as const);
  return {
    keeps: (status) => status >= 400 || ratio >= 1 || random() < ratio,
    fields(exchange, facts) {
      let text = '';
      for (const [key, write] of chosen) text += key + write(exchange, facts);
      // The ledger policy's decision, when a policy names the caller: which policy and rule, in which mode.
      if (exchange.ledgerDecision !== undefined) text += `,"ledgerPolicy":${JSON.stringify(exchange.ledgerDecision)}`;
      return facts.stream === undefined ? text : `${text},"endedBy":${json(facts.stream.endedBy)}`;
    },
  };
}
