// Hostile bodies on the rule-checked routes: a clear 4xx in Canton's shape, never a crash, never a
// changed body upstream.
import { describe, expect, it } from 'vitest';
import { gatewayForFile } from '../helpers/file-gateway.js';

const running = gatewayForFile({ limits: { bodyBytes: 2 * 1024 * 1024 } });

const FORMAT = '"updateFormat":{"includeTransactions":{"eventFormat":{"filtersByParty":{"Alice::1220ab":{"cumulative":[]}}},"transactionShape":"TRANSACTION_SHAPE_ACS_DELTA"}}';

async function post(path: string, body: Buffer | string): Promise<{ status: number; text: string; json: Record<string, unknown> | undefined; forwarded: boolean }> {
  const before = running.upstream.requests.length;
  const response = await fetch(`${running.gw.url}${path}`, { method: 'POST', body, headers: running.gw.auth({ 'content-type': 'application/json' }) });
  const text = await response.text();
  let json: Record<string, unknown> | undefined;
  try { json = JSON.parse(text) as Record<string, unknown>; } catch { json = undefined; }
  return { status: response.status, text, json, forwarded: running.upstream.requests.length > before };
}

async function stillServes(): Promise<void> {
  expect((await fetch(`${running.gw.url}/v2/state/ledger-end`, { headers: running.gw.auth() })).status).toBe(200);
}

describe('hostile bodies on rule-checked routes', () => {
  it('invalid UTF-8 inside a string: judged as the participant decodes it (malformed bytes replaced), forwarded byte for byte', async () => {
    // Canton (pekko-http) decodes a body with its charset, replacing malformed sequences, and then
    // accepts the JSON: refusing it here would refuse what the participant accepts. The bytes go on unchanged.
    const body = Buffer.concat([Buffer.from('{"offset":1,"x":"'), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from(`",${FORMAT}}`)]);
    const answer = await post('/v2/updates/update-by-offset', body);
    expect(answer.status).toBe(200);
    expect(running.upstream.requests.at(-1)!.body.equals(body)).toBe(true);
    // Invalid UTF-8 where the JSON structure is: refused.
    const broken = Buffer.concat([Buffer.from('{"offset":1,'), Buffer.from([0xff, 0xfe]), Buffer.from(`:1,${FORMAT}}`)]);
    const refused = await post('/v2/updates/update-by-offset', broken);
    expect(refused.status).toBe(400);
    expect(refused.forwarded).toBe(false);
    await stillServes();
  });

  it('deeply nested JSON: 400 GATEWAY_MALFORMED_REQUEST, not forwarded, no stack overflow', async () => {
    const deep = `{"offset":1,${FORMAT},"x":${'['.repeat(200_000)}${']'.repeat(200_000)}}`;
    const answer = await post('/v2/updates/update-by-offset', deep);
    expect(answer.status).toBe(400);
    expect(answer.json).toMatchObject({ code: 'GATEWAY_MALFORMED_REQUEST' });
    expect(answer.forwarded).toBe(false);
    await stillServes();
  });

  it('__proto__ and constructor keys pollute nothing and arrive unchanged', async () => {
    const body = `{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}},"offset":5,${FORMAT}}`;
    const answer = await post('/v2/updates/update-by-offset', body);
    expect(answer.status).toBe(200);
    expect(running.upstream.requests.at(-1)!.body.toString()).toBe(body);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    await stillServes();
  });

  it('an enormous array: answered, bounded by limits.bodyBytes, never a crash', async () => {
    const items = Array.from({ length: 150_000 }, () => '{"CreateCommand":{"templateId":"p:M:E","createArguments":{}}}').join(',');
    const body = `{"commands":{"commands":[${items}],"commandId":"c","actAs":["Alice"]}}`;
    const answer = await post('/v2/commands/submit-and-wait-for-transaction', body);
    expect(answer.status).toBe(413); // 9 MB over the 2 MiB limit
    expect(answer.json).toMatchObject({ code: 'GATEWAY_REQUEST_TOO_LARGE' });
    const fits = `{"commands":{"commands":[${Array.from({ length: 20_000 }, () => '{"CreateCommand":{"templateId":"p:M:E","createArguments":{}}}').join(',')}],"commandId":"c","actAs":["Alice"]}}`;
    const accepted = await post('/v2/commands/submit-and-wait-for-transaction', fits);
    expect(accepted.status).toBe(200);
    expect(running.upstream.requests.at(-1)!.body.toString()).toBe(fits);
    await stillServes();
  });

  it('numbers beyond int64: the decoder\'s 400 text/plain, not forwarded; int64 max arrives exactly', async () => {
    const beyond = await post('/v2/updates/update-by-offset', `{"offset":9223372036854775808,${FORMAT}}`);
    expect(beyond.status).toBe(400);
    expect(beyond.text).toMatch(/^Invalid value for: body \(9223372036854775808 is out of range .* at 'offset'\)$/);
    expect(beyond.forwarded).toBe(false);
    const max = `{"offset":9223372036854775807,${FORMAT}}`;
    expect((await post('/v2/updates/update-by-offset', max)).status).toBe(200);
    expect(running.upstream.requests.at(-1)!.body.toString()).toBe(max);
  });

  it('duplicated keys: judged on the last value, as Canton reads it, forwarded unchanged', async () => {
    const refused = await post('/v2/updates/update-by-offset', `{"offset":5,"offset":0,${FORMAT}}`);
    expect(refused.status).toBe(400);
    expect(refused.json).toMatchObject({ code: 'NON_POSITIVE_OFFSET' });
    const body = `{"offset":0,"offset":5,${FORMAT}}`;
    expect((await post('/v2/updates/update-by-offset', body)).status).toBe(200);
    expect(running.upstream.requests.at(-1)!.body.toString()).toBe(body);
  });
});
