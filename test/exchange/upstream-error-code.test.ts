// The error_code label of a participant's error answer, from its content type and first bytes.
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { ERROR_BODY_CAPTURE_BYTES, upstreamErrorCode } from '../../src/exchange/upstream-error-code.js';
import { MetricNames } from '../../src/telemetry/metrics.js';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';

/**
 * What pekko-http answers when the participant's route has not answered within Canton's
 * `http-ledger-api.request-timeout` (akka/pekko-http `HttpServerBluePrint`, its test
 * `HttpServerSpec` "request timeouts": 503, text/plain; charset=UTF-8, 105 bytes).
 */
const PEKKO_TIMEOUT_BODY =
  'The server was not able to produce a timely response to your request.\r\nPlease try again in a short while!';

const JSON_TYPE = 'application/json';
const body = (value: unknown) => Buffer.from(JSON.stringify(value));

describe('upstreamErrorCode', () => {
  it("reads Canton's code, refines NA by its gRPC code, and names the other shapes", () => {
    expect(upstreamErrorCode(JSON_TYPE, body({ code: 'TOPOLOGY_SERIAL_MISMATCH', grpcCodeValue: 9 }), false)).toBe(
      'TOPOLOGY_SERIAL_MISMATCH',
    );
    expect(upstreamErrorCode(JSON_TYPE, body({ code: 'NA', grpcCodeValue: 16 }), false)).toBe('UNAUTHENTICATED');
    expect(upstreamErrorCode(JSON_TYPE, body({ code: 'NA', grpcCodeValue: 9 }), false)).toBe('NA');
    expect(upstreamErrorCode(JSON_TYPE, body({ errors: ['GET, uri: http://h/v2/nope'], status: 404 }), false)).toBe(
      'ROUTE_NOT_FOUND',
    );
    expect(upstreamErrorCode('text/plain; charset=UTF-8', Buffer.from('Invalid value for: body (x)'), false)).toBe(
      'DECODE_FAILURE',
    );
    expect(upstreamErrorCode(JSON_TYPE, Buffer.from('{"code":'), false)).toBe('DECODE_FAILURE');
  });

  it("labels an answer without a body UNRECOGNIZED_ERROR, whatever its content type (a HEAD's, an empty error)", () => {
    expect(upstreamErrorCode(JSON_TYPE, Buffer.alloc(0), false)).toBe('UNRECOGNIZED_ERROR');
    expect(upstreamErrorCode(undefined, Buffer.alloc(0), false)).toBe('UNRECOGNIZED_ERROR');
  });

  it('refines a redacted code in a body too long to read whole, from the bytes it keeps', () => {
    const long = (code: string, grpc: number) =>
      body({
        code,
        cause: 'A security-sensitive error has been received',
        grpcCodeValue: grpc,
        context: { pad: 'x'.repeat(ERROR_BODY_CAPTURE_BYTES) },
      }).subarray(0, ERROR_BODY_CAPTURE_BYTES);
    expect(upstreamErrorCode(JSON_TYPE, long('NA', 7), true)).toBe('PERMISSION_DENIED');
    expect(upstreamErrorCode(JSON_TYPE, long('UPDATE_NOT_FOUND', 5), true)).toBe('UPDATE_NOT_FOUND');
    expect(upstreamErrorCode(JSON_TYPE, Buffer.from('{"cause":"x",'), true)).toBe('UNRECOGNIZED_ERROR');
  });
});

describe("the participant's own request timeout", () => {
  const current = perTest();

  it('is named PARTICIPANT_REQUEST_TIMEOUT, not a decode failure', () => {
    expect(Buffer.byteLength(PEKKO_TIMEOUT_BODY)).toBe(105);
    expect(upstreamErrorCode('text/plain; charset=UTF-8', Buffer.from(PEKKO_TIMEOUT_BODY), false)).toBe(
      'PARTICIPANT_REQUEST_TIMEOUT',
    );
    // Another text/plain answer is still Canton's decode failure; a body cut short is not the timeout.
    expect(upstreamErrorCode('text/plain; charset=UTF-8', Buffer.from('Invalid value for: body (x)'), false)).toBe(
      'DECODE_FAILURE',
    );
    expect(upstreamErrorCode('text/plain', Buffer.from('The server was not able'), false)).toBe('DECODE_FAILURE');
  });

  it('reaches the client as the participant sent it and is counted by its name', async () => {
    const upstream = await startRecordingUpstream((_request, response) => {
      response.writeHead(503, {
        'content-type': 'text/plain; charset=UTF-8',
        'content-length': Buffer.byteLength(PEKKO_TIMEOUT_BODY),
        connection: 'close',
      });
      response.end(PEKKO_TIMEOUT_BODY);
    });
    current.upstream = upstream;
    current.gw = await startGateway(upstream.url);
    const answer = await request(`${current.gw.url}/v2/commands/submit-and-wait`, {
      method: 'POST',
      headers: current.gw.auth({ 'content-type': 'application/json' }),
      body: JSON.stringify({ commands: [], commandId: 'c', actAs: ['Alice::1220'] }),
    });
    expect(answer.statusCode).toBe(503);
    expect(answer.headers['content-type']).toBe('text/plain; charset=UTF-8');
    expect(await answer.body.text()).toBe(PEKKO_TIMEOUT_BODY);
    expect(upstream.requests).toHaveLength(1);
    const metric = await current.gw.registry.getSingleMetric(MetricNames.requests)!.get();
    expect(metric.values).toContainEqual(
      expect.objectContaining({
        value: 1,
        labels: expect.objectContaining({
          operation: 'postV2CommandsSubmit-and-wait',
          status: '503',
          error_code: 'PARTICIPANT_REQUEST_TIMEOUT',
        }) as unknown,
      }),
    );
  });
});
