// The built process at SIGTERM, exporting traces to a collector that never answers: the exporter's
// flush is bounded and its failure a warning, so the process exits 0 promptly; the lines of the
// shutdown come in the order they were logged; the listening line names the address bound.
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildDist, startProcess, writeConfig, writeGatewayConfig } from './helpers/process.js';
import { answerJson, startRecordingUpstream, type RecordingUpstream } from './helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT } from './helpers/tokens.js';

beforeAll(() => buildDist(), 120_000);

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** An OTLP endpoint on 127.0.0.1 that accepts connections and never answers. */
async function silentCollector(): Promise<string> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}

describe('SIGTERM', () => {
  it('with a collector that never answers: exits 0 within the flush bound, lines in order, the bound address logged', async () => {
    const upstream: RecordingUpstream = await startRecordingUpstream(answerJson(200, { offset: 3 }));
    closers.push(() => upstream.close());
    const issuer = await createTestIssuer();
    // The admin listener bound to every interface: the listening line must not say 127.0.0.1.
    const config = writeConfig(
      readFileSync(writeGatewayConfig(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT), 'utf8').replace(
        'admin: { host: 127.0.0.1, port: 0 }',
        'admin: { host: 0.0.0.0, port: 0 }',
      ),
    );
    const gateway = await startProcess(['dist/main.js', '--config', config], {
      OTEL_EXPORTER_OTLP_ENDPOINT: await silentCollector(),
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '60000', // the spans wait for the shutdown's flush
    });
    closers.push(async () => {
      gateway.child.kill('SIGKILL');
    });
    expect(gateway.admin).toMatch(/^http:\/\/0\.0\.0\.0:\d+$/);
    expect(gateway.api).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    const headers = { authorization: `Bearer ${await issuer.mint()}` };
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const answer = await fetch(`${gateway.api}/v2/state/ledger-end`, { headers });
      expect(answer.status).toBe(200);
      await answer.arrayBuffer();
      ids.push(answer.headers.get('x-request-id')!);
    }

    const signalled = performance.now();
    gateway.child.kill('SIGTERM');
    expect(await gateway.exited).toBe(0);
    const tookMs = performance.now() - signalled;
    // The bound is 2 s (server/shutdown.ts TELEMETRY_FLUSH_MS); unbounded it took 8 s and more.
    expect(tookMs).toBeLessThan(5_000);

    const lines = gateway.output
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const at = (message: string) => lines.findIndex((line) => String(line.msg).startsWith(message));
    expect(at('shutting down')).toBeGreaterThan(-1);
    expect(at('shutdown complete')).toBeGreaterThan(at('shutting down'));
    expect(at('shutdown failed')).toBe(-1);
    expect(lines[at('trace export did not finish')]).toMatchObject({ level: 'warn', boundMs: 2_000 });
    expect(at('trace export did not finish')).toBeLessThan(at('shutdown complete'));
    const logged = new Set(lines.filter((line) => line.msg === 'request').map((line) => line.reqId));
    expect(ids.filter((id) => !logged.has(id))).toEqual([]);
    expect(gateway.output.some((line) => line.includes('    at '))).toBe(false); // no stack printed
  }, 30_000);
});
