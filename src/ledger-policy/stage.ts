// The ledger policy as a call's own stage (app.ts: after the request rules, before the audit intent):
// for a caller a policy names, the call's decision document is built from its body (read here when no
// stage before read it, within the body budget), an execute call's preparedTransaction decoded in the
// worker pool, and the decision noted on the call (access log, audit record), counted, and enforced
// unless a dry-run policy made it. A caller no policy names costs one index lookup.
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import type { Registry } from 'prom-client';
import type { BodyBudget } from '../body/budget.js';
import { decodeBody } from '../body/charset.js';
import { declaredContentType } from '../body/content-type.js';
import { parseJsonObject } from '../body/json.js';
import { declaresBody, readRequestBody, type BodyReadLimits } from '../body/read.js';
import { parseInTurn } from '../body/parse-turns.js';
import type { LedgerPolicyConfig } from '../config/schema.js';
import { Errors, GatewayError } from '../errors.js';
import { holdBody } from '../exchange/body-hold.js';
import { callerOf, clientAddress } from '../exchange/caller.js';
import { certificateFacts } from '../exchange/client-certificate.js';
import type { CallStage, Exchange, LedgerDecisionNote, Principal, Stage } from '../exchange/exchange.js';
import { judgeFirstMessage } from '../exchange/first-message.js';
import { subprotocolElements, WEBSOCKET_TOKEN_PREFIX } from '../exchange/subprotocols.js';
import { SubmissionOperations } from '../operations.js';
import { createLedgerPolicyMetrics } from '../telemetry/metrics.js';
import { decisionDocument, pathParameters, principalFacts, type CallInput } from './build-document.js';
import type { DecisionDocument, PrincipalFacts } from './document.js';
import { createLedgerPolicy, ledgerPolicyRefusal, type Decision, type LedgerPolicy } from './ledger-policy.js';
import { documentOffThread, type LargeBodyReading } from './large-body-document.js';
import { createPackageNameResolver, vettedPackageLookup, type PackageNameResolver } from './package-names.js';
import {
  createPreparedDecoder,
  PREPARED_WORKER_HEAP_MB,
  PreparedDecoderBusy,
  type PreparedDecoder,
} from './prepared-pool.js';
import { PreparedTransactionError, type PreparedSummary } from './prepared-summary.js';

/** What lives across configurations: the decoder's worker threads and the package names learnt. */
export interface LedgerPolicyRuntime {
  readonly decoder: PreparedDecoder;
  readonly resolver: PackageNameResolver;
  close(): Promise<void>;
}

/**
 * The ledger policy's decoder threads and package names, which live as long as the process (each
 * configuration's rules decide on them: live/generations.ts), and what is done with each decision:
 * counted, and a dry run's refusal written whatever the access log samples (its request line says it too).
 */
export function startLedgerPolicy(
  section: LedgerPolicyConfig,
  participantUrl: string,
  surroundings: { readonly registry: Registry; readonly exemplars: boolean; readonly log: FastifyBaseLogger },
) {
  const runtime = startLedgerPolicyRuntime(section, participantUrl);
  const counted = createLedgerPolicyMetrics(surroundings.registry, surroundings.exemplars);
  return {
    runtime,
    observe(call: Exchange, note: LedgerDecisionNote) {
      counted.decided(call.operation.name, note);
      if (note.decision === 'breakGlass') breakGlassUsed(surroundings.log, call, note);
      else if (note.decision === 'deny' && note.mode === 'dryRun')
        surroundings.log.warn(
          { reqId: call.id, operation: call.operation.name, ...note },
          'ledger policy would deny (dry run)',
        );
    },
  };
}

/**
 * Every use of a break-glass principal, at warn whatever the access log samples: who (subject and
 * issuer, never the token) used which entry for what; the reqId joins the call's access line (its
 * client address). The alert reads the decision metric.
 */
function breakGlassUsed(log: FastifyBaseLogger, call: Exchange, note: LedgerDecisionNote): void {
  const principal = call.principal;
  log.warn(
    {
      reqId: call.id,
      operation: call.operation.name,
      breakGlass: note.policy,
      subject: principal?.subject,
      issuer: principal?.issuer,
    },
    'ledger policy break-glass used',
  );
}

/** The runtime of `section` (its packageNames and preparedTransactions keys need a restart). */
export function startLedgerPolicyRuntime(section: LedgerPolicyConfig, participantUrl: string): LedgerPolicyRuntime {
  const { packageNames, preparedTransactions } = section;
  const decoder = createPreparedDecoder({
    workerThreads: preparedTransactions.workerThreads,
    maxQueue: preparedTransactions.maxQueue,
    timeoutMs: preparedTransactions.timeoutMs,
    heapMb: PREPARED_WORKER_HEAP_MB,
    limits: {
      maxValueDepth: preparedTransactions.maxValueDepth,
      maxRoots: preparedTransactions.maxRoots,
      withArguments: true,
    },
  });
  const resolver = createPackageNameResolver({
    lookup: vettedPackageLookup({ baseUrl: participantUrl, timeoutMs: packageNames.lookupTimeoutMs }),
    cacheEntries: packageNames.cacheEntries,
    unknownRetryMs: packageNames.unknownRetryMs,
  });
  return { decoder, resolver, close: () => decoder.close() };
}

export interface LedgerPolicyStageOptions {
  readonly runtime: LedgerPolicyRuntime;
  /** The process's budget of bodies held in memory, shared with the request rules and the forwarder. */
  readonly bodyBudget: BodyBudget;
  readonly isTrustedProxy: (address: string) => boolean;
  /** Every decision on a call, once made (the decision metric and the dry run's log line: app.ts). */
  readonly observe: (call: Exchange, decision: LedgerDecisionNote) => void;
}

/** How a body is read when no stage before read it: the request rules' bounds (policy section). */
export interface LedgerPolicyBodyReading {
  readonly limits: BodyReadLimits;
  readonly maxDepth: number;
  /** Bodies read off the event loop, past the request rules' threshold, and the tree they may parse to. */
  readonly large: LargeBodyReading;
  /** Whether a consumer's budget reads the call's document (a large body's arguments then come back from the worker). */
  readonly budgetsReadDocuments: boolean;
}

export interface LedgerPolicyStage {
  /** Whether any policy is configured. */
  readonly active: boolean;
  /** The call stage; undefined when no policy is configured, so that a call does not run it at all. */
  readonly decide: CallStage | undefined;
  /** The same, keeping the call's document for documentOf: the stage when budgets read it after the decision. */
  readonly decideForBudgets: CallStage | undefined;
  /**
   * The call's decision document (the one the policy decided on, or built now, reading the body as
   * the policy does): what a consumer's budgets read. A body that cannot be read: GATEWAY_MALFORMED_REQUEST.
   */
  documentOf(call: FastifyRequest): Promise<DecisionDocument>;
  /**
   * A WebSocket stream's (an upgrade's, in the exchange stages): for a caller a policy names, its
   * first message, the request with the filter, is judged before the participant sees it (the
   * tunnel holds it: exchange/first-message.ts); undefined when no policy is configured.
   */
  readonly governStream: Stage | undefined;
}

/** The caller's bearer token for the package-name lookups: its Authorization, else a stream's `jwt.token.` offer. */
function bearerOf(exchange: Exchange): string | undefined {
  const headers = exchange.raw.headers;
  if (headers.authorization !== undefined) return headers.authorization;
  const offered = subprotocolElements(headers['sec-websocket-protocol'] ?? '').find((element) =>
    element.startsWith(WEBSOCKET_TOKEN_PREFIX),
  );
  return offered === undefined ? undefined : `Bearer ${offered.slice(WEBSOCKET_TOKEN_PREFIX.length)}`;
}

const EXECUTES: ReadonlySet<string> = new Set([
  SubmissionOperations.execute,
  SubmissionOperations.executeAndWait,
  SubmissionOperations.executeAndWaitForTransaction,
]);
/** A package archive is not JSON: its document names an upload, never its content. */
const ARCHIVE_UPLOADS: ReadonlySet<string> = new Set(['postV2Dars', 'postV2Packages']);

/** A call whose body cannot be read as JSON is not one the rules can judge: refused (fail closed). */
const unreadableBody = (governing: Decision): Decision => ({
  ...governing,
  effect: 'deny',
  rule: 'unreadable',
  reason: 'the request body is not a JSON object',
});

/** A frozen decision (a rule's own, the same for every call it decides) has its note made once, frozen too. */
const notesOfDecisions = new WeakMap<Decision, LedgerDecisionNote>();

export function decisionNote(decision: Decision): LedgerDecisionNote {
  if (decision.note !== undefined) return decision.note; // a rule's own (rules.ts)
  const made = notesOfDecisions.get(decision);
  if (made !== undefined) return made;
  const note: LedgerDecisionNote = {
    decision: decision.effect === 'deny' || decision.effect === 'breakGlass' ? decision.effect : 'allow',
    policy: decision.policy,
    rule: decision.rule,
    mode: decision.mode,
  };
  if (Object.isFrozen(decision)) notesOfDecisions.set(decision, Object.freeze(note));
  return note;
}

/** The caller's principal facts: the verified token, the client address and certificate. */
function principalOfExchange(call: Exchange, isTrustedProxy: (address: string) => boolean): PrincipalFacts {
  const certificate = certificateFacts(call.raw);
  return principalFacts(call.principal!, {
    clientAddress: clientAddress(
      call.raw.socket.remoteAddress ?? '',
      call.raw.headers['x-forwarded-for'],
      isTrustedProxy,
    ),
    certificateSubject: certificate?.subject,
    certificateDnsNames: certificate?.dnsNames,
    consumer: call.principal!.consumer,
  });
}

/** A connection's last caller: its facts hold for the next call of the same principal and X-Forwarded-For. */
interface ConnectionCaller {
  readonly principal: Principal;
  readonly forwardedFor: string | string[] | undefined;
  readonly facts: PrincipalFacts;
}

/**
 * A caller's principal facts, kept per connection while its calls carry the same verified principal
 * (the token cache hands every call of one token the same one) and the same X-Forwarded-For, else per
 * principal while the client address is the same: its governing policies are then found once
 * (rule-index.ts keeps the last answer), not at every call. A certificate's facts are read anew at
 * each call (its validity is judged at each), so a TLS connection's are never kept.
 */
function createPrincipalFacts(isTrustedProxy: (address: string) => boolean): (call: Exchange) => PrincipalFacts {
  const byConnection = new WeakMap<Socket, ConnectionCaller>();
  const byPrincipal = new WeakMap<Principal, PrincipalFacts>();
  const factsOf = (call: Exchange, principal: Principal): PrincipalFacts => {
    const known = byPrincipal.get(principal);
    if (known !== undefined && certificateFacts(call.raw) === undefined) {
      const address = clientAddress(
        call.raw.socket.remoteAddress ?? '',
        call.raw.headers['x-forwarded-for'],
        isTrustedProxy,
      );
      if (address === known.clientAddress) return known;
    }
    const facts = principalOfExchange(call, isTrustedProxy);
    if (facts.certificateSubject === '' && facts.certificateDnsNames.length === 0) byPrincipal.set(principal, facts);
    return facts;
  };
  return (call) => {
    const principal = call.principal!;
    const socket = call.raw.socket;
    const forwardedFor = call.raw.headers['x-forwarded-for'];
    const last = byConnection.get(socket);
    if (last !== undefined && last.principal === principal && last.forwardedFor === forwardedFor) return last.facts;
    const facts = factsOf(call, principal);
    if ((socket as TLSSocket).encrypted !== true) byConnection.set(socket, { principal, forwardedFor, facts });
    return facts;
  };
}

/** A stream's first message (null: compressed) decided as the body of its HTTP list form. */
async function firstMessageDecision(
  policy: LedgerPolicy,
  maxDepth: number,
  stream: { readonly exchange: Exchange; readonly principal: PrincipalFacts; readonly message: Buffer | null },
): Promise<Decision> {
  const { exchange, principal, message } = stream;
  const input = { operation: exchange.operation.name, writes: false, principal };
  let body: unknown;
  try {
    if (message === null) throw new GatewayError(Errors.GATEWAY_MALFORMED_REQUEST, { cause: 'compressed' });
    body = parseJsonObject(message.toString('utf8'), { maxDepth, exactNumbers: [] }).value;
  } catch (error) {
    if (!(error instanceof GatewayError) || error.definition !== Errors.GATEWAY_MALFORMED_REQUEST) throw error;
    return unreadableBody(await policy.decide(decisionDocument(input)));
  }
  return policy.decide(decisionDocument({ ...input, body }), bearerOf(exchange));
}

/**
 * A call's decision document, built once per call (a promise while its body is read or its prepared
 * transaction decoded): what the policy decides on and the budgets after it read.
 */
function createCallDocuments(
  reading: LedgerPolicyBodyReading,
  options: LedgerPolicyStageOptions,
  readsArguments: boolean,
): (call: FastifyRequest, principal?: PrincipalFacts, keep?: boolean) => DecisionDocument | Promise<DecisionDocument> {
  const { runtime } = options;

  /** The body's bytes, read now when no stage before read them (undefined: none, or an archive). */
  async function bytesOf(call: FastifyRequest): Promise<Buffer | undefined> {
    if (ARCHIVE_UPLOADS.has(call.operation.name) || (call.rawBody === undefined && !declaresBody(call.headers)))
      return undefined;
    // Held until the exchange ends and forwarded as these bytes, as the request rules' are.
    call.rawBody ??= await readRequestBody(
      call.raw,
      reading.limits,
      holdBody(
        options.bodyBudget,
        call,
        options.isTrustedProxy,
        callerOf(call.principal, call.raw, options.isTrustedProxy),
      ),
    );
    return call.rawBody;
  }

  /**
   * The body as JSON (undefined: none, or an archive): the tree the request rules parsed when they
   * kept it (a small body, parsed with the same charset and depth), else `bytes` parsed now.
   */
  async function bodyOf(call: FastifyRequest, bytes: Buffer | undefined): Promise<unknown> {
    const parsed = call.parsedBody;
    if (parsed !== undefined) {
      call.parsedBody = undefined; // taken: the document holds what it needs of it
      return parsed;
    }
    if (bytes === undefined) return undefined;
    // A large body is parsed in a turn of its own (body/parse-turns.ts), as the request rules parse theirs.
    return parseInTurn(callerOf(call.principal, call.raw, options.isTrustedProxy), bytes.length, () => {
      const text = decodeBody(bytes, declaredContentType(call.raw.rawHeaders)?.parameters.charset);
      return parseJsonObject(text, { maxDepth: reading.maxDepth, exactNumbers: [] }).value;
    });
  }

  /** A body past what the event loop parses: its document built in the pool's worker (large-body-document.ts). */
  function largeBodyDocument(
    call: FastifyRequest,
    principal: PrincipalFacts,
    bytes: Buffer,
  ): Promise<DecisionDocument> {
    const caller = callerOf(call.principal, call.raw, options.isTrustedProxy);
    const large = {
      input: callInput(call, principal),
      bytes,
      charset: declaredContentType(call.raw.rawHeaders)?.parameters.charset,
      maxDepth: reading.maxDepth,
      executes: EXECUTES.has(call.operation.name),
      withArguments: readsArguments || reading.budgetsReadDocuments,
      bytesBack: (back: Buffer) => (call.rawBody = back),
    };
    return documentOffThread(
      runtime.decoder,
      reading.large,
      large,
      holdBody(options.bodyBudget, call, options.isTrustedProxy, caller),
    );
  }

  async function preparedOf(body: unknown): Promise<PreparedSummary> {
    const encoded = (body as { preparedTransaction?: unknown } | undefined)?.preparedTransaction;
    try {
      return await runtime.decoder.decode(encoded);
    } catch (error) {
      if (error instanceof PreparedTransactionError)
        throw new GatewayError(Errors.GATEWAY_PREPARED_TRANSACTION_UNREADABLE, { cause: error.message });
      if (error instanceof PreparedDecoderBusy)
        throw new GatewayError(Errors.GATEWAY_LEDGER_POLICY_UNAVAILABLE, {}, { reason: error.message });
      throw error;
    }
  }

  async function buildDocument(call: FastifyRequest, principal: PrincipalFacts): Promise<DecisionDocument> {
    const bytes = call.parsedBody === undefined ? await bytesOf(call) : undefined;
    if (bytes !== undefined && bytes.length > reading.large.inThreadBytes)
      return largeBodyDocument(call, principal, bytes);
    const body = await bodyOf(call, bytes);
    const prepared = EXECUTES.has(call.operation.name) ? await preparedOf(body) : undefined;
    return decisionDocument(callInput(call, principal, body, prepared));
  }

  /**
   * The document of a call whose body the request rules kept parsed (body/parse-turns.ts: a small
   * one), built at once: nothing to wait for but an execute's prepared transaction. Else undefined.
   */
  function keptDocument(call: FastifyRequest, principal: PrincipalFacts): DecisionDocument | undefined {
    const body = call.parsedBody;
    if (body === undefined || EXECUTES.has(call.operation.name)) return undefined;
    call.parsedBody = undefined; // taken: the document holds what it needs of it
    return decisionDocument(callInput(call, principal, body));
  }

  // A call's document is built once: the budgets after the policy read the one it decided on
  // (or its failure: a body that could not be read is not read twice). Without budgets nothing reads
  // it after the decision: it is not kept (`keep` false).
  const documents = new WeakMap<FastifyRequest, DecisionDocument | Promise<DecisionDocument>>();
  function documentOf(
    call: FastifyRequest,
    principal?: PrincipalFacts,
    keep = true,
  ): DecisionDocument | Promise<DecisionDocument> {
    let document = keep ? documents.get(call) : undefined;
    if (document === undefined) {
      const facts = principal ?? principalOfExchange(call, options.isTrustedProxy);
      document = keptDocument(call, facts) ?? buildDocument(call, facts);
      if (keep) documents.set(call, document);
    }
    return document;
  }

  return documentOf;
}

export function createLedgerPolicyStage(
  section: LedgerPolicyConfig,
  reading: LedgerPolicyBodyReading,
  options: LedgerPolicyStageOptions,
): LedgerPolicyStage {
  const { runtime } = options;
  const policy = createLedgerPolicy(section, { resolver: runtime.resolver });

  const documentOf = createCallDocuments(reading, options, policy.readsArguments);

  async function decideUnreadable(call: FastifyRequest, principal: PrincipalFacts): Promise<Decision> {
    return unreadableBody(await policy.decide(decisionDocument(callInput(call, principal))));
  }

  /** The decision; a promise only when the body or a package name has to be waited for. */
  function decideGoverned(
    call: FastifyRequest,
    principal: PrincipalFacts,
    keep: boolean,
  ): Decision | Promise<Decision> {
    const document = documentOf(call, principal, keep);
    if (!(document instanceof Promise)) return policy.decide(document, call.headers.authorization);
    return document.then(
      (built) => policy.decide(built, call.headers.authorization),
      (error: unknown) => {
        if (!(error instanceof GatewayError) || error.definition !== Errors.GATEWAY_MALFORMED_REQUEST) throw error;
        return decideUnreadable(call, principal);
      },
    );
  }

  function enforce(call: Exchange, decision: Decision): void {
    const note = decisionNote(decision);
    call.ledgerDecision = note;
    options.observe(call, note);
    if (decision.effect !== 'deny') return;
    if (decision.mode === 'enforce') throw ledgerPolicyRefusal(decision);
    // A dry run decides and records; the call goes on, its line saying what would have refused it.
    call.refusalReason = `would deny: ledger policy ${decision.policy} rule ${decision.rule}: ${decision.reason}`;
  }

  const principalOf = createPrincipalFacts(options.isTrustedProxy);

  /** The call stage; `keep`: the call's document is kept for documentOf (budgets read it after). */
  const decideStage =
    (keep: boolean): CallStage =>
    (call) => {
      if (call.principal === null) return undefined;
      const principal = principalOf(call);
      if (!policy.governs(principal)) return undefined;
      // A break-glass caller's body is never read: it is allowed whatever it carries.
      const glass = policy.breakGlass(principal);
      if (glass !== undefined) return enforce(call, glass);
      const decided = decideGoverned(call, principal, keep);
      return decided instanceof Promise ? decided.then((decision) => enforce(call, decision)) : enforce(call, decided);
    };

  const callDocument = (call: FastifyRequest) => new Promise<DecisionDocument>((resolve) => resolve(documentOf(call)));
  if (!policy.active)
    return {
      active: false,
      decide: undefined,
      decideForBudgets: undefined,
      documentOf: callDocument,
      governStream: undefined,
    };
  return {
    active: true,
    documentOf: callDocument,
    decide: decideStage(false),
    decideForBudgets: decideStage(true),
    governStream(exchange) {
      if (exchange.principal === null || exchange.kind !== 'upgrade') return undefined;
      const principal = principalOf(exchange);
      if (!policy.governs(principal)) return undefined;
      const glass = policy.breakGlass(principal);
      if (glass !== undefined) return enforce(exchange, glass);
      judgeFirstMessage(exchange.raw, {
        maxBytes: reading.limits.maxBytes,
        hold: holdBody(options.bodyBudget, exchange, options.isTrustedProxy),
        judge: async (message) =>
          enforce(exchange, await firstMessageDecision(policy, reading.maxDepth, { exchange, principal, message })),
      });
    },
  };
}

function callInput(
  call: FastifyRequest,
  principal: PrincipalFacts,
  body?: unknown,
  prepared?: PreparedSummary,
): CallInput {
  const operation = call.operation;
  const input: CallInput = {
    operation: operation.name,
    writes: operation.writes,
    principal,
    body,
    pathParameters: pathParameters(operation.template, call.url),
  };
  return prepared === undefined ? input : { ...input, prepared };
}
