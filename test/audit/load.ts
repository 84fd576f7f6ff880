// Mixed ledger writes and reads through a gateway for a bounded time, by several clients at once,
// against a recording upstream that answers each write as the participant would (an updateId per
// command, a party per allocation), so the trail can be matched call by call.
import type http from 'node:http';
import { request } from 'undici';
import type { RecordedRequest, UpstreamHandler } from '../helpers/recording-upstream.js';

export const TEMPLATE = '#my-app:Iou:Iou';

/** The participant's answer to each kind of call: writes carry ids derived from the request. */
export const participantAnswers: UpstreamHandler = (recorded: RecordedRequest, response: http.ServerResponse) => {
  const body = recorded.body.length > 0 ? (JSON.parse(recorded.body.toString()) as Record<string, unknown>) : {};
  const commands = (typeof body.commands === 'object' && !Array.isArray(body.commands) ? body.commands : body) as {
    commandId?: string;
  };
  const path = recorded.url.split('?')[0]!;
  let answer: unknown = {};
  if (path === '/v2/commands/submit-and-wait')
    answer = { updateId: `update-${commands.commandId}`, completionOffset: 17 };
  else if (path === '/v2/commands/submit-and-wait-for-transaction')
    answer = {
      transaction: {
        updateId: `update-${commands.commandId}`,
        commandId: commands.commandId,
        offset: 18,
        recordTime: '2026-11-28T00:00:00Z',
        synchronizerId: 'sync::1',
        effectiveAt: '2026-11-28T00:00:00Z',
        events: [],
      },
    };
  else if (path === '/v2/package-vetting') answer = { newVettedPackages: [] };
  else if (path === '/v2/parties')
    answer = { partyDetails: { party: `${String(body.partyIdHint)}::1220`, isLocal: true } };
  else if (path === '/v2/state/ledger-end') answer = { offset: 42 };
  const text = JSON.stringify(answer);
  response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  response.end(text);
};

export interface SentCall {
  readonly kind: 'submit' | 'submitForTransaction' | 'vetting' | 'party' | 'read';
  readonly key: string;
  status: number;
  errorCode?: string;
}

let counter = 0;

/** One call of the mix (by turn), its identifying key (commandId, submissionId or party hint). */
export async function sendOne(base: string, headers: Record<string, string>, turn: number): Promise<SentCall> {
  const n = ++counter;
  const key = `k${process.pid}-${n}`;
  const kinds = ['submit', 'submitForTransaction', 'vetting', 'party', 'read'] as const;
  const kind = kinds[turn % kinds.length]!;
  let path: string;
  let method: 'GET' | 'POST' = 'POST';
  let body: string | undefined;
  switch (kind) {
    case 'submit':
      path = '/v2/commands/submit-and-wait';
      body = JSON.stringify({
        commands: [{ CreateCommand: { templateId: TEMPLATE, createArguments: { secret: 'not-audited' } } }],
        commandId: key,
        actAs: ['Alice::1220'],
        userId: 'alice',
      });
      break;
    case 'submitForTransaction':
      path = '/v2/commands/submit-and-wait-for-transaction';
      body = JSON.stringify({
        commands: {
          commands: [{ CreateCommand: { templateId: TEMPLATE, createArguments: {} } }],
          commandId: key,
          actAs: ['Alice::1220'],
          userId: 'alice',
        },
      });
      break;
    case 'vetting':
      path = '/v2/package-vetting';
      body = JSON.stringify({
        changes: [{ operation: { Vet: { value: { packages: [{ packageId: key }] } } } }],
        dryRun: false,
      });
      break;
    case 'party':
      path = '/v2/parties';
      body = JSON.stringify({ partyIdHint: key, identityProviderId: '' });
      break;
    default:
      path = '/v2/state/ledger-end';
      method = 'GET';
  }
  const answer = await request(`${base}${path}`, {
    method,
    headers: { ...headers, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body }),
  });
  const text = await answer.body.text();
  const sent: SentCall = { kind, key, status: answer.statusCode };
  if (answer.statusCode >= 400) {
    try {
      sent.errorCode = (JSON.parse(text) as { code?: string }).code;
    } catch {
      sent.errorCode = text;
    }
  }
  return sent;
}

/** `clients` loops sending the mix until `ms` passed; every call's result. */
export async function mixedLoad(
  base: string,
  headers: Record<string, string>,
  clients: number,
  ms: number,
  onError: (error: unknown) => void = () => undefined,
): Promise<SentCall[]> {
  const until = Date.now() + ms;
  const sent: SentCall[] = [];
  await Promise.all(
    Array.from({ length: clients }, async (_, client) => {
      for (let turn = client; Date.now() < until; turn++) {
        try {
          sent.push(await sendOne(base, headers, turn));
        } catch (error) {
          onError(error);
        }
      }
    }),
  );
  return sent;
}

/** The key a participant's recorded request is identified by. */
export function keyOf(recorded: RecordedRequest): string | undefined {
  if (recorded.body.length === 0) return undefined;
  const body = JSON.parse(recorded.body.toString()) as Record<string, unknown>;
  const commands = (typeof body.commands === 'object' && !Array.isArray(body.commands) ? body.commands : body) as {
    commandId?: string;
  };
  if (commands.commandId !== undefined) return commands.commandId;
  if (typeof body.partyIdHint === 'string') return body.partyIdHint;
  const changes = body.changes as Array<{ operation: { Vet: { value: { packages: Array<{ packageId: string }> } } } }>;
  return changes?.[0]?.operation.Vet.value.packages[0]?.packageId;
}

/** The key of an intent record's identifying fields. */
export function recordKey(record: Record<string, unknown>): string | undefined {
  const fields = record.request as Record<string, unknown> | undefined;
  if (fields === undefined) return undefined;
  if (typeof fields.commandId === 'string') return fields.commandId;
  if (typeof fields.partyIdHint === 'string') return fields.partyIdHint;
  const ids = fields.packageIds as string[] | undefined;
  return ids?.[0];
}
