// A gateway and an upstream that each test of a file starts for itself, closed after each test.
import { afterEach } from 'vitest';
import { startGateway, type RunningGateway } from './gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from './recording-upstream.js';

export interface PerTest {
  gw: RunningGateway | undefined;
  upstream: { close(): Promise<void> } | undefined;
}

/** Registers the afterEach that closes whatever the test put into the returned holder. */
export function perTest(): PerTest {
  const current: PerTest = { gw: undefined, upstream: undefined };
  afterEach(async () => {
    await current.gw?.close();
    await current.upstream?.close();
    current.gw = undefined;
    current.upstream = undefined;
  });
  return current;
}

interface Closable {
  close(): unknown;
}
const closedAlready = new WeakSet<object>();

/**
 * Registers the afterEach that closes, in this order, what each getter holds then (a test's gateway,
 * its upstream, a key set server...); one already closed here is left alone.
 */
export function closeAfterEach(...resources: ReadonlyArray<() => Closable | undefined>): void {
  afterEach(async () => {
    for (const resource of resources) {
      const open = resource();
      if (open === undefined || closedAlready.has(open)) continue;
      closedAlready.add(open);
      await open.close();
    }
  });
}

export interface RecordingGatewayPerTest {
  /** The gateway and the upstream the last `start` of this test started. */
  readonly gw: RunningGateway | undefined;
  readonly upstream: RecordingUpstream | undefined;
  /** Starts a recording upstream and a gateway in front of it with `overrides`. */
  readonly start: (overrides?: Record<string, unknown>) => Promise<RunningGateway>;
}

/** A gateway in front of a recording upstream for each test, both closed after it. */
export function recordingGatewayPerTest(): RecordingGatewayPerTest {
  let gw: RunningGateway | undefined;
  let upstream: RecordingUpstream | undefined;
  closeAfterEach(
    () => gw,
    () => upstream,
  );
  return {
    get gw() {
      return gw;
    },
    get upstream() {
      return upstream;
    },
    start: async (overrides = {}) => {
      upstream = await startRecordingUpstream();
      gw = await startGateway(upstream.url, overrides);
      return gw;
    },
  };
}
