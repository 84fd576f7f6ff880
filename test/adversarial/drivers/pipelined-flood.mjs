// P1, the pipelined flood (issue 40): bare GETs without a token, pipelined on one connection (or a
// few) as fast as the gateway takes them, every answer read and thrown away, once the address's
// budget of unverified calls is spent (each of those gets a 401 that closes its connection; past it,
// a 429 that keeps it). Before the gateway bounded what waits for its turn, 100,000 of them
// (4.4 MiB) ran its heap out within a second.
import net from 'node:net';
import { once } from 'node:events';
import { addCounts, statusCounter } from './answers.mjs';

/** One bare GET on a connection of its own; resolves with its status (0: none). */
function bareGet(hostname, port, path) {
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    let text = '';
    socket.on('data', (data) => (text += data.toString('latin1')));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0)));
    socket.setTimeout(5_000, () => socket.destroy());
    socket.end(`GET ${path} HTTP/1.1\r\nHost: flood\r\nConnection: close\r\n\r\n`);
  });
}

/**
 * Keeps the address's budget of unverified calls spent: `burst` bare GETs at once, then one every
 * `everyMs`, each on a connection of its own, so that the flood's own calls find it empty (a 429 that
 * keeps the connection, held refusalDelayMs) and not a unit come back (a 401 that closes it).
 */
function keepBudgetSpent(hostname, port, path, burst, everyMs, signal) {
  const answers = {};
  const count = (status) => (answers[status] = (answers[status] ?? 0) + 1);
  const calls = Array.from({ length: burst }, () => bareGet(hostname, port, path).then(count));
  const timer = setInterval(() => calls.push(bareGet(hostname, port, path).then(count)), everyMs);
  signal.addEventListener('abort', () => clearInterval(timer), { once: true });
  return { answers, settled: () => Promise.all(calls) };
}

/**
 * Floods `api` until `signal` aborts; resolves with what was sent and answered. The address's budget
 * is kept spent (keepBudgetSpent); `connections` connections each write `requestsPerWrite` requests
 * per write, again as soon as the socket takes them and fewer than `maxUnanswered` are unanswered;
 * a connection the gateway closes is opened again.
 */
export async function pipelinedFlood(
  {
    api,
    connections = 1,
    requestsPerWrite = 1_000,
    maxUnanswered = 120_000,
    path = '/v2/state/ledger-end',
    spend = 150,
    spendEveryMs = 50,
    probeMs = 100,
  },
  signal,
) {
  const { hostname, port } = new URL(api);
  const request = `GET ${path} HTTP/1.1\r\nHost: flood\r\n\r\n`;
  const chunk = Buffer.from(request.repeat(requestsPerWrite));
  const spending = keepBudgetSpent(hostname, port, path, spend, spendEveryMs, signal);
  const totals = { spent: spending.answers, sent: 0, answers: {}, connectionsClosed: 0 };
  await new Promise((resolve) => setTimeout(resolve, 100)); // the burst is spent first
  const flood = async () => {
    while (!signal.aborted) {
      const socket = net.connect(Number(port), hostname);
      socket.setNoDelay(true);
      const answers = statusCounter();
      socket.on('data', (data) => answers.feed(data));
      socket.on('error', () => undefined);
      const closed = new Promise((resolve) => socket.once('close', resolve));
      const abort = () => socket.destroy();
      signal.addEventListener('abort', abort, { once: true });
      try {
        await once(socket, 'connect');
        // One request first: answered at once, it had a unit of the budget (a 401 closes the
        // connection); held, the budget is spent, and what follows it waits behind it.
        socket.write(request);
        totals.sent += 1;
        const answeredAtOnce = await Promise.race([
          once(socket, 'data').then(() => true),
          closed.then(() => true),
          new Promise((resolve) => setTimeout(resolve, probeMs, false)),
        ]);
        if (answeredAtOnce) {
          await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 1_000))]);
          socket.destroy();
        }
        let sentHere = 1;
        while (!signal.aborted && !socket.destroyed) {
          // Never more than maxUnanswered ahead of the answers: the gateway always has a read's worth
          // waiting, and the driver does not spend its CPU filling kernel buffers of a doomed connection.
          if (sentHere - answers.total >= maxUnanswered) {
            await Promise.race([once(socket, 'data'), closed]);
            continue;
          }
          sentHere += requestsPerWrite;
          totals.sent += requestsPerWrite;
          if (!socket.write(chunk)) await Promise.race([once(socket, 'drain'), closed]);
        }
      } catch {
        // refused or reset: counted below as closed
      }
      socket.destroy();
      await closed;
      signal.removeEventListener('abort', abort);
      addCounts(totals.answers, answers.counts);
      if (!signal.aborted) totals.connectionsClosed += 1;
    }
  };
  await Promise.all(Array.from({ length: connections }, flood));
  await spending.settled();
  return totals;
}
