// Each change of readiness is one log line naming the check and, when it fails, why.
import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { Readiness } from '../../src/health.js';
import { startGateway } from '../helpers/gateway.js';
import { logCapture } from '../helpers/log-capture.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';
import { TEST_PARTICIPANT } from '../helpers/tokens.js';

const current = perTest();

/** A loopback port nothing listens on: connections to it are refused. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A participant on 127.0.0.1:`port` (0: any) answering every call with `status` (after `delayMs`); closed after the test. */
async function participantAnswering(status: number, port = 0, delayMs = 0): Promise<number> {
  const server = createHttpServer((_request, response) => {
    setTimeout(() => response.writeHead(status).end('{}'), delayMs);
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  current.upstream = {
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return (server.address() as { port: number }).port;
}

describe('readiness changes in the log', () => {
  it('logs the participant going down (cause refused) and coming back once each, not every probe', async () => {
    const port = await closedPort();
    const log = logCapture();
    const gw = (current.gw = await startGateway(
      `http://127.0.0.1:${port}`,
      { upstream: { readinessIntervalMs: 100 } },
      { logger: log.logger },
    ));
    const changes = () => log.entries().filter((entry) => entry.msg === 'readiness changed');
    const upstreamChanges = () => changes().filter((entry) => entry.check === 'upstream');
    await expect.poll(() => upstreamChanges().length, { timeout: 5_000 }).toBe(1);
    expect(upstreamChanges()[0]).toMatchObject({
      check: 'upstream',
      state: 'failing',
      cause: 'refused',
      level: 'warn',
    });
    expect(changes().find((entry) => entry.check === 'ready')).toMatchObject({ state: 'failing', level: 'warn' });
    // Several probes, all refused: a failing /readyz probes again before it answers.
    for (let probe = 0; probe < 3; probe++) expect((await fetch(`${gw.adminUrl}/readyz`)).status).toBe(503);
    expect(upstreamChanges()).toHaveLength(1);

    await participantAnswering(200, port);
    await expect.poll(() => upstreamChanges().length, { timeout: 5_000 }).toBe(2);
    expect(upstreamChanges()[1]).toEqual(expect.objectContaining({ check: 'upstream', state: 'ok', level: 'info' }));
    expect(upstreamChanges()[1]).not.toHaveProperty('cause');
    expect(
      changes()
        .filter((entry) => entry.check === 'ready')
        .map((entry) => entry.state),
    ).toEqual(['failing', 'ok']);
    expect((await fetch(`${gw.adminUrl}/readyz`)).status).toBe(200);
  });

  it('logs nothing before the first probe has ended: a first probe that times out is logged as a timeout', async () => {
    // The participant answers later than the probe's bound (the readiness interval): the interval's
    // logging, armed before the first probe began, comes first.
    const port = await participantAnswering(503, 0, 600);
    const log = logCapture();
    current.gw = await startGateway(
      `http://127.0.0.1:${port}`,
      { upstream: { readinessIntervalMs: 100 } },
      { logger: log.logger },
    );
    const first = () => log.entries().find((entry) => entry.msg === 'readiness changed' && entry.check === 'upstream');
    await expect.poll(first, { timeout: 5_000 }).toBeDefined();
    expect(first()).toMatchObject({ state: 'failing', cause: 'timeout' });
  });

  it('reports a status code as the cause of a 5xx answer', async () => {
    const port = await participantAnswering(503);
    const log = logCapture();
    current.gw = await startGateway(`http://127.0.0.1:${port}`, {}, { logger: log.logger });
    const change = () => log.entries().find((entry) => entry.msg === 'readiness changed' && entry.check === 'upstream');
    await expect.poll(change, { timeout: 5_000 }).toMatchObject({ state: 'failing', cause: 'status 503' });
  });

  it("names a key set's fetch error by its cause, not just 'fetch failed'", async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const log = logCapture();
    const jwksUrl = `http://127.0.0.1:${await closedPort()}/jwks`;
    current.gw = await startGateway(
      upstream.url,
      {
        auth: {
          issuers: [{ issuer: 'https://idp.example', jwksUrl }],
          participantId: TEST_PARTICIPANT,
          keySets: { fetchTimeoutMs: 300, unknownKeyCooldownMs: 100, refreshIntervalMs: 400 },
        },
        upstream: { readinessIntervalMs: 100 },
      },
      { logger: log.logger },
    );
    const change = () => log.entries().find((entry) => entry.msg === 'readiness changed' && entry.check === 'keys');
    await expect
      .poll(change, { timeout: 5_000 })
      .toMatchObject({ state: 'failing', cause: 'https://idp.example: fetch failed: ECONNREFUSED' });
    const readyz = (await (await fetch(`${current.gw.adminUrl}/readyz`)).json()) as {
      details?: Record<string, string>;
    };
    expect(readyz.details?.keys).toBe('https://idp.example: fetch failed: ECONNREFUSED');
  });

  it('returns each change once: a check turning failing with its detail, then ok again', () => {
    const readiness = new Readiness();
    let failing: string | undefined = 'fetch failed: ECONNREFUSED';
    readiness.add({ name: 'keys', ready: () => failing === undefined, detail: () => failing });
    expect(readiness.changes()).toEqual([
      { check: 'keys', state: 'failing', cause: 'fetch failed: ECONNREFUSED' },
      { check: 'ready', state: 'failing' },
    ]);
    expect(readiness.changes()).toEqual([]);
    failing = undefined;
    expect(readiness.changes()).toEqual([
      { check: 'keys', state: 'ok' },
      { check: 'ready', state: 'ok' },
    ]);
    readiness.beginShutdown();
    expect(readiness.changes()).toEqual([
      { check: 'shutdown', state: 'failing' },
      { check: 'ready', state: 'failing' },
    ]);
  });
});
