// A caller's principal facts are kept per verified principal (ledger-policy/stage.ts): the same token
// on one keep-alive connection is the same principal, but a policy naming callers by their client
// address must still judge each call's own address (X-Forwarded-For through a trusted proxy).
import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { startGateway, type RunningGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';
import { ALICE, IOU_BY_ID } from './support.js';

const current = perTest();
const create = (commandId: string) => ({
  commands: [{ CreateCommand: { templateId: IOU_BY_ID, createArguments: { owner: ALICE } } }],
  commandId,
  actAs: [ALICE],
  userId: 'alice',
});

/** One POST on `agent`'s kept-alive connection, as forwarded for `address`: its status and the rule that refused it. */
function post(gw: RunningGateway, agent: http.Agent, body: object, address: string) {
  return new Promise<{ status: number; rule?: string; socket: unknown }>((resolve, reject) => {
    const text = JSON.stringify(body);
    const request = http.request(
      `${gw.url}/v2/commands/submit-and-wait`,
      {
        method: 'POST',
        agent,
        headers: gw.auth({
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(text)),
          'x-forwarded-for': address,
        }),
      },
      (response) => {
        let answer = '';
        response.on('data', (chunk: Buffer) => (answer += chunk.toString()));
        response.on('end', () => {
          const rule = answer.startsWith('{')
            ? (JSON.parse(answer) as { context?: { rule?: string } }).context?.rule
            : undefined;
          resolve({
            status: response.statusCode ?? 0,
            ...(rule === undefined ? {} : { rule }),
            socket: request.socket,
          });
        });
      },
    );
    request.on('error', reject).end(text);
  });
}

describe("a caller's principal facts, kept per verified principal", () => {
  it("judges each call's own client address on one connection with one token", async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url, {
      server: { trustedProxies: ['127.0.0.1'] },
      ledgerPolicy: {
        policies: [
          {
            name: 'office',
            principals: { subjects: ['alice'], sources: ['10.0.0.0/8'] },
            rules: [{ name: 'no-creates', effect: 'deny', commandKinds: ['CreateCommand'] }],
          },
        ],
      },
    }));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const calls = [
        ['office-1', '10.1.2.3'],
        ['home-1', '192.0.2.1'],
        ['office-2', '10.1.2.3'],
        ['home-2', '192.0.2.1'],
        ['home-3', '192.0.2.1'],
        ['office-3', '10.9.9.9'],
      ] as const;
      const answers = [];
      for (const [id, address] of calls) answers.push(await post(gw, agent, create(id), address));
      // One connection throughout: the token cache hands every call the same principal.
      expect(new Set(answers.map((answer) => answer.socket)).size).toBe(1);
      expect(answers.map(({ status, rule }) => ({ status, rule }))).toEqual(
        calls.map(([id]) =>
          id.startsWith('office') ? { status: 403, rule: 'no-creates' } : { status: 200, rule: undefined },
        ),
      );
      expect(upstream.requests.map((request) => JSON.parse(request.body.toString()).commandId)).toEqual([
        'home-1',
        'home-2',
        'home-3',
      ]);
    } finally {
      agent.destroy();
    }
  });
});
