// B1, the body budget filled with no body (issue 40): connections that declare a large
// Content-Length and then send nothing. While a declared length was reserved before a byte arrived,
// 4 token holders x 8 connections declaring 1 MiB each made every other user's writes 503; without a
// token, HEAD /v2/version with a declared body did the same where getVersion is public.
import net from 'node:net';
import { addCounts, statusCounter } from './answers.mjs';

const SUBMIT = '/v2/commands/submit-and-wait-for-transaction';

/**
 * Holds `connectionsPerCaller` such connections per caller until `signal` aborts: a caller is a token
 * of `tokens`, or, with `tokens` empty, a client address of `sources` (loopback addresses the
 * connections are made from: 127.0.0.2, ...) without a token. A connection the gateway answers or
 * closes is opened again.
 */
export async function budgetReservations(
  {
    api,
    tokens = [],
    sources = ['127.0.0.1'],
    connectionsPerCaller = 8,
    declaredBytes = 1_048_576,
    method = 'POST',
    path = SUBMIT,
  },
  signal,
) {
  const { hostname, port } = new URL(api);
  const totals = { opened: 0, answers: {} };
  const hold = async ({ token, source }) => {
    while (!signal.aborted) {
      const socket = net.connect({ port: Number(port), host: hostname, localAddress: source });
      const answers = statusCounter();
      socket.on('data', (data) => answers.feed(data));
      socket.on('error', () => undefined);
      const closed = new Promise((resolve) => socket.once('close', resolve));
      const abort = () => socket.destroy();
      signal.addEventListener('abort', abort, { once: true });
      const authorization = token === undefined ? '' : `Authorization: Bearer ${token}\r\n`;
      socket.write(
        `${method} ${path} HTTP/1.1\r\nHost: b1\r\n${authorization}Content-Type: application/json\r\n` +
          `Content-Length: ${declaredBytes}\r\n\r\n`,
      );
      totals.opened += 1;
      await closed;
      signal.removeEventListener('abort', abort);
      addCounts(totals.answers, answers.counts);
      if (!signal.aborted) await new Promise((resolve) => setTimeout(resolve, 100)); // not a connect loop
    }
  };
  const callers = tokens.length === 0 ? sources.map((source) => ({ source })) : tokens.map((token) => ({ token }));
  await Promise.all(callers.flatMap((caller) => Array.from({ length: connectionsPerCaller }, () => hold(caller))));
  return totals;
}
