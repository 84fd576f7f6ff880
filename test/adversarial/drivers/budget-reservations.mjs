// B1, the body budget filled with no body (issue 40): connections that declare a large
// Content-Length and then send nothing. While a declared length was reserved before a byte arrived,
// 4 token holders x 8 connections declaring 1 MiB each made every other user's writes 503; without a
// token, HEAD /v2/version with a declared body did the same where getVersion is public.
import net from 'node:net';
import { addCounts, statusCounter } from './answers.mjs';

const SUBMIT = '/v2/commands/submit-and-wait-for-transaction';

/**
 * Holds `connectionsPerCaller` such connections per token (or, with `tokens` empty, as many without a
 * token) until `signal` aborts; a connection the gateway answers or closes is opened again.
 */
export async function budgetReservations(
  { api, tokens = [], connectionsPerCaller = 8, declaredBytes = 1_048_576, method = 'POST', path = SUBMIT },
  signal,
) {
  const { hostname, port } = new URL(api);
  const totals = { opened: 0, answers: {} };
  const hold = async (token) => {
    while (!signal.aborted) {
      const socket = net.connect(Number(port), hostname);
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
  const callers = tokens.length === 0 ? [undefined] : tokens;
  await Promise.all(callers.flatMap((token) => Array.from({ length: connectionsPerCaller }, () => hold(token))));
  return totals;
}
