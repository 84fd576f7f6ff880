// One gateway in front of one recording upstream, shared by all the tests of a file: started before
// them, closed after them.
import { afterAll, beforeAll } from 'vitest';
import { startGateway, type RunningGateway } from './gateway.js';
import { startRecordingUpstream, type RecordingUpstream } from './recording-upstream.js';

export interface FileGateway {
  /** Set once the file's tests run (read it inside a test or hook, not at import time). */
  readonly gw: RunningGateway;
  readonly upstream: RecordingUpstream;
}

/** Registers the file's beforeAll/afterAll; `overrides` go to startGateway (config sections). */
export function gatewayForFile(overrides: Parameters<typeof startGateway>[1] = {}): FileGateway {
  const running = {} as { gw: RunningGateway; upstream: RecordingUpstream };
  beforeAll(async () => {
    running.upstream = await startRecordingUpstream();
    running.gw = await startGateway(running.upstream.url, overrides);
  });
  afterAll(async () => {
    await running.gw?.close();
    await running.upstream?.close();
  });
  return running;
}
