// The five operations the product names, with a request that passes the gateway's stages and the
// participant answers the telemetry tests program: a success, and an error whose metrics label is
// known (Canton `JsSchema.scala`, `RequestValidationErrors.scala`).
import type { UpstreamHandler } from '../helpers/recording-upstream.js';

export interface OperationCase {
  readonly operation: string;
  readonly method: 'GET' | 'POST' | 'PATCH';
  readonly path: string;
  readonly body?: string;
  /** A body the gateway's request rules refuse (400) before anything is forwarded. */
  readonly refusedBody?: string;
  /** The participant's error answer and the error_code the gateway must label it with. */
  readonly upstreamError: {
    readonly status: number;
    readonly contentType: string;
    readonly body: string;
    readonly label: string;
  };
}

const PARTY = 'Alice::1220a8f9c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0';
const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';

/** A JsCantonError as the participant prints it: all ten keys, nulls included (Canton `JsSchema.scala`). */
export function cantonError(
  code: string,
  cause: string,
  category: number,
  grpc: number,
  extra: Record<string, unknown> = {},
): string {
  return JSON.stringify({
    code,
    cause,
    correlationId: null,
    traceId: TRACE_ID,
    context: code === 'NA' ? {} : { category: String(category), tid: TRACE_ID, definite_answer: 'false' },
    resources: [],
    errorCategory: code === 'NA' ? -1 : category,
    grpcCodeValue: grpc,
    retryInfo: null,
    definiteAnswer: null,
    ...extra,
  });
}

const JSON_TYPE = 'application/json';

export const OPERATION_CASES: readonly OperationCase[] = [
  {
    operation: 'getVersion',
    method: 'GET',
    path: '/v2/version',
    // Redacted internal error: code NA, refined by grpcCodeValue 13.
    upstreamError: {
      status: 500,
      contentType: JSON_TYPE,
      body: cantonError('NA', 'A security-sensitive error has been received', -1, 13),
      label: 'INTERNAL',
    },
  },
  {
    operation: 'submitAndWaitForTransaction',
    method: 'POST',
    path: '/v2/commands/submit-and-wait-for-transaction',
    body: JSON.stringify({
      commands: {
        commands: [
          {
            CreateCommand: {
              templateId: '9a1b2c3d:Iou:Iou',
              createArguments: { issuer: PARTY, owner: PARTY, currency: 'USD', amount: '999.99', observers: [] },
            },
          },
        ],
        commandId: 'cmd-7f3a',
        actAs: [PARTY],
        userId: 'alice',
      },
    }),
    refusedBody: JSON.stringify({ commands: { commands: [], commandId: 'cmd-7f3a', actAs: [] } }),
    // A tapir decode failure: 400 text/plain.
    upstreamError: {
      status: 400,
      contentType: 'text/plain; charset=UTF-8',
      body: "Invalid value for: body (Invalid identifier format (9a1b2c3d:Iou) not matching the expected format (<package>:<moduleName>:<entityName>) at 'commands[0].CreateCommand.templateId')",
      label: 'DECODE_FAILURE',
    },
  },
  {
    operation: 'getUpdateByOffset',
    method: 'POST',
    path: '/v2/updates/update-by-offset',
    body: JSON.stringify({
      offset: 42,
      updateFormat: {
        includeTransactions: {
          eventFormat: { filtersByParty: { [PARTY]: { cumulative: [] } }, verbose: true },
          transactionShape: 'TRANSACTION_SHAPE_ACS_DELTA',
        },
      },
    }),
    refusedBody: JSON.stringify({ offset: 0, updateFormat: {} }),
    upstreamError: {
      status: 404,
      contentType: JSON_TYPE,
      body: cantonError('UPDATE_NOT_FOUND', 'Update not found, or not visible.', 11, 5, {
        resources: [['ErrorResource(OFFSET)', '42']],
      }),
      label: 'UPDATE_NOT_FOUND',
    },
  },
  {
    operation: 'updateVettedPackages',
    method: 'POST',
    path: '/v2/package-vetting/update',
    body: JSON.stringify({
      changes: [{ operation: { Vet: { value: { packages: [{ packageName: 'my-app', packageVersion: '1.2.0' }] } } } }],
      dryRun: false,
      expectedTopologySerial: { serial: { Prior: { value: 4 } } },
    }),
    refusedBody: JSON.stringify({ changes: [] }),
    upstreamError: {
      status: 400,
      contentType: JSON_TYPE,
      body: cantonError(
        'TOPOLOGY_DEPENDENCIES_NOT_VETTED',
        'Package vetting failed due to dependencies not being vetted',
        9,
        9,
      ),
      label: 'TOPOLOGY_DEPENDENCIES_NOT_VETTED',
    },
  },
  {
    operation: 'updateIdentityProviderConfig',
    method: 'PATCH',
    path: '/v2/idps/idp-1',
    body: JSON.stringify({
      identityProviderConfig: {
        identityProviderId: 'idp-1',
        isDeactivated: true,
        issuer: '',
        jwksUrl: '',
        audience: '',
      },
      updateMask: { paths: ['is_deactivated'] },
    }),
    refusedBody: JSON.stringify({
      identityProviderConfig: {
        identityProviderId: 'idp-1',
        isDeactivated: true,
        issuer: '',
        jwksUrl: '',
        audience: '',
      },
      updateMask: { paths: [] },
    }),
    // Redacted permission denied: code NA, refined by grpcCodeValue 7.
    upstreamError: {
      status: 403,
      contentType: JSON_TYPE,
      body: cantonError('NA', 'A security-sensitive error has been received', -1, 7),
      label: 'PERMISSION_DENIED',
    },
  },
];

export const VERSION_ANSWER = JSON.stringify({
  version: '3.4.12',
  features: {
    experimental: {},
    userManagement: { supported: true },
    partyManagement: {},
    offsetCheckpoint: {},
    packageFeature: {},
  },
});

/** Header the tests set on a request to choose the participant's answer (forwarded like any other). */
export const SCENARIO_HEADER = 'x-test-scenario';

/** Answers each operation's success, or its programmed error when the request carries `x-test-scenario: error`. */
export const scriptedParticipant: UpstreamHandler = (request, response) => {
  const wanted = OPERATION_CASES.find((c) => request.url.split('?')[0] === c.path);
  if (request.headers[SCENARIO_HEADER] === 'error' && wanted !== undefined) {
    const { status, contentType, body } = wanted.upstreamError;
    response.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
    response.end(body);
    return;
  }
  const body = wanted?.operation === 'getVersion' ? VERSION_ANSWER : '{"ok":true}';
  response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  response.end(body);
};
