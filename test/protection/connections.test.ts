// Caps on open client connections, in a real gateway: a connection over a cap is closed as it is
// accepted, unanswered and counted; the others are served; trusted proxies count in the total only.
import { readFileSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { gauge, startGateway, type RunningGateway } from '../helpers/gateway.js';
import { answerJson, startRecordingUpstream } from '../helpers/recording-upstream.js';

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => {});
});

async function gatewayWith(
  connections: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): Promise<RunningGateway> {
  const upstream = await startRecordingUpstream(answerJson(200, { partyDetails: [] }));
  closers.push(() => upstream.close());
  const gateway = await startGateway(upstream.url, { ...extra, protection: { connections } });
  closers.push(() => gateway.close());
  return gateway;
}

interface Client {
  readonly socket: net.Socket;
  /** Resolves once the gateway closed the connection; with what it had sent by then. */
  readonly closed: Promise<string>;
  /** One call on this connection; resolves with the answer's status line. */
  get(authorization: string): Promise<string>;
}

/** A raw connection, made and accepted (or closed at once) before this resolves. */
async function connect(gateway: RunningGateway): Promise<Client> {
  const { hostname, port } = new URL(gateway.url);
  const socket = net.connect(Number(port), hostname);
  let text = '';
  socket.on('data', (data: Buffer) => {
    text += data.toString('latin1');
  });
  socket.on('error', () => {});
  const closed = new Promise<string>((resolve) => socket.once('close', () => resolve(text)));
  closers.push(async () => {
    socket.destroy();
  });
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  return {
    socket,
    closed,
    get: (authorization) =>
      new Promise<string>((resolve, reject) => {
        const start = text.length;
        const timer = setTimeout(() => reject(new Error('no answer within 5 s')), 5_000);
        const onData = () => {
          const line = /^HTTP\/1\.1 \d{3}/.exec(text.slice(start));
          if (line === null) return;
          clearTimeout(timer);
          socket.off('data', onData);
          resolve(line[0]);
        };
        socket.on('data', onData);
        socket.write(`GET /v2/parties HTTP/1.1\r\nHost: gw\r\nAuthorization: ${authorization}\r\n\r\n`);
      }),
  };
}

/** True when the gateway closes the connection within `ms` (and sent nothing on it). */
async function closedUnanswered(client: Client, ms = 2_000): Promise<boolean> {
  const outcome = await Promise.race([client.closed, new Promise<void>((resolve) => setTimeout(resolve, ms))]);
  return outcome === '';
}

describe('connection caps', () => {
  it('per peer address: one over it is closed at once, unanswered, counted; a freed place is taken again', async () => {
    const gateway = await gatewayWith({ maxPerAddress: 3 });
    const auth = gateway.auth().authorization!;
    const held = [await connect(gateway), await connect(gateway), await connect(gateway)];
    const over = await connect(gateway);
    expect(await closedUnanswered(over)).toBe(true);
    expect(await gauge(gateway, 'ledger_gateway_connections_refused_total', { limit: 'perAddress' })).toBe(1);
    expect(await gauge(gateway, 'ledger_gateway_connections_open')).toBe(3);
    for (const client of held) expect(await client.get(auth)).toBe('HTTP/1.1 200');

    held[0]!.socket.destroy();
    await expect.poll(() => gauge(gateway, 'ledger_gateway_connections_open'), { timeout: 5_000 }).toBe(2);
    const again = await connect(gateway);
    expect(await again.get(auth)).toBe('HTTP/1.1 200');
    expect(await gauge(gateway, 'ledger_gateway_connections_refused_total', { limit: 'perAddress' })).toBe(1);
  });

  it('in total: one over it is closed at once, unanswered and counted', async () => {
    const gateway = await gatewayWith({ max: 2, maxPerAddress: 0 });
    const held = [await connect(gateway), await connect(gateway)];
    expect(await closedUnanswered(await connect(gateway))).toBe(true);
    expect(await gauge(gateway, 'ledger_gateway_connections_refused_total', { limit: 'total' })).toBe(1);
    for (const client of held) expect(await client.get(gateway.auth().authorization!)).toBe('HTTP/1.1 200');
  });

  it('a trusted proxy carries many clients: it counts in the total, not against the per-address cap', async () => {
    const gateway = await gatewayWith({ max: 5, maxPerAddress: 2 }, { server: { trustedProxies: ['127.0.0.1'] } });
    const clients = [];
    for (let i = 0; i < 5; i++) clients.push(await connect(gateway));
    for (const client of clients) expect(await client.get(gateway.auth().authorization!)).toBe('HTTP/1.1 200');
    expect(await closedUnanswered(await connect(gateway))).toBe(true);
    expect(await gauge(gateway, 'ledger_gateway_connections_refused_total', { limit: 'total' })).toBe(1);
    expect(await gauge(gateway, 'ledger_gateway_connections_refused_total', { limit: 'perAddress' })).toBe(0);
  });

  it('idle connections that send nothing hold their places only until headersTimeoutMs', async () => {
    const gateway = await gatewayWith({ maxPerAddress: 2 }, { server: { headersTimeoutMs: 1_000 } });
    const idle = [await connect(gateway), await connect(gateway)];
    expect(await closedUnanswered(await connect(gateway))).toBe(true);
    // Node answers a head that never came with 408 and closes: the places are free again.
    for (const client of idle) await expect(client.closed).resolves.toMatch(/^(HTTP\/1\.1 408 |$)/);
    expect(await (await connect(gateway)).get(gateway.auth().authorization!)).toBe('HTTP/1.1 200');
  });

  it('with server.tls, a connection over the cap is closed before its handshake; the others are served', async () => {
    const fixture = (name: string) => new URL(`../proxy/fixtures/${name}`, import.meta.url).pathname;
    const server = {
      tls: { certFile: fixture('test-participant.pem'), keyFile: fixture('test-only-participant-key.pem') },
    };
    const gateway = await gatewayWith({ maxPerAddress: 1 }, { server });
    const { port } = new URL(gateway.url);
    const handshake = () =>
      new Promise<tls.TLSSocket | Error>((resolve) => {
        const socket = tls.connect({
          host: '127.0.0.1',
          port: Number(port),
          ca: [readFileSync(fixture('test-ca.pem'))],
        });
        closers.push(async () => {
          socket.destroy();
        });
        socket.once('secureConnect', () => resolve(socket));
        socket.once('error', (error) => resolve(error));
      });
    const first = await handshake();
    expect(first).toBeInstanceOf(tls.TLSSocket);
    expect(await handshake()).toBeInstanceOf(Error); // closed unanswered: no handshake
    expect(await gauge(gateway, 'ledger_gateway_connections_refused_total', { limit: 'perAddress' })).toBe(1);
    const served = first as tls.TLSSocket;
    const answer = new Promise<string>((resolve) =>
      served.once('data', (data: Buffer) => resolve(data.toString('latin1'))),
    );
    served.write(`GET /v2/parties HTTP/1.1\r\nHost: gw\r\nAuthorization: ${gateway.auth().authorization}\r\n\r\n`);
    expect(await answer).toMatch(/^HTTP\/1\.1 200 /);
  });
});

describe('connection caps on a reload', () => {
  it('applies new caps to the connections accepted after it; those open stay', async () => {
    const gateway = await gatewayWith({});
    const auth = gateway.auth().authorization!;
    const held = [await connect(gateway), await connect(gateway), await connect(gateway)];

    const outcome = await gateway.gateway.reload(() => ({
      ...gateway.config,
      protection: {
        ...gateway.config.protection,
        connections: { ...gateway.config.protection.connections, maxPerAddress: 2 },
      },
    }));
    expect(outcome).toMatchObject({ result: 'success', restartRequired: [] });
    // Three open, over the new cap of two: they stay and are served; a fourth is refused at accept.
    for (const client of held) expect(await client.get(auth)).toBe('HTTP/1.1 200');
    expect(await closedUnanswered(await connect(gateway))).toBe(true);
    expect(await gauge(gateway, 'ledger_gateway_connections_refused_total', { limit: 'perAddress' })).toBe(1);

    held[0]!.socket.destroy();
    held[1]!.socket.destroy();
    await expect.poll(() => gauge(gateway, 'ledger_gateway_connections_open'), { timeout: 5_000 }).toBe(1);
    expect(await (await connect(gateway)).get(auth)).toBe('HTTP/1.1 200');

    // And lifted again: the cap is gone for the next connections.
    await gateway.gateway.reload(() => gateway.config);
    const more = [await connect(gateway), await connect(gateway), await connect(gateway)];
    for (const client of more) expect(await client.get(auth)).toBe('HTTP/1.1 200');
    expect(await gauge(gateway, 'ledger_gateway_connections_refused_total', { limit: 'perAddress' })).toBe(1);
  });
});
