// The error_code label of a participant's error answer, from its content type and first bytes.
import { describe, expect, it } from 'vitest';
import { ERROR_BODY_CAPTURE_BYTES, upstreamErrorCode } from '../../src/exchange/upstream-error-code.js';

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
