// ledger_gateway_ready{check}: each readiness check /readyz reports, as the admin listener's
// /metrics serves it, so a dashboard shows which check holds a pod out of its Service.
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { MetricNames } from '../../src/telemetry/metrics.js';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';

const current = perTest();

/** The ledger_gateway_ready series of an exposition, by check. */
function readySeries(exposition: string): Record<string, number> {
  const series: Record<string, number> = {};
  const line = new RegExp(`^${MetricNames.ready}\\{check="([a-z]+)"\\} (\\d+)$`, 'gm');
  for (const match of exposition.matchAll(line)) {
    series[match[1]!] = Number(match[2]);
  }
  return series;
}

async function scrape(adminUrl: string): Promise<string> {
  const response = await fetch(new URL('/metrics', adminUrl));
  expect(response.status).toBe(200);
  return response.text();
}

/** A loopback port nothing listens on: connections to it are refused. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('ledger_gateway_ready', () => {
  it('reports every check 1 while /readyz answers 200, and the shutdown check 0 once shutdown begins', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url));
    await expect.poll(async () => (await fetch(`${gw.adminUrl}/readyz`)).status, { timeout: 5_000 }).toBe(200);
    const report = (await (await fetch(`${gw.adminUrl}/readyz`)).json()) as { checks: Record<string, string> };
    const allOk = Object.fromEntries(Object.keys(report.checks).map((check) => [check, 1]));
    expect(readySeries(await scrape(gw.adminUrl))).toEqual(allOk);
    expect(Object.keys(report.checks).sort()).toEqual(['keys', 'shutdown', 'upstream']);

    gw.gateway.readiness.beginShutdown();
    expect(readySeries(await scrape(gw.adminUrl))).toEqual({ shutdown: 0, keys: 1, upstream: 1 });
  });

  it('reports the upstream check 0 while the participant does not answer, the others 1', async () => {
    const gw = (current.gw = await startGateway(`http://127.0.0.1:${await closedPort()}`));
    expect((await fetch(`${gw.adminUrl}/readyz`)).status).toBe(503);
    expect(readySeries(await scrape(gw.adminUrl))).toEqual({ shutdown: 1, keys: 1, upstream: 0 });
  });
});
