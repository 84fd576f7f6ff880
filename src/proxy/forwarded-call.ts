// One proxied call, from its wait for a connection to the last byte of its answer: an upstream call
// (upstream-call.ts) that is its own undici dispatch handler. The answer's chunks go to the client's
// socket as they arrive, with no Readable stream and pipe between the two (13% less CPU per proxied
// call than pool.request(), measured).
import { performance } from 'node:perf_hooks';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Dispatcher } from 'undici';
import { closingConnection, type GatewayError } from '../errors.js';
import { ErrorCodeLabels } from '../errors.js';
import { combinedVary, gatewayHeaders, writeAnswerHead } from '../exchange/answer.js';
import { answerObserverOf, type AnswerObserver } from '../exchange/answer-observer.js';
import { onResponseClose } from '../exchange/response-close.js';
import { CONNECTION_LOST, queueTimeout, remaining, type CallContext } from './call-context.js';
import { clientResponseHeaders } from './headers.js';
import type { UploadStream } from './upload-body.js';
import { ErrorBodyCapture, UpstreamCall } from './upstream-call.js';
import { upstreamFailure } from './upstream-failure.js';
import type { Replica } from './upstream-replicas.js';
import type { SlotWaiter } from './upstream-slots.js';

/** The reason a call is aborted when its client has left (never seen by anyone). */
const CLIENT_LEFT = Object.assign(new Error('the client left'), { code: 'CLIENT_LEFT' });
/** The reason a call is aborted when its answer cannot be passed on (already refused). */
const ANSWER_REFUSED = Object.assign(new Error('the answer cannot be passed on'), { code: 'BAD_ANSWER' });
/** The reason a call is aborted when its client stopped reading the answer for the call's timeout. */
const CLIENT_STALLED = Object.assign(new Error('the client stopped reading'), { code: 'CLIENT_STALLED' });

function refusedAnswer(message: string, code: string): GatewayError {
  return upstreamFailure(Object.assign(new Error(message), { code }));
}

/**
 * Resolves (with nothing: resolving with the reply, a thenable, costs Fastify another turn) once
 * the answer head is written (the reply is hijacked then) or the client has left; rejects with the
 * gateway's coded error when there is no answer to give. `body` is read whole already; `upload`
 * streams as it arrives. A keep-alive connection the participant closed just as it was reused
 * fails before any answer: a bodiless GET or HEAD is then sent once more on a fresh connection
 * (idempotent, nothing answered); anything else is never sent twice to one replica.
 */
export class ForwardedCall extends UpstreamCall implements Dispatcher.DispatchHandler {
  private readonly res: FastifyReply['raw'];
  private readonly dispatch: Dispatcher.DispatchOptions;
  private readonly started: number;
  private readonly timeout: number;
  private readonly retriesPerReplica: number;
  private retries: number;
  private controller: Dispatcher.DispatchController | undefined;
  private waiter: SlotWaiter | undefined;
  /** The client's side, not the call's: its response closed before the answer was complete. */
  private clientLeft = false;
  private stallTimer: NodeJS.Timeout | undefined;
  private capture: ErrorBodyCapture | undefined;
  /** A stage that reads the answer as it passes (the audit trail, for an audited write). */
  private observer: AnswerObserver | undefined;

  constructor(
    private readonly context: CallContext,
    private readonly request: FastifyRequest,
    private readonly reply: FastifyReply,
    body: Buffer | undefined,
    private readonly upload: UploadStream | undefined,
    private readonly resolve: () => void,
    private readonly reject: (error: GatewayError) => void,
  ) {
    const started = performance.now();
    const timeout = context.timeoutOf(request);
    super(context.replicas, started + timeout);
    this.started = started;
    this.timeout = timeout;
    this.res = reply.raw;
    const raw = request.raw;
    this.dispatch = {
      path: this.replica.basePath + raw.url!,
      method: raw.method as Dispatcher.HttpMethod,
      headers: context.headersFor(request),
      body: body ?? upload ?? null,
      headersTimeout: timeout,
      bodyTimeout: timeout,
    };
    this.retriesPerReplica = this.dispatch.body === null && (raw.method === 'GET' || raw.method === 'HEAD') ? 1 : 0;
    this.retries = this.retriesPerReplica;
  }

  /** Sends the call now, or queues it for a connection slot (at most until its deadline). */
  begin(): void {
    // A client that goes away cancels the upstream call, before or during the answer (a submit
    // still in flight is the participant's to finish; we stop waiting for it).
    onResponseClose(this.res, () => this.clientGone());
    const { slots } = this.context;
    const upload = this.upload;
    if (this.clientLeft) {
      // gone already (during an asynchronous stage): nothing to send or queue
      upload?.destroy();
      this.to('done');
      this.resolve();
      return;
    }
    if (slots.tryTake()) {
      upload?.watchPace(); // from when the participant can read it
      this.send(this.replica);
      return;
    }
    slots.wait(
      (this.waiter = {
        deadline: this.deadline,
        start: () => {
          this.waiter = undefined;
          this.dispatch.headersTimeout = remaining(this.started, this.timeout); // the wait counts against it
          upload?.watchPace();
          this.send(this.replica);
        },
        expire: () => {
          this.waiter = undefined;
          upload?.destroy();
          this.to('failed');
          this.fail(queueTimeout(slots.size, this.timeout));
        },
      }),
    );
    // A streamed body that fails while it waits (over the limit) is answered at once; once the
    // call is in the pool, undici reads its failure and aborts the call.
    upload?.once('error', (error) => {
      if (this.waiter === undefined) return;
      slots.cancel(this.waiter);
      this.waiter = undefined;
      this.to('failed');
      this.fail(upstreamFailure(error));
    });
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.clientLeft) {
      controller.abort(CLIENT_LEFT);
      return;
    }
    this.to('writing');
    answerObserverOf(this.request)?.sent?.();
    // A body read whole goes out with the head, in this same turn (undici's client-h1 writeH1).
    if (this.upload === undefined) this.to('waiting');
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    if (statusCode < 200) return; // informational (103 Early Hints): the final answer follows
    const { request, reply } = this;
    this.context.onUpstreamTiming?.(request, (performance.now() - this.started) / 1000);
    if (statusCode > 599) {
      controller.abort(ANSWER_REFUSED);
      this.fail(refusedAnswer(`upstream answered status ${statusCode}`, 'BAD_STATUS'));
      return;
    }
    try {
      // The participant's headers win over the gateway's own on a clash, but for Vary, which joins both.
      const own = gatewayHeaders(request, reply);
      const ownVary = own.vary;
      const head = clientResponseHeaders(headers, own);
      if (typeof ownVary === 'string' && headers.vary !== undefined) head.vary = combinedVary(headers.vary, ownVary);
      // Answered before the client finished sending its body (a refusal of an upload, say):
      // the rest of it would be read as the connection's next request (RFC 9112 §9.3).
      if (this.upload !== undefined && !request.raw.complete) head.connection = 'close';
      writeAnswerHead(reply, statusCode, head);
    } catch (error) {
      controller.abort(ANSWER_REFUSED);
      const message = `the participant's answer head cannot be sent on: ${(error as Error).message}`;
      this.fail(refusedAnswer(message, 'BAD_HEADERS'));
      return;
    }
    this.to('streaming');
    this.capture = ErrorBodyCapture.of(statusCode, headers['content-type']);
    this.observer = answerObserverOf(request);
    this.observer?.head(statusCode, headers);
    this.resolve();
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.state !== 'streaming') return;
    this.capture?.keep(chunk);
    this.observer?.data(chunk);
    const res = this.res;
    if (res.write(chunk)) return;
    controller.pause();
    res.once('drain', () => this.resume());
    // A client that stops reading would hold the participant's connection (paused) for as long as
    // it liked: after the call's timeout without progress, the answer is ended. (Not while the
    // answer waits behind an earlier one on a pipelined connection: it has no socket yet, and its
    // wait is that answer's, which has its own timer.)
    if (res.socket !== null) this.stallTimer ??= setTimeout(() => this.stalled(), this.timeout);
  }

  onResponseEnd(): void {
    const answered = this.state === 'streaming';
    this.finish(answered ? 'done' : 'failed');
    if (!answered) return;
    if (this.capture !== undefined) this.request.errorCode = this.capture.code();
    this.observer?.end();
    this.res.end();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    if (this.state === 'streaming') {
      // Counted as an answer broken off, not as the client leaving (or stalling: counted when it did).
      const byClient = this.clientLeft || error === CLIENT_STALLED;
      this.finish(byClient ? 'done' : 'failed');
      if (!byClient) this.request.errorCode = ErrorCodeLabels.upstreamAnswerBroken;
      this.res.destroy(); // the answer broke off: the client sees the connection end, not a complete answer
      return;
    }
    const code = (error as { code?: string }).code ?? '';
    const nextReplica = this.clientLeft ? undefined : this.failOver(code);
    if (nextReplica !== undefined) {
      void nextReplica.then((next) => this.sendToNext(next, error));
      return;
    }
    if (!this.clientLeft && error !== ANSWER_REFUSED && this.retries > 0 && CONNECTION_LOST.has(code)) {
      this.retries--;
      this.send(this.replica); // on the same slot
      return;
    }
    if (error === ANSWER_REFUSED) {
      this.finish('failed'); // already answered
    } else if (this.clientLeft) {
      this.finish('done');
      this.resolve(); // nobody to answer
    } else {
      this.finish('failed');
      this.fail(upstreamFailure(error));
    }
  }

  /** Hands the call to `replica`'s pool (on the slot it holds). */
  private send(replica: Replica): void {
    this.to('connecting');
    this.controller = undefined;
    replica.pool.dispatch(this.dispatch, this);
  }

  /** After a failover: sent to the next replica that answered, or failed when none did in time. */
  private sendToNext(next: Replica | undefined, error: Error): void {
    if (this.state !== 'queued') return; // its client left meanwhile
    if (next === undefined) {
      this.finish('failed');
      this.fail(upstreamFailure(error));
      return;
    }
    this.moveTo(next);
    this.retries = this.retriesPerReplica;
    this.dispatch.path = next.basePath + this.request.raw.url!;
    this.dispatch.headersTimeout = remaining(this.started, this.timeout);
    this.send(next);
  }

  private clientGone(): void {
    if (this.stallTimer !== undefined) clearTimeout(this.stallTimer);
    if (this.res.writableFinished) return;
    this.clientLeft = true;
    if (this.awaitingReplica) {
      // between two replicas: in neither pool, nothing to cancel
      this.finish('done');
      this.resolve();
      return;
    }
    if (this.waiter !== undefined) {
      // never handed to the pool: nothing to cancel there
      this.context.slots.cancel(this.waiter);
      this.waiter = undefined;
      this.upload?.destroy();
      this.to('done');
      this.resolve();
      return;
    }
    this.controller?.abort(CLIENT_LEFT);
  }

  private resume(): void {
    if (this.stallTimer !== undefined) {
      clearTimeout(this.stallTimer);
      this.stallTimer = undefined;
    }
    this.controller?.resume();
  }

  private stalled(): void {
    this.stallTimer = undefined;
    this.request.errorCode = ErrorCodeLabels.clientStalled;
    this.controller?.abort(CLIENT_STALLED);
    this.res.destroy();
  }

  private fail(error: GatewayError): void {
    this.reject(this.upload !== undefined && !this.request.raw.complete ? closingConnection(error) : error);
  }

  /** The call has ended in the pool (answered, failed, aborted): its connection goes to the next. */
  private finish(state: 'done' | 'failed'): void {
    if (this.ended) return;
    this.to(state);
    this.upload?.destroy(); // what the participant did not read of it is not sent: the answer closes the connection
    this.context.slots.release();
  }
}
