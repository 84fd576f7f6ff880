// WebSocket GET /v2/updates (Canton `Endpoints.scala`): the client offers `jwt.token.<JWT>` and `daml.ws.auth`,
// the server answers `daml.ws.auth`, the client sends one GetUpdatesRequest frame, and the server sends
// JsGetUpdatesResponse frames `{"update":{"Transaction":{"value":…}}}`. With `endInclusive` the stream
// closes (1000) once it is reached; without it the stream stays open and carries new transactions.
//
// Sandbox-only: `sandboxSyntheticCount=N` (query parameter of the upgrade URL, or a request-frame
// field) sends N synthetic transactions with offsets beginExclusive+1 … beginExclusive+N, then closes.
// Benchmarks use it to stream e.g. 10,000 messages without first writing them to the ledger.

import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { bodyObject, DecodeFailure, optionalObject, relaxedInt64 } from './decode.js';
import { freshTraceId, invalidArgument, renderSandboxError, SandboxError, traceIdFromTraceparent } from './errors.js';
import { isJsonObject, JsonSyntaxError, parseJsonPreservingInt64, type JsonObject } from './json.js';
import { SANDBOX_SEED } from './seed.js';
import type { SandboxState, StoredTransaction } from './state.js';
import { parseEventFormat, type TransactionFormat } from './transactions.js';
import { parseUpdateFormat, renderVisible } from './updates.js';

export const SYNTHETIC_COUNT_PARAMETER = 'sandboxSyntheticCount';
export const WEBSOCKET_AUTH_PROTOCOL = 'daml.ws.auth';
const UPDATE_STREAM_PATHS = new Set(['/v2/updates']);
const SYNTHETIC_BATCH = 256;
const CLOSE_GRACE_MS = 500;

export interface UpgradeRecord {
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
}

interface UpdateStreamRequest {
  readonly beginExclusive: bigint;
  readonly endInclusive: bigint | undefined;
  readonly format: TransactionFormat | undefined;
  readonly syntheticCount: number | undefined;
}

function parseSyntheticCount(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  const count = Number(value);
  if (!Number.isSafeInteger(count) || count < 0)
    throw invalidArgument(`${SYNTHETIC_COUNT_PARAMETER} must be a non-negative integer`);
  return count;
}

/** GetUpdatesRequest: `updateFormat`, or the legacy `filter` (+ `verbose`) meaning ACS delta. */
function parseUpdateStreamRequest(body: JsonObject, queryCount: string | null): UpdateStreamRequest {
  const beginExclusive = relaxedInt64(body, 'beginExclusive', '');
  const endInclusive =
    body['endInclusive'] === undefined || body['endInclusive'] === null
      ? undefined
      : relaxedInt64(body, 'endInclusive', '');
  const syntheticCount = parseSyntheticCount(queryCount ?? body[SYNTHETIC_COUNT_PARAMETER]);
  const updateFormat = optionalObject(body, 'updateFormat', '');
  const legacyFilter = optionalObject(body, 'filter', '');
  let format: TransactionFormat | undefined;
  if (updateFormat !== undefined && legacyFilter !== undefined) {
    throw invalidArgument(
      'Both filter/verbose and update_format is specified. Please use either backwards compatible arguments (filter and verbose) or update_format, but not both.',
    );
  } else if (updateFormat !== undefined) {
    format = parseUpdateFormat(updateFormat, 'updateFormat');
  } else if (legacyFilter !== undefined) {
    format = { shape: 'TRANSACTION_SHAPE_ACS_DELTA', filter: parseEventFormat(legacyFilter, 'filter') };
  } else if (syntheticCount === undefined) {
    throw invalidArgument(
      'Either filter/verbose or update_format is required. Please use either backwards compatible arguments (filter and verbose) or update_format.',
    );
  }
  return { beginExclusive, endInclusive, format, syntheticCount };
}

function requireNonNegativeBegin(request: UpdateStreamRequest): void {
  if (request.beginExclusive < 0n) {
    throw new SandboxError(
      'NEGATIVE_OFFSET',
      `Offset ${request.beginExclusive} in begin_exclusive is a negative integer: the offset has to be a non-negative integer (>=0)`,
    );
  }
}

/** UpdateServiceRequestValidator's offset checks against the ledger end. */
function checkOffsets(request: UpdateStreamRequest, ledgerEnd: number): void {
  requireNonNegativeBegin(request);
  if (request.beginExclusive > BigInt(ledgerEnd)) {
    throw new SandboxError(
      'OFFSET_AFTER_LEDGER_END',
      `Begin offset (${request.beginExclusive}) is after ledger end (${ledgerEnd})`,
    );
  }
  if (request.endInclusive !== undefined) {
    if (request.endInclusive < request.beginExclusive) {
      throw invalidArgument(`End offset ${request.endInclusive} is before begin offset ${request.beginExclusive}.`);
    }
    if (request.endInclusive > BigInt(ledgerEnd)) {
      throw new SandboxError(
        'OFFSET_AFTER_LEDGER_END',
        `End offset (${request.endInclusive}) is after ledger end (${ledgerEnd})`,
      );
    }
  }
}

function updateFrame(transaction: JsonObject): string {
  return JSON.stringify({ update: { Transaction: { value: transaction } } });
}

const OFFSET_MARK = '"__sandbox_offset__"';
const HEX_MARK = '__sandbox_hex__';

/**
 * Frames of synthetic transactions, built by substituting into one serialized template so that the
 * sandbox is not the bottleneck of a stream benchmark. Offsets keep every digit, even beyond 2^53.
 */
function syntheticFrames(now: string): (offset: bigint) => string {
  const alice = SANDBOX_SEED.parties.alice;
  const offset = OFFSET_MARK.slice(1, -1);
  const template = updateFrame({
    updateId: `1220${HEX_MARK}`,
    commandId: '',
    workflowId: '',
    effectiveAt: now,
    offset,
    synchronizerId: SANDBOX_SEED.synchronizers.global.synchronizerId,
    traceContext: null,
    recordTime: now,
    externalTransactionHash: null,
    paidTrafficCost: 0,
    events: [
      {
        CreatedEvent: {
          offset,
          nodeId: 0,
          contractId: `00${HEX_MARK}ca111220${HEX_MARK}`,
          templateId: SANDBOX_SEED.templates.iou,
          contractKey: null,
          createArgument: { issuer: alice, owner: alice, currency: 'USD', amount: '1.0000000000', observers: [] },
          createdEventBlob: '',
          interfaceViews: [],
          witnessParties: [alice],
          signatories: [alice],
          observers: [],
          createdAt: now,
          packageName: SANDBOX_SEED.packages.iouV1.packageName,
          representativePackageId: SANDBOX_SEED.packages.iouV1.packageId,
          acsDelta: true,
        },
      },
    ],
  });
  return (at) =>
    template.replaceAll(OFFSET_MARK, at.toString()).replaceAll(HEX_MARK, at.toString(16).padStart(64, '0'));
}

function sendAndWait(socket: WebSocket, frame: string): Promise<void> {
  return new Promise((resolve, reject) => socket.send(frame, (error) => (error ? reject(error) : resolve())));
}

async function streamSynthetic(socket: WebSocket, request: UpdateStreamRequest, count: number): Promise<void> {
  const frameAt = syntheticFrames(new Date().toISOString());
  for (let index = 1; index <= count && socket.readyState === socket.OPEN; index++) {
    const frame = frameAt(request.beginExclusive + BigInt(index));
    // Wait for the socket every batch so a slow reader bounds the sandbox's memory.
    if (index % SYNTHETIC_BATCH === 0 || index === count) await sendAndWait(socket, frame);
    else socket.send(frame);
  }
  if (socket.readyState === socket.OPEN) socket.close(1000);
}

function streamLedger(
  socket: WebSocket,
  state: SandboxState,
  request: UpdateStreamRequest,
  format: TransactionFormat,
): void {
  const end = request.endInclusive;
  const send = (transaction: StoredTransaction): void => {
    const rendered = renderVisible(transaction, format);
    if (rendered !== undefined) socket.send(updateFrame(rendered));
  };
  const last = end === undefined ? state.ledgerEnd : Number(end);
  for (let offset = Number(request.beginExclusive) + 1; offset <= last; offset++) {
    const transaction = state.transactionsByOffset.get(offset);
    if (transaction !== undefined) send(transaction);
  }
  if (end !== undefined) {
    socket.close(1000);
    return;
  }
  state.transactionListeners.add(send);
  socket.once('close', () => state.transactionListeners.delete(send));
}

function rawDataText(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  return Buffer.concat(Array.isArray(data) ? data : [Buffer.from(data)]).toString('utf8');
}

function sendError(socket: WebSocket, error: SandboxError, traceId: string): void {
  socket.send(JSON.stringify(renderSandboxError(error, traceId)));
  socket.close(1000);
}

async function serveUpdates(socket: WebSocket, upgrade: IncomingMessage, state: SandboxState): Promise<void> {
  const traceId = traceIdFromTraceparent(upgrade.headers.traceparent) ?? freshTraceId();
  const url = new URL(upgrade.url ?? '/', 'http://sandbox');
  const frame = await new Promise<string | undefined>((resolve) => {
    socket.once('message', (data: RawData) => resolve(rawDataText(data)));
    socket.once('close', () => resolve(undefined));
  });
  if (frame === undefined) return;
  try {
    const parsed = parseJsonPreservingInt64(frame);
    if (!isJsonObject(parsed)) throw new DecodeFailure("Got value with wrong type, expecting object at ''");
    const request = parseUpdateStreamRequest(bodyObject(parsed), url.searchParams.get(SYNTHETIC_COUNT_PARAMETER));
    if (request.syntheticCount !== undefined) {
      requireNonNegativeBegin(request);
      await streamSynthetic(socket, request, request.syntheticCount);
      return;
    }
    checkOffsets(request, state.ledgerEnd);
    if (request.format === undefined) {
      if (request.endInclusive !== undefined) socket.close(1000);
      return; // Transactions not requested: nothing this sandbox would send.
    }
    streamLedger(socket, state, request, request.format);
  } catch (error) {
    if (error instanceof SandboxError) return sendError(socket, error, traceId);
    if (error instanceof DecodeFailure || error instanceof JsonSyntaxError) {
      return sendError(socket, invalidArgument(error.message, 'json-layer'), traceId);
    }
    socket.terminate();
  }
}

export interface UpdateStreamServer {
  handleUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void;
  close(): Promise<void>;
}

/** The WebSocket side of the sandbox; `onUpgrade` sees every upgrade request's URL and headers first. */
export function createUpdateStreamServer(
  state: SandboxState,
  onUpgrade: (record: UpgradeRecord) => void,
): UpdateStreamServer {
  // Canton always answers daml.ws.auth and does not check what was offered (`Endpoints.scala`).
  const server = new WebSocketServer({ noServer: true, handleProtocols: () => WEBSOCKET_AUTH_PROTOCOL });
  return {
    handleUpgrade(request, socket, head) {
      const received = (request as { originalUrl?: string }).originalUrl ?? request.url ?? '';
      onUpgrade({ url: received, headers: { ...request.headers } });
      const path = new URL(request.url ?? '/', 'http://sandbox').pathname;
      if (!UPDATE_STREAM_PATHS.has(path)) {
        socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
        return;
      }
      server.handleUpgrade(request, socket, head, (webSocket) => {
        void serveUpdates(webSocket, request, state);
      });
    },
    async close() {
      const open = [...server.clients];
      const closed = open.map(
        (client) =>
          new Promise<void>((resolve) => {
            if (client.readyState === client.CLOSED) resolve();
            else client.once('close', () => resolve());
          }),
      );
      for (const client of open) client.close(1001, 'sandbox shutting down');
      const grace = new Promise<void>((resolve) => setTimeout(resolve, CLOSE_GRACE_MS).unref());
      await Promise.race([Promise.all(closed), grace]);
      for (const client of server.clients) client.terminate();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
