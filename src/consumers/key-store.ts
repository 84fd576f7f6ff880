// What the request path needs of a key store: the keys in force now, kept current in the background.
import type { KeyRing } from './gateway-keys.js';

export interface KeyWatch {
  /** The keys in force now (empty until the store was first read). */
  readonly ring: KeyRing;
  /** Whether the store was read at least once: until then every key is refused as keys_unavailable. */
  readonly loaded: boolean;
  /** Settles once the first read ended, whatever its outcome (tests, start-up). */
  ready(): Promise<void>;
  close(): void;
}

export interface KeyWatchOptions {
  readonly refreshIntervalMs: number;
  readonly log: { info(details: object, message: string): void; warn(details: object, message: string): void };
}
