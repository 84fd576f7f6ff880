// Canton's error body: the JsCantonError schema of the JSON Ledger API's OpenAPI (3.4 and 3.5).

/**
 * Its ten keys, sorted to compare with `Object.keys(body).sort()`. Written out, not taken from src/errors.ts,
 * so that a test fails when the gateway drops or renames one.
 */
export const JS_CANTON_ERROR_KEYS: readonly string[] = [
  'code',
  'cause',
  'correlationId',
  'traceId',
  'context',
  'resources',
  'errorCategory',
  'grpcCodeValue',
  'retryInfo',
  'definiteAnswer',
].sort();
