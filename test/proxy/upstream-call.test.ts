// The upstream call's state machine on its own (src/proxy/upstream-call.ts), driven by real requests
// to a recording upstream: its named transitions, an illegal one refused, failover only before a
// byte was written and only once, and the error-body capture shared by calls and upgrades.
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { validateGatewayConfig } from '../../src/config/load.js';
import { ErrorBodyCapture, IllegalTransition, UpstreamCall } from '../../src/proxy/upstream-call.js';
import { UpstreamReplicas } from '../../src/proxy/upstream-replicas.js';
import { answerJson, startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';

const LEDGER_END = '/v2/state/ledger-end';
const closing: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const item of closing.splice(0).reverse()) await item.close();
});

async function upstreamOf(...args: Parameters<typeof startRecordingUpstream>): Promise<RecordingUpstream> {
  const upstream = await startRecordingUpstream(...args);
  closing.push(upstream);
  return upstream;
}

/** The replicas of `upstream` (a list: they fail over; a string: upstream.url, which never does). */
function replicasOf(upstream: string | string[]): UpstreamReplicas {
  const config = validateGatewayConfig(
    {
      server: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
      upstream: {
        ...(typeof upstream === 'string' ? { url: upstream } : { replicas: upstream }),
        readinessIntervalMs: 60_000,
      },
      log: { level: 'silent' },
    },
    'test',
  );
  const replicas = new UpstreamReplicas(config.upstream, typeof upstream === 'string' ? upstream : '');
  closing.push(replicas);
  return replicas;
}

/** A port nothing listens on: connecting to it is refused. */
async function refusingUrl(): Promise<string> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}

function get(call: UpstreamCall) {
  return call.replica.pool.request({ path: call.replica.basePath + LEDGER_END, method: 'GET' });
}

describe('the upstream call', () => {
  it('walks queued, connecting, writing, waiting, streaming, done, and refuses an illegal transition', async () => {
    const upstream = await upstreamOf(answerJson(200, { offset: 7 }));
    const call = new UpstreamCall(replicasOf(upstream.url), performance.now() + 5_000);
    expect(call.state).toBe('queued');
    // Nothing was sent: an answer cannot stream yet. The refusal leaves the state as it was.
    expect(() => call.to('streaming')).toThrow(IllegalTransition);
    expect(call.state).toBe('queued');

    call.to('connecting');
    const response = await get(call);
    call.to('writing');
    call.to('waiting');
    call.to('streaming');
    expect(await response.body.json()).toEqual({ offset: 7 });
    call.to('done');
    expect(call.ended).toBe(true);
    expect(upstream.requests.map((request) => `${request.method} ${request.url}`)).toEqual([`GET ${LEDGER_END}`]);

    // Ended is ended: a call is never sent again, nor failed after it was answered.
    expect(() => call.to('connecting')).toThrow('an upstream call cannot go from done to connecting');
    expect(() => call.to('failed')).toThrow(IllegalTransition);
    expect(call.state).toBe('done');
  });

  it('moves a call refused before it was written to the next replica that answers, once', async () => {
    const upstream = await upstreamOf(answerJson(200, { offset: 8 }));
    const replicas = replicasOf([await refusingUrl(), upstream.url]);
    const call = new UpstreamCall(replicas, performance.now() + 5_000);
    call.to('connecting');
    const refused = (await get(call).catch((error: unknown) => error)) as { code?: string };
    expect(refused.code).toBe('ECONNREFUSED');

    const waiting = call.failOver(refused.code!);
    expect(waiting).toBeDefined();
    expect(call.state).toBe('queued'); // in no pool while it waits
    expect(call.awaitingReplica).toBe(true);
    void replicas.probeNow(); // the recording upstream answers the probe: it becomes the active replica
    const next = await waiting!;
    expect(next?.url.origin).toBe(upstream.url);
    call.moveTo(next!);
    expect(call.state).toBe('connecting');
    const response = await get(call);
    expect(await response.body.json()).toEqual({ offset: 8 });
    expect(upstream.requests).toHaveLength(1);

    // Sent to a second replica once, never more.
    expect(call.failOver('ECONNREFUSED')).toBeUndefined();
    expect(call.state).toBe('connecting');
  });

  it('never moves a call that may have been written, one that did not fail to connect, or one to upstream.url', async () => {
    const upstream = await upstreamOf();
    const replicas = replicasOf([await refusingUrl(), upstream.url]);

    const written = new UpstreamCall(replicas, performance.now() + 5_000);
    written.to('connecting');
    written.to('writing');
    expect(written.failOver('ECONNRESET')).toBeUndefined();
    expect(written.state).toBe('writing');

    const timedOut = new UpstreamCall(replicas, performance.now() + 5_000);
    timedOut.to('connecting');
    expect(timedOut.failOver('UND_ERR_HEADERS_TIMEOUT')).toBeUndefined();

    const single = new UpstreamCall(replicasOf(await refusingUrl()), performance.now() + 5_000);
    single.to('connecting');
    const refused = (await get(single).catch((error: unknown) => error)) as { code?: string };
    expect(refused.code).toBe('ECONNREFUSED');
    expect(single.failOver(refused.code!)).toBeUndefined();
    expect(single.state).toBe('connecting');
    expect(upstream.requests).toHaveLength(0);
  });

  it('reads the error code from the first bytes of an error answer, however long it is', async () => {
    const long = { code: 'NA', grpcCodeValue: 7, cause: 'x', context: { pad: 'x'.repeat(40_000) } };
    const upstream = await upstreamOf(answerJson(403, long));
    const call = new UpstreamCall(replicasOf(upstream.url), performance.now() + 5_000);
    const response = await get(call);
    const capture = ErrorBodyCapture.of(response.statusCode, response.headers['content-type']);
    expect(capture).toBeDefined();
    let size = 0;
    for await (const chunk of response.body) {
      capture!.keep(chunk as Buffer);
      size += (chunk as Buffer).length;
    }
    expect(size).toBe(JSON.stringify(long).length); // the answer itself is not cut
    expect(capture!.code()).toBe('PERMISSION_DENIED'); // redacted "NA", refined by its gRPC code
    expect(ErrorBodyCapture.of(200, 'application/json')).toBeUndefined();
  });
});
