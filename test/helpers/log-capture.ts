// The gateway's own logger (telemetry/logging.ts) writing into memory: one entry per JSON line,
// whether the destination got the line alone (pino) or with others of its turn (request lines).
import { expect } from 'vitest';
import type { Logger } from 'pino';
import { createLogger } from '../../src/telemetry/logging.js';

export interface LogCapture {
  /** Every line written so far, without its newline. */
  readonly lines: string[];
  readonly stream: { write(chunk: string): void };
  readonly logger: Logger;
  entries(): Array<Record<string, unknown>>;
  /** The request line of this correlation id, once written (request lines are written when their event-loop turn ends). */
  requestLine(reqId: string | null): Promise<Record<string, unknown>>;
}

export function logCapture(level = 'info'): LogCapture {
  const lines: string[] = [];
  const stream = {
    write(chunk: string) {
      for (const line of chunk.split('\n')) if (line !== '') lines.push(line);
    },
  };
  const entries = () => lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  return {
    lines,
    stream,
    logger: createLogger(level, stream),
    entries,
    async requestLine(reqId) {
      const find = () => entries().find((entry) => entry.msg === 'request' && entry.reqId === reqId);
      await expect.poll(find, { timeout: 2_000, interval: 5 }).toBeDefined();
      return find()!;
    },
  };
}
