import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { SANDBOX_SEED, SYNTHETIC_COUNT_PARAMETER, WEBSOCKET_AUTH_PROTOCOL } from '../../src/sandbox/app.js';
import { postJson, unsignedJwt, withSandbox, type JsonBody } from './helpers.js';

const ALICE = SANDBOX_SEED.parties.alice;
const TOKEN = unsignedJwt({ sub: 'alice', aud: 'https://daml.com/jwt/aud/participant/sandbox' });
const PROTOCOLS = [`jwt.token.${TOKEN}`, WEBSOCKET_AUTH_PROTOCOL];
const updateFormat = {
  includeTransactions: {
    eventFormat: { filtersByParty: { [ALICE]: { cumulative: [] } } },
    transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
  },
};

interface StreamResult {
  readonly protocol: string;
  readonly frames: JsonBody[];
  readonly closeCode: number;
}

function wsUrl(httpUrl: string, path: string): string {
  return `${httpUrl.replace(/^http/, 'ws')}${path}`;
}

/** Opens the stream, sends one request frame, collects frames until the server closes. */
function streamUpdates(
  url: string,
  request: object,
  options: { onFrame?: (frame: JsonBody, socket: WebSocket) => void } = {},
): Promise<StreamResult> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, PROTOCOLS);
    const frames: JsonBody[] = [];
    socket.on('open', () => socket.send(JSON.stringify(request)));
    socket.on('message', (data) => {
      const frame = JSON.parse(Buffer.from(data as Buffer).toString()) as JsonBody;
      frames.push(frame);
      options.onFrame?.(frame, socket);
    });
    socket.on('close', (closeCode) => resolve({ protocol: socket.protocol, frames, closeCode }));
    socket.on('error', reject);
  });
}

describe('sandbox WebSocket /v2/updates', () => {
  it('accepts both subprotocols, answers daml.ws.auth and records what it received', async () => {
    await withSandbox(async ({ url, app }) => {
      const result = await streamUpdates(wsUrl(url, '/v2/updates'), {
        beginExclusive: 0,
        endInclusive: 1,
        updateFormat,
      });
      expect(result.protocol).toBe(WEBSOCKET_AUTH_PROTOCOL);
      const offered = app.sandbox.lastUpgradeHeaders?.['sec-websocket-protocol'];
      expect(offered?.split(/,\s*/)).toEqual([`jwt.token.${TOKEN}`, WEBSOCKET_AUTH_PROTOCOL]);
      expect(app.sandbox.upgrades).toHaveLength(1);
      expect(app.sandbox.upgrades[0]?.url).toBe('/v2/updates');
    });
  });

  it('sends the stored updates after beginExclusive and closes at endInclusive', async () => {
    await withSandbox(async ({ url }) => {
      for (let i = 0; i < 3; i++) {
        await postJson(`${url}/v2/commands/submit-and-wait`, {
          commands: [{ CreateCommand: { templateId: SANDBOX_SEED.templates.iou, createArguments: { n: i } } }],
          commandId: `c${i}`,
          actAs: [ALICE],
          userId: 'alice',
        });
      }
      const result = await streamUpdates(wsUrl(url, '/v2/updates'), {
        beginExclusive: 1,
        endInclusive: 3,
        updateFormat,
      });
      expect(result.closeCode).toBe(1000);
      expect(result.frames.map((frame) => frame['update'].Transaction.value.offset)).toEqual([2, 3]);
      expect(result.frames[0]?.['update'].Transaction.value.events[0].CreatedEvent.createArgument).toEqual({ n: 0 });

      const legacy = await streamUpdates(wsUrl(url, '/v2/updates'), {
        beginExclusive: 0,
        endInclusive: 4,
        filter: { filtersByParty: { [ALICE]: {} } },
        verbose: true,
      });
      expect(legacy.frames.map((frame) => frame['update'].Transaction.value.offset)).toEqual([1, 2, 3, 4]);
    });
  });

  it('stays open without endInclusive and delivers new transactions', async () => {
    await withSandbox(async ({ url }) => {
      const result = await streamUpdates(
        wsUrl(url, '/v2/updates'),
        { beginExclusive: 0, updateFormat },
        {
          onFrame: (frame, socket) => {
            const offset = frame['update'].Transaction.value.offset;
            if (offset === 1) {
              void postJson(`${url}/v2/commands/submit-and-wait`, {
                commands: [{ CreateCommand: { templateId: SANDBOX_SEED.templates.iou, createArguments: {} } }],
                commandId: 'live',
                actAs: [ALICE],
                userId: 'alice',
              });
            }
            if (offset === 2) socket.close(1000);
          },
        },
      );
      expect(result.frames.map((frame) => frame['update'].Transaction.value.commandId)).toEqual([
        SANDBOX_SEED.initialTransaction.commandId,
        'live',
      ]);
    });
  });

  it(`streams ${SYNTHETIC_COUNT_PARAMETER} synthetic messages for benchmarks`, async () => {
    await withSandbox(async ({ url }) => {
      const result = await streamUpdates(wsUrl(url, `/v2/updates?${SYNTHETIC_COUNT_PARAMETER}=10000`), {
        beginExclusive: 100,
      });
      expect(result.closeCode).toBe(1000);
      expect(result.frames).toHaveLength(10000);
      expect(result.frames[0]?.['update'].Transaction.value.offset).toBe(101);
      expect(result.frames.at(-1)?.['update'].Transaction.value.offset).toBe(10100);
      expect(result.frames[0]?.['update'].Transaction.value.events[0].CreatedEvent.templateId).toBe(
        SANDBOX_SEED.templates.iou,
      );

      const viaFrame = await streamUpdates(wsUrl(url, '/v2/updates'), {
        beginExclusive: 0,
        updateFormat,
        [SYNTHETIC_COUNT_PARAMETER]: 3,
      });
      expect(viaFrame.frames.map((frame) => frame['update'].Transaction.value.offset)).toEqual([1, 2, 3]);

      const rawFrame = await new Promise<string>((resolve, reject) => {
        const socket = new WebSocket(wsUrl(url, `/v2/updates?${SYNTHETIC_COUNT_PARAMETER}=1`), PROTOCOLS);
        socket.on('open', () => socket.send('{"beginExclusive": 9007199254740992}'));
        socket.on('message', (data) => resolve(Buffer.from(data as Buffer).toString()));
        socket.on('error', reject);
      });
      expect(rawFrame).toContain('"offset":9007199254740993,');
    });
  });

  it('sends a JsCantonError frame for a begin offset after the ledger end', async () => {
    await withSandbox(async ({ url }) => {
      const result = await streamUpdates(wsUrl(url, '/v2/updates'), { beginExclusive: 5, updateFormat });
      expect(result.frames).toHaveLength(1);
      expect(result.frames[0]).toMatchObject({
        code: 'OFFSET_AFTER_LEDGER_END',
        cause: 'Begin offset (5) is after ledger end (1)',
        errorCategory: 12,
        grpcCodeValue: 11,
        retryInfo: '1 second',
        definiteAnswer: null,
      });
    });
  });

  it('refuses upgrades on other paths', async () => {
    await withSandbox(async ({ url }) => {
      const status = await new Promise<number>((resolve, reject) => {
        const socket = new WebSocket(wsUrl(url, '/v2/nope'), PROTOCOLS);
        socket.on('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0));
        socket.on('open', () => reject(new Error('upgrade should have been refused')));
        socket.on('error', () => undefined);
      });
      expect(status).toBe(404);
    });
  });

  it('ends open streams when the sandbox closes', async () => {
    let clientClosed: Promise<number> | undefined;
    await withSandbox(async ({ url }) => {
      const socket = new WebSocket(wsUrl(url, '/v2/updates'), PROTOCOLS);
      clientClosed = new Promise((resolve) => socket.on('close', (code) => resolve(code)));
      await new Promise((resolve) => socket.on('open', resolve));
      socket.send(JSON.stringify({ beginExclusive: 0, updateFormat }));
      await new Promise((resolve) => socket.once('message', resolve));
    });
    expect(await clientClosed).toBe(1001);
  });
});
