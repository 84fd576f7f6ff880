// The submitting user through the running gateway: on every submission route, a userId naming
// another user than the token's is refused (Canton's redacted 403) and never reaches the participant;
// the token's own user, or none, arrives byte for byte.
import { describe, expect, it } from 'vitest';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';

const current = perTest();
const commands =
  '"commands":[{"CreateCommand":{"templateId":"#app:Iou:Iou","createArguments":{"n":12345678901234567890}}}],"commandId":"c1","actAs":["Alice::1220"]';
const reassignment = '"reassignmentCommands":{"commandId":"r1","submitter":"Alice::1220","commands":[],"userId":USER}';
/** Each route and a body template; USER stands for the userId's JSON. */
const ROUTES: ReadonlyArray<[string, string]> = [
  ['/v2/commands/submit-and-wait', `{${commands},"userId":USER}`],
  ['/v2/commands/submit-and-wait-for-transaction-tree', `{${commands},"userId":USER}`],
  ['/v2/commands/async/submit', `{${commands},"userId":USER}`],
  ['/v2/commands/submit-and-wait-for-reassignment', `{${reassignment}}`],
  ['/v2/commands/async/submit-reassignment', `{${reassignment}}`],
  ['/v2/interactive-submission/prepare', `{${commands},"userId":USER}`],
  ['/v2/interactive-submission/execute', '{"preparedTransaction":"AAEC","submissionId":"s1","userId":USER}'],
  ['/v2/interactive-submission/executeAndWait', '{"preparedTransaction":"AAEC","submissionId":"s1","userId":USER}'],
  [
    '/v2/interactive-submission/executeAndWaitForTransaction',
    '{"preparedTransaction":"AAEC","submissionId":"s1","userId":USER}',
  ],
];

describe('the submitting user on every submission route', () => {
  it("refuses another user's userId with Canton's redacted 403, nothing upstream; forwards the token's own user or none verbatim", async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url));
    const send = (path: string, body: string) =>
      fetch(`${gw.url}${path}`, { method: 'POST', body, headers: gw.auth({ 'content-type': 'application/json' }) });
    for (const [path, template] of ROUTES) {
      const refused = await send(path, template.replace('USER', '"bob"'));
      expect(refused.status, path).toBe(403);
      const answer = (await refused.json()) as Record<string, unknown>;
      expect(answer, path).toMatchObject({
        code: 'NA',
        errorCategory: -1,
        grpcCodeValue: 7,
        cause: 'A security-sensitive error has been received',
        correlationId: refused.headers.get('x-request-id'),
      });
      expect(JSON.stringify(answer), path).not.toContain('bob');
      expect(upstream.requests, path).toHaveLength(0);

      for (const own of ['"alice"', '""']) {
        const body = template.replace('USER', own);
        expect((await send(path, body)).status, path).toBe(200);
        const received = upstream.requests.pop()!;
        expect(received.url, path).toBe(path);
        expect(received.body.equals(Buffer.from(body)), path).toBe(true);
      }
    }
    const counted = await gw.registry.getSingleMetricAsString('ledger_gateway_requests_total');
    expect(counted).toMatch(
      /operation="postV2Interactive-submissionPrepare",method="POST",status="403",error_code="PERMISSION_DENIED"\} 1/,
    );
  });

  it("forwards another user's userId when policy.requestRules is off (the participant decides)", async () => {
    const upstream = (current.upstream = await startRecordingUpstream());
    const gw = (current.gw = await startGateway(upstream.url, { policy: { requestRules: false } }));
    const body = `{${commands},"userId":"bob"}`;
    const answer = await fetch(`${gw.url}/v2/commands/async/submit`, {
      method: 'POST',
      body,
      headers: gw.auth({ 'content-type': 'application/json' }),
    });
    expect(answer.status).toBe(200);
    expect(upstream.requests[0]!.body.toString()).toBe(body);
  });
});
