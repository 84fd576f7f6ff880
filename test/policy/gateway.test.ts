// The policy stage through the running gateway against a recording upstream: a refused request never
// reaches the participant and gets a complete JsCantonError; an accepted one arrives byte for byte.
import http from 'node:http';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startGateway } from '../helpers/gateway.js';
import { echoOnce, startWebSocketUpstream } from '../helpers/websocket-upstream.js';
import { headerValues } from '../helpers/recording-upstream.js';
import { JS_CANTON_ERROR_KEYS } from '../helpers/canton-error-shape.js';
import { recordingGatewayPerTest } from '../helpers/per-test.js';

const PKG = '3f1c0000000000000000000000000000000000000000000000000000000000e9';
const TEMPLATE = `${PKG}:Iou:Iou`;

const current = recordingGatewayPerTest();
const { start } = current;

async function send(
  method: string,
  path: string,
  body: string | undefined,
  headers: Record<string, string> = {},
  token?: string,
) {
  const authorization = token === undefined ? current.gw!.auth() : { authorization: `Bearer ${token}` };
  return fetch(`${current.gw!.url}${path}`, {
    method,
    body,
    headers: { 'content-type': 'application/json', ...authorization, ...headers },
  });
}

/** A refusal: the status, Canton's complete error shape, the code, and nothing upstream. */
async function expectRefusal(response: Response, status: number, code: string, category: number, grpc: number) {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  const body = (await response.json()) as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(JS_CANTON_ERROR_KEYS);
  expect(body).toMatchObject({ code, errorCategory: category, grpcCodeValue: grpc });
  expect(body.correlationId).toBe(response.headers.get('x-request-id'));
  expect(current.upstream!.requests).toHaveLength(0);
  return body;
}

/** A body the participant's JSON decoder refuses: Canton's 400 text/plain (`V2Routes.scala`), and nothing upstream. */
async function expectDecodeFailure(response: Response, detail: string) {
  expect(response.status).toBe(400);
  expect(response.headers.get('content-type')).toBe('text/plain; charset=UTF-8');
  expect(await response.text()).toBe(`Invalid value for: body (${detail})`);
  expect(response.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  expect(current.upstream!.requests).toHaveLength(0);
}

/** What Canton's JSON layer copies from a gRPC error's ErrorInfo (Canton's JSON API docs, json-api/index.rst). */
function expectGrpcOrigin(body: Record<string, unknown>, context: Record<string, string>) {
  expect(body.definiteAnswer).toBeNull();
  // `tid` is the trace id, when the call has one (always, once tracing runs: docs/errors-and-metrics.md "Traces").
  expect(body.context).toEqual({
    ...context,
    category: String(body.errorCategory),
    ...(body.traceId !== null && { tid: body.traceId }),
  });
}

async function expectForwardedVerbatim(response: Response, body: string) {
  expect(response.status).toBe(200);
  expect(current.upstream!.requests).toHaveLength(1);
  expect(current.upstream!.requests[0]!.body.toString('utf8')).toBe(body);
  expect(current.upstream!.requests[0]!.body.equals(Buffer.from(body))).toBe(true);
}

describe('request rules through the gateway', () => {
  it('updateVettedPackages, both routes: refusals never reach the participant', async () => {
    await start();
    for (const path of ['/v2/package-vetting', '/v2/package-vetting/update']) {
      const empty = await expectRefusal(await send('POST', path, '{"changes": []}'), 400, 'MISSING_FIELD', 8, 3);
      expect(empty).toMatchObject({
        cause: 'The submitted command is missing a mandatory field: changes',
        resources: [],
        retryInfo: null,
      });
      expectGrpcOrigin(empty, { field_name: 'changes', definite_answer: 'false' });
      const noOp = await expectRefusal(
        await send('POST', path, '{"changes": [{"operation": {"Empty": {}}}]}'),
        400,
        'PROTO_DESERIALIZATION_FAILURE',
        8,
        3,
      );
      expect(noOp.cause).toBe('Deserialization of protobuf message failed');
      expectGrpcOrigin(noOp, { reason: 'FieldNotSet(operation)' }); // a CantonError: no definite_answer
      await expectRefusal(
        await send(
          'POST',
          path,
          '{"changes": [{"operation": {"Vet": {"value": {"packages": [{"packageId": "x"}]}}}}], "expectedTopologySerial": {"serial": {"Prior": {"value": 0}}}}',
        ),
        400,
        'PROTO_DESERIALIZATION_FAILURE',
        8,
        3,
      );
    }
  });

  it('updateVettedPackages: an accepted body arrives byte for byte', async () => {
    await start();
    const body = `{ "changes" : [ {"operation":{"Vet":{"value":{"packages":[{"packageName":"my-app","packageVersion":"1.2.0"}]}}}},\n\t{"operation": {"Unvet": {"value": {"packages": [{"packageId": "${PKG}"}]}}}} ],\r\n "dryRun": false, "expectedTopologySerial": {"serial": {"Prior": {"value": 4}}} }`;
    await expectForwardedVerbatim(await send('POST', '/v2/package-vetting/update', body), body);
  });

  it('getUpdateByOffset: refusals, and int64 max arriving exactly as sent', async () => {
    await start();
    const zero = await expectRefusal(
      await send('POST', '/v2/updates/update-by-offset', '{"offset": 0, "updateFormat": {}}'),
      400,
      'NON_POSITIVE_OFFSET',
      8,
      3,
    );
    expect(zero.cause).toBe(
      'Offset 0 in offset is not a positive integer: the offset has to be a positive integer (>0)',
    );
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const noFormat = await expectRefusal(
      await send('POST', '/v2/updates/update-by-offset', '{"offset": 3}', {
        traceparent: `00-${traceId}-00f067aa0ba902b7-01`,
      }),
      400,
      'MISSING_FIELD',
      8,
      3,
    );
    expect(noFormat).toMatchObject({ traceId, definiteAnswer: null }); // Canton's MISSING_FIELD, field for field
    expect(noFormat.context).toEqual({
      field_name: 'update_format',
      definite_answer: 'false',
      category: '8',
      tid: traceId,
    });
    expectGrpcOrigin(zero, { definite_answer: 'false' });
    await expectDecodeFailure(
      await send('POST', '/v2/updates/update-by-offset', '{"offset": 9223372036854775808, "updateFormat": {}}'),
      "9223372036854775808 is out of range [-9223372036854775808, 9223372036854775807]; the offset must be an integer (int64) at 'offset'",
    );
    const body =
      '{"offset":9223372036854775807 ,  "updateFormat" :{"includeTransactions":{"eventFormat":{"filtersByParty":{"Alice::1220":{"cumulative":[]}},"verbose":true},"transactionShape":"TRANSACTION_SHAPE_ACS_DELTA"}}}   ';
    await expectForwardedVerbatim(await send('POST', '/v2/updates/update-by-offset', body), body);
  });

  it("updateIdentityProviderConfig: refusals with Canton's causes; an accepted body arrives byte for byte", async () => {
    await start();
    const mismatch = await expectRefusal(
      await send(
        'PATCH',
        '/v2/idps/idp-1',
        '{"identityProviderConfig": {"identityProviderId": "idp-2"}, "updateMask": {"paths": ["issuer"]}}',
      ),
      400,
      'INVALID_ARGUMENT',
      8,
      3,
    );
    expect(mismatch.cause).toBe(
      'The submitted request has invalid arguments: idp-1 does not match idp in body: Some(IdentityProviderConfig(idp-2,false,,,))',
    );
    expect(mismatch).toMatchObject({ context: {}, definiteAnswer: false }); // the JSON layer's own error (Canton's ledger-json-api/README.md)
    const mask = await expectRefusal(
      await send(
        'PATCH',
        '/v2/idps/idp-1',
        '{"identityProviderConfig": {"identityProviderId": "idp-1"}, "updateMask": {"paths": ["jwksUrl"]}}',
      ),
      400,
      'INVALID_IDENTITY_PROVIDER_UPDATE_REQUEST',
      8,
      3,
    );
    expect(mask).toMatchObject({
      cause:
        "Update operation for identity provider config 'idp-1' failed due to: The update path: 'jwksUrl' points to an unknown field.",
      resources: [['ErrorResource(IDENTITY_PROVIDER_CONFIG)', 'idp-1']],
    });
    expectGrpcOrigin(mask, {}); // a ContextualizedDamlError: no definite_answer
    await expectRefusal(
      await send('PATCH', '/v2/idps/idp-1', '{"identityProviderConfig": {"identityProviderId": "idp-1"}}'),
      400,
      'MISSING_FIELD',
      8,
      3,
    );
    const body =
      '{"identityProviderConfig": {"identityProviderId": "idp id/1", "isDeactivated": true, "issuer": "", "jwksUrl": "", "audience": ""},\n "updateMask": {"paths": ["is_deactivated"]}}';
    await expectForwardedVerbatim(await send('PATCH', `/v2/idps/${encodeURIComponent('idp id/1')}`, body), body);
    expect(current.upstream!.requests[0]!.url).toBe('/v2/idps/idp%20id%2F1');
  });

  it("submitAndWaitForTransaction: refusals, another user's userId redacted, an accepted body byte for byte", async () => {
    await start();
    const path = '/v2/commands/submit-and-wait-for-transaction';
    await expectRefusal(
      await send('POST', path, `{"commands": {"commands": [], "commandId": "c1", "actAs": ["Alice"]}}`),
      400,
      'MISSING_FIELD',
      8,
      3,
    );
    await expectDecodeFailure(
      await send(
        'POST',
        path,
        '{"commands": {"commands": [{"CreateCommand": {"templateId": "Iou", "createArguments": {}}}], "commandId": "c1", "actAs": ["Alice"]}}',
      ),
      "Invalid identifier format (Iou) not matching the expected format (<package>:<moduleName>:<entityName>) at 'commands.commands[0].CreateCommand.templateId'",
    );
    await expectDecodeFailure(
      await send('POST', path, '{"commands": {"commands": [], "actAs": ["Alice"]}}'),
      "Missing required field at 'commands.commandId'",
    );
    const other = await expectRefusal(
      await send(
        'POST',
        path,
        `{"commands": {"commands": [{"CreateCommand": {"templateId": "${TEMPLATE}", "createArguments": {}}}], "commandId": "c1", "actAs": ["Alice"], "userId": "bob"}}`,
      ),
      403,
      'NA',
      -1,
      7,
    );
    expect(other).toMatchObject({ cause: 'A security-sensitive error has been received', context: {}, resources: [] });
    const body = `{"commands":{"commands":[{"CreateCommand":{"templateId":"#my-app:Iou:Iou","createArguments":{"amount":"999.99","n":12345678901234567890}}}],"commandId":"cmd-7f3a","actAs":["Alice::1220"],"userId":"alice"}}`;
    await expectForwardedVerbatim(await send('POST', path, body), body);
  });

  it('refuses malformed, non-object, oversized, too deep or unreadable bodies on rule-checked routes', async () => {
    await start({ limits: { bodyBytes: 4096 }, policy: { maxBodyDepth: 16 } });
    const path = '/v2/updates/update-by-offset';
    // What the participant's decoder refuses gets its text/plain 400; the gateway's own limits a JsCantonError.
    await expectDecodeFailure(
      await send('POST', path, '{"offset": 1,, }'),
      'Malformed JSON: Expected double-quoted property name in JSON at position 13 (line 1 column 14)',
    );
    await expectDecodeFailure(await send('POST', path, '[1, 2]'), "Got value with wrong type, expecting object at ''");
    await expectDecodeFailure(
      await send('POST', path, ''),
      'Malformed JSON: the body is empty; this route needs a JSON object',
    );
    const deep = await expectRefusal(
      await send('POST', path, `{"a": ${'['.repeat(20)}${']'.repeat(20)}}`),
      400,
      'GATEWAY_MALFORMED_REQUEST',
      8,
      3,
    );
    expect(deep.cause).toBe('The body is nested deeper than 16 levels (at position 21).');
    const large = await expectRefusal(
      await send('POST', path, `{"pad": "${'x'.repeat(5000)}"}`),
      413,
      'GATEWAY_REQUEST_TOO_LARGE',
      8,
      3,
    );
    expect(large.cause).toBe('The request body is larger than 4096 bytes (limits.bodyBytes).'); // the lower of the two limits
    const utf16 = Buffer.from('{"offset": 1, "updateFormat": {"x": "é"}}', 'utf16le').toString('latin1');
    await expectRefusal(
      await fetch(`${current.gw!.url}${path}`, {
        method: 'POST',
        body: Buffer.from(utf16, 'latin1'),
        headers: { ...current.gw!.auth(), 'content-type': 'application/json; charset=utf-16le' },
      }),
      415,
      'GATEWAY_UNSUPPORTED_MEDIA_TYPE',
      8,
      3,
    );
  });

  it('gives rule-checked bodies their own, lower limit (policy.maxBodyBytes), refused before a byte is parsed; other routes keep limits.bodyBytes', async () => {
    await start({ limits: { bodyBytes: 64 * 1024 }, policy: { maxBodyBytes: 2048 } });
    const path = '/v2/updates/update-by-offset';
    const fits = `{"offset": 7, "updateFormat": {}, "pad": "${'x'.repeat(1900)}"}`;
    await expectForwardedVerbatim(await send('POST', path, fits), fits);
    current.upstream!.requests.length = 0;
    // Over the limit, declared or chunked, and not even JSON: 413, so nothing was parsed.
    const over = `{"offset": 7, "pad": "${'x'.repeat(3000)}`;
    const declared = await send('POST', path, over);
    expect(declared.headers.get('connection')).toBe('close');
    const refusal = await expectRefusal(declared, 413, 'GATEWAY_REQUEST_TOO_LARGE', 8, 3);
    expect(refusal.cause).toBe('The request body is larger than 2048 bytes (policy.maxBodyBytes).');
    const stream = new Blob([over.slice(0, 1500), over.slice(1500)]).stream();
    const chunked = await fetch(`${current.gw!.url}${path}`, {
      method: 'POST',
      body: stream,
      duplex: 'half',
      headers: current.gw!.auth(),
    });
    await expectRefusal(chunked, 413, 'GATEWAY_REQUEST_TOO_LARGE', 8, 3);
    // Another route streams a body of the same size through, unread.
    await expectForwardedVerbatim(await send('POST', '/v2/updates/update-by-id', over), over);
  });

  it('refuses Content-Type lines that declare different types on every route, as pekko-http does; lines alike pass', async () => {
    await start();
    const body = '{"offset": 7, "updateFormat": {}}';
    const twoTypes = (path: string, second: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const headers = [
          'Host',
          new URL(current.gw!.url).host,
          ...Object.entries(current.gw!.auth()).flat(),
          'Content-Type',
          'application/json',
          'Content-Type',
          second,
          'Content-Length',
          String(body.length),
        ];
        const request = http.request(`${current.gw!.url}${path}`, { method: 'POST', headers }, (response) => {
          let text = '';
          response.on('data', (chunk: Buffer) => {
            text += chunk.toString();
          });
          response.on('end', () => resolve({ status: response.statusCode!, body: text }));
        });
        request.on('error', reject);
        request.end(body);
      });
    for (const path of ['/v2/updates/update-by-offset', '/v2/updates/update-by-id']) {
      const refused = await twoTypes(path, 'application/json; charset=utf-16');
      expect(refused.status, path).toBe(400);
      expect(JSON.parse(refused.body)).toMatchObject({
        code: 'GATEWAY_MALFORMED_REQUEST',
        cause: 'The request is malformed: the request has Content-Type lines that declare different types.',
      });
      expect(current.upstream!.requests).toHaveLength(0);
    }
    expect((await twoTypes('/v2/updates/update-by-offset', 'Application/JSON')).status).toBe(200);
    expect(headerValues(current.upstream!.requests[0]!, 'content-type')).toEqual([
      'application/json',
      'Application/JSON',
    ]);
  });

  it('accepts an empty or unparseable Content-Type as the participant does (the body read as UTF-8) and forwards it as sent', async () => {
    await start();
    const body = '{"offset": 7, "updateFormat": {}, "note": "é"}';
    for (const [path, contentType] of [
      ['/v2/updates/update-by-offset', ''],
      ['/v2/updates/update-by-offset', 'json'],
      ['/v2/updates/update-by-offset', 'application/json; charset'],
      ['/v2/updates/update-by-offset', 'application/json; note="a; charset=utf-16"'], // no charset: a quoted parameter
      ['/v2/updates/update-by-id', ''],
      ['/v2/updates/update-by-id', 'not a type'],
    ] as const) {
      current.upstream!.requests.length = 0;
      const answer = await send('POST', path, body, { 'content-type': contentType });
      expect(answer.status, `${path} ${contentType}`).toBe(200);
      expect(headerValues(current.upstream!.requests[0]!, 'content-type'), contentType).toEqual([contentType]);
      expect(current.upstream!.requests[0]!.body.toString()).toBe(body);
    }
    // Judged as UTF-8 JSON all the same: the rules still refuse.
    current.upstream!.requests.length = 0;
    const zero = await send('POST', '/v2/updates/update-by-offset', '{"offset": 0}', { 'content-type': 'nonsense' });
    await expectRefusal(zero, 400, 'NON_POSITIVE_OFFSET', 8, 3);
  });

  it('reads the body whatever the media type, as the participant does, and forwards a chunked body intact', async () => {
    await start();
    const body = '{"offset": 7, "updateFormat": {}}';
    await expectForwardedVerbatim(
      await send('POST', '/v2/updates/update-by-offset', body, { 'content-type': 'text/plain' }),
      body,
    );
    current.upstream!.requests.length = 0;
    const untyped = await fetch(`${current.gw!.url}/v2/updates/update-by-offset`, {
      method: 'POST',
      body: new TextEncoder().encode(body),
      headers: current.gw!.auth(),
    });
    expect(untyped.status, 'no Content-Type at all').toBe(200);
    expect(current.upstream!.requests[0]!.headers['content-type']).toBeUndefined();
    expect(current.upstream!.requests[0]!.body.toString()).toBe(body);
    current.upstream!.requests.length = 0;
    const chunked = await fetch(`${current.gw!.url}/v2/updates/update-by-offset`, {
      method: 'POST',
      body: new Blob(['{"offset": 7,', ' "updateFormat": {}}']).stream(),
      duplex: 'half',
      headers: current.gw!.auth(),
    });
    await expectForwardedVerbatim(chunked, body);
  });

  it("leaves every other route's body unread and untouched", async () => {
    await start();
    const body = '{"not": json at all';
    await expectForwardedVerbatim(await send('POST', '/v2/updates/update-by-id', body), body);
  });

  it('forwards what the rules would refuse when policy.requestRules is off', async () => {
    await start({ policy: { requestRules: false } });
    const body = '{"offset": 0}';
    await expectForwardedVerbatim(await send('POST', '/v2/updates/update-by-offset', body), body);
  });
});

describe('authorization per operation', () => {
  const policy = {
    rules: {
      updateVettedPackages: [{ scope: 'ledger:admin' }],
      updateIdentityProviderConfig: [{ scope: 'ledger:admin' }],
      submitAndWaitForTransaction: [{ subjects: ['alice', 'bob'] }],
      onV2Updates: [{ subjects: ['alice'] }],
    },
  };
  const vetting = `{"changes": [{"operation": {"Vet": {"value": {"packages": [{"packageId": "${PKG}"}]}}}}]}`;
  const submit = (userId: string) =>
    `{"commands": {"commands": [{"CreateCommand": {"templateId": "${TEMPLATE}", "createArguments": {}}}], "commandId": "c1", "actAs": ["Alice"], "userId": "${userId}"}}`;

  it('lets a token whose scope holds ledger:admin change vetting and identity providers, and no other', async () => {
    await start({ policy });
    const admin = await current.gw!.issuer.mint({ sub: 'ops', scope: 'daml_ledger_api ledger:admin' });
    const user = await current.gw!.issuer.mint({ sub: 'ops', scope: 'daml_ledger_api' });
    const denied = await expectRefusal(
      await send('POST', '/v2/package-vetting/update', vetting, {}, user),
      403,
      'NA',
      -1,
      7,
    );
    expect(denied.cause).toBe('A security-sensitive error has been received');
    await expectRefusal(
      await send(
        'PATCH',
        '/v2/idps/idp-1',
        '{"identityProviderConfig": {"identityProviderId": "idp-1"}, "updateMask": {"paths": ["issuer"]}}',
        {},
        user,
      ),
      403,
      'NA',
      -1,
      7,
    );
    // Authorization comes before the body is read: a denied caller's bad body is never judged.
    await expectRefusal(
      await send('POST', '/v2/package-vetting/update', '{"changes": []}', {}, user),
      403,
      'NA',
      -1,
      7,
    );
    await expectForwardedVerbatim(await send('POST', '/v2/package-vetting/update', vetting, {}, admin), vetting);
  });

  it('lets only the listed subjects submit; other operations stay open to any token', async () => {
    await start({ policy });
    const bob = await current.gw!.issuer.mint({ sub: 'bob' });
    const carol = await current.gw!.issuer.mint({ sub: 'carol' });
    await expectRefusal(
      await send('POST', '/v2/commands/submit-and-wait-for-transaction', submit('carol'), {}, carol),
      403,
      'NA',
      -1,
      7,
    );
    await expectForwardedVerbatim(
      await send('POST', '/v2/commands/submit-and-wait-for-transaction', submit('bob'), {}, bob),
      submit('bob'),
    );
    current.upstream!.requests.length = 0;
    const open = await send('GET', '/v2/state/ledger-end', undefined, {}, carol);
    expect(open.status).toBe(200);
    expect(current.upstream!.requests).toHaveLength(1);
  });

  it('governs /v2 paths outside the catalogue as operation unknown: forwarded by default, refused by a deny rule', async () => {
    await start();
    expect((await send('GET', '/v2/some-newer-route', undefined)).status).toBe(200);
    expect(current.upstream!.requests.map((r) => r.url)).toEqual(['/v2/some-newer-route']);
    await current.gw!.close();
    await current.upstream!.close();
    await start({ policy: { rules: { unknown: [{ effect: 'deny', anyAuthenticated: true }] } } });
    await expectRefusal(await send('GET', '/v2/some-newer-route', undefined), 403, 'NA', -1, 7);
    await expectRefusal(await send('PUT', '/v2/users', '{}'), 403, 'NA', -1, 7);
    expect((await send('GET', '/v2/state/ledger-end', undefined)).status).toBe(200);
  });

  it('authorizes before the version cache: a caller no rule allows never sees a cached answer', async () => {
    await start({ policy: { rules: { getVersion: [{ subjects: ['alice'] }] } } });
    const alice = await current.gw!.issuer.mint({ sub: 'alice' });
    const carol = await current.gw!.issuer.mint({ sub: 'carol' });
    expect((await send('GET', '/v2/version', undefined, {}, alice)).status).toBe(200);
    const served = current.upstream!.requests.length;
    const denied = await send('GET', '/v2/version', undefined, {}, carol);
    expect(denied.status).toBe(403);
    expect(await denied.json()).toMatchObject({ code: 'NA', errorCategory: -1, grpcCodeValue: 7 });
    expect(current.upstream!.requests).toHaveLength(served);
  });

  it('authorizes WebSocket upgrades by operation too', async () => {
    const wsUpstream = await startWebSocketUpstream();
    const gw = await startGateway(wsUpstream.url, { policy });
    try {
      const carol = await gw.issuer.mint({ sub: 'carol' });
      const alice = await gw.issuer.mint({ sub: 'alice' });
      const wsUrl = `${gw.url.replace('http', 'ws')}/v2/updates`;
      const refused = await new Promise<number>((resolve, reject) => {
        const socket = new WebSocket(wsUrl, [`jwt.token.${carol}`, 'daml.ws.auth']);
        socket.on('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0));
        socket.on('open', () => reject(new Error('opened')));
        socket.on('error', () => undefined);
      });
      expect(refused).toBe(403);
      expect(wsUpstream.upgrades).toHaveLength(0);
      expect(await echoOnce(wsUrl, [`jwt.token.${alice}`, 'daml.ws.auth'])).toBe('echo:{}');
      expect(wsUpstream.upgrades).toHaveLength(1);
    } finally {
      await gw.close();
      await wsUpstream.close();
    }
  });
});

describe('CORS', () => {
  const cors = { enabled: true, origins: ['https://app.example'], maxAgeSeconds: 300 };

  it('answers a preflight without a token, before authentication, and never forwards it', async () => {
    await start({ cors });
    const response = await fetch(`${current.gw!.url}/v2/commands/submit-and-wait-for-transaction`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization, content-type',
      },
    });
    expect(response.status).toBe(204);
    expect(response.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(response.headers.get('access-control-allow-methods')).toBe('GET, POST, PATCH, DELETE');
    expect(response.headers.get('access-control-allow-headers')).toBe(
      'authorization, content-type, traceparent, tracestate',
    );
    expect(response.headers.get('access-control-max-age')).toBe('300');
    expect(response.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/); // answered by the gateway itself, still identified
    expect(current.upstream!.requests).toHaveLength(0);
  });

  it('gives no allow-origin to an origin not listed', async () => {
    await start({ cors });
    const response = await fetch(`${current.gw!.url}/v2/version`, {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'GET' },
    });
    expect(response.headers.get('access-control-allow-origin')).toBeNull();
    expect(current.upstream!.requests).toHaveLength(0);
  });

  it('adds the CORS headers to forwarded answers and to refusals alike', async () => {
    await start({ cors });
    const ok = await fetch(`${current.gw!.url}/v2/state/ledger-end`, {
      headers: { origin: 'https://app.example', ...current.gw!.auth() },
    });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(ok.headers.get('access-control-expose-headers')).toBe('x-request-id, retry-after');
    expect(ok.headers.get('vary')).toContain('Origin');
    expect(ok.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const noToken = await fetch(`${current.gw!.url}/v2/state/ledger-end`, {
      headers: { origin: 'https://app.example' },
    });
    expect(noToken.status).toBe(401);
    expect(noToken.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(noToken.headers.get('x-request-id')).toBe(
      ((await noToken.json()) as { correlationId: string }).correlationId,
    );
  });

  it('is off by default: an OPTIONS call is no preflight and needs a token like any other', async () => {
    await start();
    const response = await fetch(`${current.gw!.url}/v2/version`, {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'GET' },
    });
    expect(response.status).toBe(401);
    expect(response.headers.get('access-control-allow-origin')).toBeNull();
    expect(current.upstream!.requests).toHaveLength(0);
  });
});
