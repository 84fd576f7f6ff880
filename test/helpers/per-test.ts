// A gateway and an upstream that each test of a file starts for itself, closed after each test.
import { afterEach } from 'vitest';
import type { RunningGateway } from './gateway.js';

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
