// The first bytes of an audited write's answer, kept while the forwarder passes them on, to read
// what the write became: its updateId, offset and record time (request-fields.ts answerFields).
import type { AnswerObserver } from '../exchange/answer-observer.js';
import { answerFields, answerFieldsFromPrefix, type AnswerFields } from './request-fields.js';

export class AnswerCapture implements AnswerObserver {
  /** The call went on a socket to the participant (it may have received it). */
  wasSent = false;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private truncated = false;
  private json = false;

  constructor(private readonly maxBytes: number) {}

  sent(): void {
    this.wasSent = true;
  }

  head(_status: number, headers: Record<string, string | string[] | undefined>): void {
    const type = headers['content-type'];
    this.json = typeof type === 'string' && type.includes('json');
  }

  data(chunk: Buffer): void {
    if (!this.json) return;
    const room = this.maxBytes - this.size;
    if (room <= 0) {
      this.truncated = true;
      return;
    }
    const kept = chunk.length <= room ? chunk : chunk.subarray(0, room);
    this.chunks.push(kept);
    this.size += kept.length;
    if (chunk.length > room) this.truncated = true;
  }

  end(): void {}

  /** What the answer says, parsed whole when it was kept whole and complete, else read from its first bytes. */
  fields(complete: boolean): AnswerFields {
    if (this.size === 0) return {};
    const text = Buffer.concat(this.chunks, this.size).toString('utf8');
    if (complete && !this.truncated) {
      try {
        return answerFields(JSON.parse(text));
      } catch {
        // not JSON after all: read what can be read
      }
    }
    return answerFieldsFromPrefix(text);
  }
}
