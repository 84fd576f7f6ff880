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
