// The process as operators run it, `node --import ./dist/telemetry/register.js dist/main.js` (the
// image) or `node dist/main.js` (the bin), configured only by OTEL_* environment variables, exporting OTLP/HTTP to a receiver on 127.0.0.1.
// Compiled into its own directory so that it never races another test file's build of dist/.
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, startProcess, writeGatewayConfig } from '../helpers/process.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT } from '../helpers/tokens.js';
import { scriptedParticipant } from './canton-answers.js';
import { SpanKind, startOtlpReceiver, type OtlpReceiver } from './otlp-receiver.js';

const OUT_DIR = join(ROOT, 'tmp', `telemetry-dist-${process.pid}`);
const CLIENT_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';

let receiver: OtlpReceiver;
let upstream: RecordingUpstream;
const seen = new Set<string>();

beforeAll(async () => {
  mkdirSync(OUT_DIR, { recursive: true });
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  // Its own build info too: dist/.tsbuildinfo describes dist/ (npm start's incremental build).
  execFileSync(
    process.execPath,
    [
      tsc,
      '-p',
      join(ROOT, 'tsconfig.json'),
      '--outDir',
      OUT_DIR,
      '--tsBuildInfoFile',
      join(OUT_DIR, '.tsbuildinfo'),
      '--sourceMap',
      'false',
    ],
    { cwd: ROOT, stdio: 'pipe' },
  );
  receiver = await startOtlpReceiver();
  upstream = await startRecordingUpstream(scriptedParticipant);
}, 120_000);

afterAll(async () => {
  await receiver?.close();
  await upstream?.close();
  rmSync(OUT_DIR, { recursive: true, force: true });
});

describe('the process, started as the image starts it or with plain node', () => {
  it.each([
    ['node --import ./dist/telemetry/register.js dist/main.js', true],
    ['node dist/main.js (the ledger-gateway bin)', false],
  ])(
    '%s traces with the OTEL_* environment: spans exported over OTLP/HTTP, one traceparent upstream, flushed on SIGTERM',
    async (_form, preloaded) => {
      const issuer = await createTestIssuer();
      const file = writeGatewayConfig(upstream.url, issuer.issuerConfig, TEST_PARTICIPANT);
      const entry = [join(OUT_DIR, 'main.js'), '--config', file];
      const gateway = await startProcess(
        preloaded ? ['--import', join(OUT_DIR, 'telemetry/register.js'), ...entry] : entry,
        {
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
          OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
          OTEL_BSP_SCHEDULE_DELAY: '60000', // nothing leaves before the shutdown flush
          OTEL_SERVICE_NAME: '',
        },
      );
      try {
        const response = await fetch(`${gateway.api}/v2/updates/update-by-offset`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${await issuer.mint()}`,
            'content-type': 'application/json',
            traceparent: `00-${CLIENT_TRACE_ID}-00f067aa0ba902b7-01`,
          },
          body: '{"offset":42,"updateFormat":{}}',
        });
        expect(response.status).toBe(200);
        await response.arrayBuffer();
        expect(response.headers.get('traceresponse')).toMatch(new RegExp(`^00-${CLIENT_TRACE_ID}-[\\da-f]{16}-01$`));
        const sent = upstream.requests
          .at(-1)!
          .rawHeaders.filter((_, i, all) => i % 2 === 1 && all[i - 1]!.toLowerCase() === 'traceparent');
        expect(sent).toHaveLength(1);
        expect(gateway.output.some((line) => line.includes('"tracing":"exporting"'))).toBe(true);
      } finally {
        gateway.child.kill('SIGTERM');
      }
      expect(await gateway.exited).toBe(0);

      const server = receiver.spans.find(
        (span) => span.kind === SpanKind.server && span.traceId === CLIENT_TRACE_ID && !seen.has(span.spanId),
      );
      const client = receiver.spans.find(
        (span) => span.kind === SpanKind.client && span.traceId === CLIENT_TRACE_ID && !seen.has(span.spanId),
      );
      for (const span of receiver.spans) seen.add(span.spanId); // the next form's spans are its own
      expect(server).toMatchObject({ serviceName: 'ledger-gateway', name: 'POST /v2/updates/update-by-offset' });
      expect(client?.parentSpanId).toBe(server?.spanId);
      expect(upstream.requests.at(-1)!.headers.traceparent).toBe(`00-${CLIENT_TRACE_ID}-${client!.spanId}-01`);
    },
    30_000,
  );
});
