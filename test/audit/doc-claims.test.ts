// docs/audit.md, claim by claim, where the other audit tests do not already hold it: what a write
// refused before the audit stage leaves (nothing), what an intent says of who, where and what (its
// request id is the answer's x-request-id, its path has no query; at level metadata no request
// fields; an upload its length; an unreadable body that it was), an outcome of a client that left
// (499), the order of a record's first keys, a digest's signature over the documented text, and the
// stdout copy's shape.
import { createPublicKey, verify } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { request } from 'undici';
import { startGateway } from '../helpers/gateway.js';
import { logCapture } from '../helpers/log-capture.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream, type UpstreamHandler } from '../helpers/recording-upstream.js';
import { participantAnswers } from './load.js';
import { keyFiles, readTrail, records, trailDirectory } from './support.js';

const current = perTest();
const keys = keyFiles();

async function auditedGateway(
  audit: Record<string, unknown> = {},
  answers: UpstreamHandler = participantAnswers,
  logger?: ReturnType<typeof logCapture>,
) {
  const upstream = await startRecordingUpstream(answers);
  current.upstream = upstream;
  const directory = trailDirectory();
  const gw = await startGateway(
    upstream.url,
    {
      audit: { enabled: true, directory, signingKeyFile: keys.privateKeyFile, ...audit },
      ...(logger && { log: { level: 'info' } }),
    },
    logger === undefined ? {} : { logger: logger.logger },
  );
  current.gw = gw;
  return { gw, directory, upstream };
}

const submitBody = (commandId: string) =>
  JSON.stringify({
    commands: [{ CreateCommand: { templateId: '#app:Iou:Iou', createArguments: {} } }],
    commandId,
    actAs: ['Alice::1220'],
    userId: 'alice',
  });

const post = (url: string, headers: Record<string, string>, body: string | Buffer, contentType = 'application/json') =>
  request(url, { method: 'POST', headers: { ...headers, 'content-type': contentType }, body });

describe('docs/audit.md, "What is audited"', () => {
  it('a write refused before the audit stage (no token, no right) leaves no record: it is in the access log', async () => {
    const { gw, directory } = await auditedGateway({}, participantAnswers);
    const noToken = await post(`${gw.url}/v2/commands/submit-and-wait`, {}, submitBody('no-token'));
    expect(noToken.statusCode).toBe(401);
    await noToken.body.text();
    await gw.close();
    expect(records(directory).filter((record) => record.kind === 'intent' || record.kind === 'outcome')).toEqual([]);
  });
});

describe('docs/audit.md, "Record format"', () => {
  it('an intent names the request id the answer carried (x-request-id), the path without its query, the principal; every record begins v, seq, prev, kind, time', async () => {
    const { gw, directory } = await auditedGateway();
    const answer = await post(`${gw.url}/v2/commands/submit-and-wait?trace=1`, gw.auth(), submitBody('claims-1'));
    expect(answer.statusCode).toBe(200);
    await answer.body.text();
    await gw.close();
    const intent = records(directory).find((record) => record.kind === 'intent')!;
    expect(intent).toMatchObject({
      requestId: answer.headers['x-request-id'],
      path: '/v2/commands/submit-and-wait',
      method: 'POST',
      principal: { issuer: gw.issuer.issuerConfig.issuer, subject: 'alice' },
      operation: 'postV2CommandsSubmit-and-wait',
      level: 'request',
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
    });
    for (const { text } of readTrail(directory))
      for (const line of text.split('\n').filter((l) => l !== ''))
        expect(Object.keys(JSON.parse(line) as object).slice(0, 5)).toEqual(['v', 'seq', 'prev', 'kind', 'time']);
  });

  it('at level metadata an intent carries no request fields; an upload carries its length, never its bytes', async () => {
    const { gw, directory } = await auditedGateway(
      { policy: { levels: { 'postV2CommandsSubmit-and-wait': 'metadata' } } },
      (recorded, response) => {
        if (recorded.url !== '/v2/dars') return participantAnswers(recorded, response);
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      },
    );
    await (await post(`${gw.url}/v2/commands/submit-and-wait`, gw.auth(), submitBody('meta-1'))).body.text();
    const dar = Buffer.alloc(2048, 7);
    await (await post(`${gw.url}/v2/dars`, gw.auth(), dar, 'application/octet-stream')).body.text();
    await gw.close();
    const intents = records(directory).filter((record) => record.kind === 'intent');
    const submit = intents.find((record) => record.operation === 'postV2CommandsSubmit-and-wait')!;
    expect(submit).toMatchObject({ level: 'metadata' });
    expect(submit).not.toHaveProperty('request');
    expect(intents.find((record) => record.operation === 'postV2Dars')).toMatchObject({
      request: { contentLength: 2048 },
    });
  });

  it('a body that is not JSON: the intent says it was unreadable, the outcome that it was not forwarded, with the code', async () => {
    const { gw, directory, upstream } = await auditedGateway();
    const answer = await post(`${gw.url}/v2/commands/submit-and-wait`, gw.auth(), '{"commandId": "broken-');
    expect(answer.statusCode).toBe(400);
    await answer.body.text();
    await gw.close();
    expect(upstream.requests).toEqual([]);
    const trail = records(directory);
    expect(trail.find((record) => record.kind === 'intent')).toMatchObject({ request: { unreadableBody: true } });
    expect(trail.find((record) => record.kind === 'outcome')).toMatchObject({
      forwarded: false,
      reason: 'refused',
      status: 400,
      errorCode: expect.any(String),
    });
  });

  it('a client that left before the answer: the outcome has status 499, forwarded true (the participant got it)', async () => {
    const { gw, directory } = await auditedGateway({}, (recorded, response) => {
      setTimeout(() => void participantAnswers(recorded, response), 1_000);
    });
    const controller = new AbortController();
    const leaving = request(`${gw.url}/v2/commands/submit-and-wait`, {
      method: 'POST',
      headers: { ...gw.auth(), 'content-type': 'application/json' },
      body: submitBody('left-1'),
      signal: controller.signal,
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    controller.abort();
    await expect(leaving).rejects.toThrow();
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    await gw.close();
    expect(records(directory).find((record) => record.kind === 'outcome')).toMatchObject({
      status: 499,
      forwarded: true,
    });
  });

  it("a digest's signature is Ed25519 over `ledger-gateway-audit/1 digest <seq> <time> <prev>`, as documented", async () => {
    const { gw, directory } = await auditedGateway();
    await (await post(`${gw.url}/v2/commands/submit-and-wait`, gw.auth(), submitBody('signed-1'))).body.text();
    await gw.close();
    const digests = records(directory).filter((record) => record.kind === 'digest');
    expect(digests.length).toBeGreaterThan(1);
    const key = createPublicKey(keys.publicKeyPem);
    for (const digest of digests) {
      const text = `ledger-gateway-audit/1 digest ${digest.seq} ${String(digest.time)} ${digest.prev}`;
      expect(verify(null, Buffer.from(text), key, Buffer.from(String(digest.signature), 'base64'))).toBe(true);
    }
  });
});

describe('docs/audit.md, "Sinks"', () => {
  it('audit.stdout: each record also as a log line {"msg":"audit","record":{...}}', async () => {
    const capture = logCapture('info');
    const { gw, directory } = await auditedGateway({ stdout: true }, participantAnswers, capture);
    await (await post(`${gw.url}/v2/commands/submit-and-wait`, gw.auth(), submitBody('stdout-1'))).body.text();
    await gw.close();
    const copied = capture
      .entries()
      .filter((entry) => entry.msg === 'audit')
      .map((entry) => entry.record);
    expect(copied).toEqual(records(directory));
  });
});

describe('docs/security.md, "Audit trail bounds"', () => {
  it('names for every bound a test that exists, by its file and its name', () => {
    const doc = readFileSync(new URL('../../docs/security.md', import.meta.url), 'utf8');
    const section = doc.slice(
      doc.indexOf('## Audit trail bounds'),
      doc.indexOf('\n## ', doc.indexOf('## Audit trail bounds') + 1),
    );
    const rows = section
      .split('\n')
      .filter((line) => line.startsWith('| ') && !line.startsWith('| bound') && !line.startsWith('|---'));
    expect(rows.length).toBeGreaterThanOrEqual(6);
    for (const row of rows) {
      const cell = row.split(' | ').at(-1)!;
      const file = /`(test\/[^`]+)`/.exec(cell)?.[1];
      expect(file, row).toBeDefined();
      const path = new URL(`../../${file}`, import.meta.url);
      expect(existsSync(path), file).toBe(true);
      const source = readFileSync(path, 'utf8').replaceAll("\\'", "'");
      const names = [...cell.matchAll(/"([^"]+)"/g)].map((match) => match[1]!);
      expect(names.length, row).toBeGreaterThan(0);
      for (const name of names) expect(source, `${file}: ${name}`).toContain(name);
    }
  });
});
