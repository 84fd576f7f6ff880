// The ledger policy on WebSocket streams: the first message (the request with the filter) of
// /v2/updates, the completion stream and the active contract set, sent by a real WebSocket client
// through the gateway. A filter with a party or template outside the rules is refused before the
// participant sees it: the client gets Canton's error shape as the stream's message, then close
// code 1000 with no reason, as the participant closes a stream after its error message; an allowed
// one reaches the participant as sent and streams.
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startWebSocketUpstream } from '../helpers/websocket-upstream.js';
import { startSandbox } from '../sandbox/helpers.js';
import { ALICE, BOB } from './support.js';

const current = perTest();

const ledgerPolicy = {
  policies: [
    {
      name: 'alice-reads',
      principals: { subjects: ['alice'] },
      rules: [{ name: 'own-reads', operations: ['reads'], readAs: [ALICE], templates: ['*'] }],
    },
  ],
};

const updatesOf = (party: string) => ({
  beginExclusive: 0,
  endInclusive: 1,
  updateFormat: {
    includeTransactions: {
      eventFormat: { filtersByParty: { [party]: { cumulative: [] } } },
      transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
    },
  },
});

interface Stream {
  readonly messages: string[];
  readonly closeCode: number;
  readonly reason?: string;
}

/** Opens a stream through the gateway, sends one request, collects messages until it closes (or `until` of them). */
function stream(gw: RunningGateway, path: string, request: object, until = Infinity): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${gw.url.replace(/^http/, 'ws')}${path}`, ['daml.ws.auth'], { headers: gw.auth() });
    const messages: string[] = [];
    socket.on('open', () => socket.send(JSON.stringify(request)));
    socket.on('message', (data) => {
      messages.push(Buffer.from(data as Buffer).toString());
      if (messages.length >= until) socket.close();
    });
    socket.on('close', (closeCode, reason) => resolve({ messages, closeCode, reason: reason.toString() }));
    socket.on('error', reject);
  });
}

async function decisions(gw: RunningGateway, labels: Record<string, string>): Promise<number> {
  const metric = (await gw.registry.getMetricsAsJSON()).find(
    (m) => m.name === 'ledger_gateway_ledger_policy_decisions_total',
  );
  if (metric === undefined) throw new Error('no decisions metric');
  return (metric.values as Array<{ value: number; labels: Record<string, string | number> }>)
    .filter((v) => Object.entries(labels).every(([k, l]) => String(v.labels[k]) === l))
    .reduce((sum, v) => sum + v.value, 0);
}

function expectRefused(result: Stream): void {
  expect(result.closeCode).toBe(1000);
  expect(result.reason).toBe('');
  expect(result.messages).toHaveLength(1);
  const error = JSON.parse(result.messages[0]!) as { code: string; context: Record<string, unknown> };
  expect(error).toMatchObject({
    code: 'GATEWAY_LEDGER_POLICY_DENIED',
    context: { policy: 'alice-reads', rule: 'default' },
  });
}

describe('the ledger policy on WebSocket streams', () => {
  it("refuses /v2/updates for another party's events before the sandbox streams them, and streams its own", async () => {
    const sandbox = await startSandbox();
    current.upstream = sandbox;
    const gw = (current.gw = await startGateway(sandbox.url, { ledgerPolicy }));
    const refused = await stream(gw, '/v2/updates', updatesOf(BOB));
    expectRefused(refused);
    const allowed = await stream(gw, '/v2/updates', updatesOf(ALICE));
    expect(allowed.closeCode).toBe(1000);
    expect(allowed.messages.length).toBeGreaterThan(0);
    expect(JSON.parse(allowed.messages[0]!)).toHaveProperty('update');
    expect(await decisions(gw, { operation: 'onV2Updates', decision: 'deny', rule: 'default' })).toBe(1);
    expect(await decisions(gw, { operation: 'onV2Updates', decision: 'allow', rule: 'own-reads' })).toBe(1);
  });

  it('holds the first message of each stream until judged: a refused one never reaches the participant', async () => {
    const upstream = await startWebSocketUpstream();
    current.upstream = upstream;
    const gw = (current.gw = await startGateway(upstream.url, { ledgerPolicy }));
    const completions = (party: string) => ({ userId: 'alice', parties: [party], beginExclusive: 0 });
    const activeContracts = (party: string) => ({
      activeAtOffset: 1,
      eventFormat: { filtersByParty: { [party]: { cumulative: [] } } },
    });
    const cases: Array<[string, (party: string) => object]> = [
      ['/v2/updates', updatesOf],
      ['/v2/updates/flats', updatesOf],
      ['/v2/updates/trees', updatesOf],
      ['/v2/commands/completions', completions],
      ['/v2/commands/command-completions', completions],
      ['/v2/state/active-contracts', activeContracts],
    ];
    for (const [path, request] of cases) expectRefused(await stream(gw, path, request(BOB)));
    expect(upstream.messages).toEqual([]);
    for (const [path, request] of cases) {
      const echoed = await stream(gw, path, request(ALICE), 1);
      expect(echoed.messages).toEqual([`echo:${JSON.stringify(request(ALICE))}`]);
    }
    expect(upstream.messages).toHaveLength(cases.length);
    // A first message that is not JSON is refused as Canton refuses a body it cannot decode (fail closed).
    const garbage = await new Promise<Stream>((resolve, reject) => {
      const socket = new WebSocket(`${gw.url.replace(/^http/, 'ws')}/v2/updates`, ['daml.ws.auth'], {
        headers: gw.auth(),
      });
      const messages: string[] = [];
      socket.on('open', () => socket.send('not json'));
      socket.on('message', (data) => messages.push(Buffer.from(data as Buffer).toString()));
      socket.on('close', (closeCode) => resolve({ messages, closeCode }));
      socket.on('error', reject);
    });
    expect(garbage.closeCode).toBe(1000);
    expect(JSON.parse(garbage.messages[0]!)).toMatchObject({ code: 'DECODE_FAILURE' });
    expect(upstream.messages).toHaveLength(cases.length);
  });
});
