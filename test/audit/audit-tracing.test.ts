// The audit trail with tracing on (the OpenTelemetry SDK in this test's process, exporting to an
// OTLP receiver on 127.0.0.1): a write's intent and outcome records name the trace of its server
// span, the client's trace when it sent one, so a trace and its audit records find each other.
import { describe, expect, it } from 'vitest';
import { startGateway } from '../helpers/gateway.js';
import { perTest } from '../helpers/per-test.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';
import { tracesExportedForFile } from '../telemetry/otlp-receiver.js';
import { participantAnswers, sendOne } from './load.js';
import { records, trailDirectory } from './support.js';

const CLIENT_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';

const current = perTest();

tracesExportedForFile();

describe('the audit trail with tracing on', () => {
  it("names each write's trace in its intent and its outcome, the client's when it sent one", async () => {
    const directory = trailDirectory();
    const upstream = await startRecordingUpstream(participantAnswers);
    current.upstream = upstream;
    const gw = await startGateway(upstream.url, { audit: { enabled: true, directory } }, { tracingActive: true });
    current.gw = gw;
    const traced = { ...gw.auth(), traceparent: `00-${CLIENT_TRACE_ID}-00f067aa0ba902b7-01` };
    // Turns 0 to 3 of the mix are writes: submit, submit for a transaction, vetting, a party.
    for (let turn = 0; turn < 4; turn++) {
      expect((await sendOne(gw.url, turn % 2 === 0 ? traced : gw.auth(), turn)).status).toBe(200);
    }
    await gw.close();

    const trail = records(directory);
    const intents = trail.filter((record) => record.kind === 'intent');
    expect(intents).toHaveLength(4);
    for (const [turn, intent] of intents.entries()) {
      const outcome = trail.find((record) => record.kind === 'outcome' && record.intentId === intent.id);
      expect(intent.traceId, intent.operation as string).toMatch(/^[\da-f]{32}$/);
      expect(outcome?.traceId, intent.operation as string).toBe(intent.traceId);
      if (turn % 2 === 0) expect(intent.traceId).toBe(CLIENT_TRACE_ID);
      else expect(intent.traceId).not.toBe(CLIENT_TRACE_ID);
    }
  });
});
