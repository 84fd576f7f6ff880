// Readiness and shutdown under load: a participant whose connections are all busy is still ready,
// and shutdown ends within its grace whatever is still running upstream.
import { createConnection } from 'node:net';
import type { Duplex } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';
import { startHoldingUpstream } from '../protection/support.js';
import { eventually } from '../helpers/eventually.js';

const current = perTest();

describe('readiness and shutdown', () => {
  it('keeps probing the participant while every traffic connection is busy: the probe has its own', async () => {
    const holding = (current.upstream = await startHoldingUpstream());
    // A probe every 200 ms; one queued behind busy traffic connections would not get through.
    const gw = (current.gw = await startGateway(holding.url, {
      upstream: { connections: 2, readinessIntervalMs: 200 },
    }));
    const busy = [0, 1, 2].map(() =>
      fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() }).then(
        (r) => r.arrayBuffer(),
        () => undefined,
      ),
    );
    await expect.poll(() => holding.held.length, { timeout: 5_000 }).toBe(2); // the pool is full, a third call queued
    const probesBefore = holding.probes.length;
    await eventually(() => holding.probes.length >= probesBefore + 3, 'three more probes reached the participant');
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
    const upstream = (current.upstream = await startRecordingUpstream(() => undefined)); // accepts every call, answers none
    const gw = (current.gw = await startGateway(upstream.url, {
      shutdown: { graceMs: 500 },
      upstream: { timeoutMs: 20_000 },
    }));
    const pending = fetch(`${gw.url}/v2/version`, { headers: gw.auth() }).catch(() => 'cut');
    await expect.poll(() => upstream.requests.length, { timeout: 5_000 }).toBe(1);
    const started = Date.now();
    await gw.gateway.shutdown();
    expect(Date.now() - started).toBeLessThan(2_500); // the grace, then everything upstream is aborted
    expect(await pending).toBe('cut');
    // Counted as the gateway's cut, a 5xx, not as a client that left (499); the cut connection's
    // close is seen a moment after shutdown() returns.
    const counted = () => gw.registry.getSingleMetricAsString('ledger_gateway_requests_total');
    await expect
      .poll(counted, { timeout: 2_000 })
      .toMatch(/operation="getVersion",method="GET",status="503",error_code="SHUTDOWN_GRACE_ELAPSED"\} 1/);
    expect(await counted()).not.toMatch(/CLIENT_CLOSED_REQUEST/);
    current.gw = undefined; // already closed
  });

  it('serves calls during shutdown.drainDelayMs (readiness 503, each answer closing its connection), refuses them after', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url, { shutdown: { graceMs: 2_000, drainDelayMs: 1_000 } }));
    expect((await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() })).status).toBe(200);
    const shutdown = gw.gateway.shutdown();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await fetch(`${gw.adminUrl}/readyz`)).status).toBe(503);
    // Still in the delay: a call on a new connection is served, and told to close its connection.
    const during = await fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() });
    expect(during.status).toBe(200);
    expect(during.headers.get('connection')).toBe('close');
    expect(upstream.requests).toHaveLength(2);
    // A WebSocket stream is not begun, though: the grace's end would cut it.
    const upgrade = await new Promise<string>((resolve) => {
      const socket = createConnection(Number(new URL(gw.url).port), '127.0.0.1', () =>
        socket.write(
          `GET /v2/updates HTTP/1.1\r\nHost: gw\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: daml.ws.auth\r\nAuthorization: ${gw.auth().authorization}\r\n\r\n`,
        ),
      );
      let text = '';
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString();
      });
      socket.on('close', () => resolve(text));
      socket.on('error', () => undefined);
    });
    expect(upgrade).toMatch(/^HTTP\/1\.1 503 /);
    expect(upgrade).toContain('The gateway is shutting down.');
    await shutdown;
    await expect(fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() })).rejects.toThrow(); // the listener is closed
    current.gw = undefined; // already closed
  });

  it("counts calls cut when the grace ends as SHUTDOWN_GRACE_ELAPSED: an answer under way with the participant's status, a pending WebSocket upgrade 503", async () => {
    // The participant starts its answer and never ends it; it accepts the upgrade's connection and never answers it.
    const upstream = (current.upstream = await startRecordingUpstream((request, response) => {
      if (request.url === '/v2/state/ledger-end') {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.write('{"offset":');
        return;
      }
      if (request.url !== '/v2/updates') response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    }));
    const held: Duplex[] = [];
    upstream.server.on('upgrade', (_request, socket: Duplex) => held.push(socket)); // takes the upgrade, never answers it
    const gw = (current.gw = await startGateway(upstream.url, {
      shutdown: { graceMs: 500 },
      upstream: { timeoutMs: 20_000 },
    }));
    const streaming = fetch(`${gw.url}/v2/state/ledger-end`, { headers: gw.auth() })
      .then((response) => response.text())
      .catch(() => 'cut');
    const port = Number(new URL(gw.url).port);
    const upgrade = createConnection(port, '127.0.0.1', () =>
      upgrade.write(
        `GET /v2/updates HTTP/1.1\r\nHost: gw\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: daml.ws.auth\r\nAuthorization: ${gw.auth().authorization}\r\n\r\n`,
      ),
    );
    upgrade.on('error', () => undefined);
    await expect
      .poll(() => upstream.requests.map((request) => request.url).sort(), { timeout: 5_000 })
      .toEqual(expect.arrayContaining(['/v2/state/ledger-end']));
    await eventually(() => held.length === 1, 'the upgrade has reached the participant');
    await gw.gateway.shutdown();
    expect(await streaming).toBe('cut');
    const counted = () => gw.registry.getSingleMetricAsString('ledger_gateway_requests_total');
    await expect
      .poll(counted, { timeout: 2_000 })
      .toMatch(/operation="getV2StateLedger-end",method="GET",status="200",error_code="SHUTDOWN_GRACE_ELAPSED"\} 1/);
    await expect
      .poll(counted, { timeout: 2_000 })
      .toMatch(/operation="onV2Updates",method="GET",status="503",error_code="SHUTDOWN_GRACE_ELAPSED"\} 1/);
    expect(await counted()).not.toMatch(/UPSTREAM_ANSWER_BROKEN|CLIENT_CLOSED_REQUEST/);
    upgrade.destroy();
    for (const socket of held) socket.destroy();
    upstream.server.closeAllConnections();
    current.gw = undefined; // already closed
  });

  it('refuses a request that arrives after the drain delay on a connection still open: 503, Connection: close', async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url, { shutdown: { graceMs: 3_000, drainDelayMs: 300 } }));
    // A client whose request head is still arriving when the listener closes (its connection is not idle).
    const socket = createConnection(Number(new URL(gw.url).port), '127.0.0.1');
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString();
    });
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write('GET /v2/state/ledger-end HTTP/1.1\r\nHost: gw\r\n');
    const shutdown = gw.gateway.shutdown();
    await new Promise((resolve) => setTimeout(resolve, 600)); // past the delay: the listener is closed
    socket.write(`Authorization: ${gw.auth().authorization}\r\n\r\n`);
    await expect.poll(() => text, { timeout: 3_000 }).toMatch(/\r\n\r\n\{/);
    expect(text).toMatch(/^HTTP\/1\.1 503 /);
    expect(text).toMatch(/\r\nconnection: close\r\n/i);
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toMatchObject({
      code: 'GATEWAY_UPSTREAM_UNAVAILABLE',
      cause: 'The gateway is shutting down.',
    });
    expect(upstream.requests).toHaveLength(0);
    socket.destroy();
    await shutdown;
    current.gw = undefined; // already closed
  });
});
