// Readiness and shutdown under load: a participant whose connections are all busy is still ready,
// and shutdown ends within its grace whatever is still running upstream.
import { describe, expect, it } from 'vitest';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';
import { startHoldingUpstream } from '../protection/support.js';

const current = perTest();

describe('readiness and shutdown', () => {
  it('keeps probing the participant while every traffic connection is busy: the probe has its own', async () => {
    const holding = current.upstream = await startHoldingUpstream();
    // A probe every 200 ms; one queued behind busy traffic connections would not get through.
    const gw = current.gw = await startGateway(holding.url, { upstream: { connections: 2, readinessIntervalMs: 200 } });
    const busy = [0, 1, 2].map(() => fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() }).then((r) => r.arrayBuffer(), () => undefined));
    await expect.poll(() => holding.held.length, { timeout: 5_000 }).toBe(2); // the pool is full, a third call queued
    const probesBefore = holding.probes.length;
    await new Promise((resolve) => setTimeout(resolve, 1_000)); // several probe intervals
    // The participant kept being asked (a probe queued behind the traffic never got through: the
    // readiness it reported was the last one from before the load).
    expect(holding.probes.length).toBeGreaterThanOrEqual(probesBefore + 3);
    const started = Date.now();
    const readyz = await fetch(`${gw.adminUrl}/readyz`);
    expect(readyz.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(1_000);
    holding.answerAll(200);
    await expect.poll(() => holding.held.length, { timeout: 5_000 }).toBe(1); // the queued call got a connection
    holding.answerAll(200);
    await Promise.all(busy);
  });

  it('ends within shutdown.graceMs while a version refresh still waits on the participant', async () => {
    const upstream = current.upstream = await startRecordingUpstream(() => undefined); // accepts every call, answers none
    const gw = current.gw = await startGateway(upstream.url, { shutdown: { graceMs: 500 }, upstream: { timeoutMs: 20_000 } });
    const pending = fetch(`${gw.url}/v2/version`, { headers: gw.auth() }).catch(() => 'cut');
    await expect.poll(() => upstream.requests.length, { timeout: 5_000 }).toBe(1);
    const started = Date.now();
    await gw.gateway.shutdown();
    expect(Date.now() - started).toBeLessThan(2_500); // the grace, then everything upstream is aborted
    expect(await pending).toBe('cut');
    // Counted as the gateway's cut, a 5xx, not as a client that left (499); the cut connection's
    // close is seen a moment after shutdown() returns.
    const counted = () => gw.registry.getSingleMetricAsString('ledger_gateway_requests_total');
    await expect.poll(counted, { timeout: 2_000 }).toMatch(/operation="getVersion",method="GET",status="503",error_code="SHUTDOWN_GRACE_ELAPSED"\} 1/);
    expect(await counted()).not.toMatch(/CLIENT_CLOSED_REQUEST/);
    current.gw = undefined; // already closed
  });

  it('serves calls during shutdown.drainDelayMs (readiness 503, each answer closing its connection), refuses them after', async () => {
    const upstream = current.upstream = await startRecordingUpstream();
    const gw = current.gw = await startGateway(upstream.url, { shutdown: { graceMs: 2_000, drainDelayMs: 1_000 } });
    expect((await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() })).status).toBe(200);
    const shutdown = gw.gateway.shutdown();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await fetch(`${gw.adminUrl}/readyz`)).status).toBe(503);
    // Still in the delay: a call on a new connection is served, and told to close its connection.
    const during = await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() });
    expect(during.status).toBe(200);
    expect(during.headers.get('connection')).toBe('close');
    expect(upstream.requests).toHaveLength(2);
    await shutdown;
    await expect(fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() })).rejects.toThrow(); // the listener is closed
    current.gw = undefined; // already closed
  });
});
