// L1, submissions at the participant's own limit (issue 42): token holders each send one
// submission of `size` bytes (limits.bodyBytes, 8 MiB) on a route read only for its userId (or, on
// submit-and-wait-for-transaction, a rule-checked route read whole and judged in a worker), all at
// once, the userId last so that the whole body is held before it is judged. A caller refused for
// the body budget (503) or its share of it (429) tries again after the Retry-After it was given, as
// a client should, until it is answered 200 or `signal` aborts.
import { createHash } from 'node:crypto';
import { postJsonAnswer } from './post-json.mjs';

const COMMANDS =
  '"commands":[{"CreateCommand":{"templateId":"#app:Iou:Iou","createArguments":{"n":1}}}],"actAs":["Alice::1220"]';

/**
 * A submission of exactly `size` bytes in `user`'s name, its userId the last field; `shape` 'string':
 * one long workflowId (the tokenizer's worst: one string as long as the body), 'disclosed': disclosed
 * contracts of a 3 KB created-event blob each (what a large submission carries).
 */
export function largeSubmission(size, user, commandId, shape = 'string', wrapped = false) {
  // submit-and-wait-for-transaction wraps the same JsCommands in `commands` (its rule reads it whole).
  const head = `${wrapped ? '{"commands":' : ''}{${COMMANDS},"commandId":"${commandId}",`;
  const tail = `"userId":"${user}"}${wrapped ? '}' : ''}`;
  if (shape === 'string') {
    const open = `${head}"workflowId":"`;
    const close = `",${tail}`;
    return Buffer.from(open + 'w'.repeat(size - open.length - close.length) + close);
  }
  const contract = `{"templateId":"#app:Iou:Iou","contractId":"00ab","createdEventBlob":"${'Y2FudG9u'.repeat(384)}","synchronizerId":""}`;
  const open = `${head}"disclosedContracts":[`;
  const room = size - open.length - tail.length - 2 - '{"workflowId":""}'.length;
  const count = Math.floor((room + 1) / (contract.length + 1));
  const contracts = Array.from({ length: count }, () => contract).join(',');
  const pad = size - open.length - contracts.length - '],"workflowId":"",'.length - tail.length;
  return Buffer.from(`${open}${contracts}],"workflowId":"${'w'.repeat(pad)}",${tail}`);
}

/** The token's subject: the user a submission must name (policy/rules/submitting-user.ts). */
const subjectOf = (token) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString()).sub;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Resolves once every caller (a token of `tokens`, in its subject's name) was answered 200, or when
 * `signal` aborts: each body's sha256, whether it was answered 200 and after how many attempts, every
 * answer by status, every refusal by status, code and Retry-After, and the longest any attempt took.
 */
export async function largeSubmissions(
  { api, path = '/v2/commands/submit-and-wait', tokens, size = 8_388_608, shape = 'string' },
  signal,
) {
  const answers = {};
  const refusals = {};
  const sent = [];
  let longestMs = 0;
  const caller = async (index) => {
    const body = largeSubmission(
      size,
      subjectOf(tokens[index]),
      `l1-${index}`,
      shape,
      path.endsWith('-for-transaction'),
    );
    const entry = { sha256: createHash('sha256').update(body).digest('hex'), accepted: false, attempts: 0 };
    sent.push(entry);
    while (!signal.aborted && !entry.accepted) {
      const started = Date.now();
      const { status, retryAfter, code } = await postJsonAnswer(`${api}${path}`, tokens[index], body, signal);
      longestMs = Math.max(longestMs, Date.now() - started);
      if (status === undefined) break;
      entry.attempts += 1;
      answers[status] = (answers[status] ?? 0) + 1;
      if (status === 200) entry.accepted = true;
      else if (status === 503 || status === 429) {
        const refusal = `${status} ${code} Retry-After: ${retryAfter}`;
        refusals[refusal] = (refusals[refusal] ?? 0) + 1;
        await sleep(Number(retryAfter ?? 1) * 1000);
      } else break; // anything else is not retried: the test reads it from `answers`
    }
  };
  await Promise.all(tokens.map((_, index) => caller(index)));
  return { bodyBytes: size, answers, refusals, sent, longestMs };
}
