// Slots held, counted by key (a caller, an operation). A key released to 0 stays until
// IDLE_KEYS_MAX such keys have gathered, then they are swept: deleting and re-adding a key on every
// burst made V8 shrink and regrow the map's table.

/** Keys kept at a count of 0 before they are swept. */
export const IDLE_KEYS_MAX = 1024;

export class SlotCounts {
  private readonly held = new Map<string, number>();
  /** Keys in `held` whose count is 0. */
  private idle = 0;

  count(key: string): number {
    return this.held.get(key) ?? 0;
  }

  take(key: string): void {
    const count = this.held.get(key);
    if (count === 0) this.idle -= 1;
    this.held.set(key, (count ?? 0) + 1);
  }

  give(key: string): void {
    const count = (this.held.get(key) ?? 0) - 1;
    if (count > 0) {
      this.held.set(key, count);
      return;
    }
    this.held.set(key, 0);
    this.idle += 1;
    if (this.idle > IDLE_KEYS_MAX) {
      for (const [idleKey, idleCount] of this.held) if (idleCount === 0) this.held.delete(idleKey);
      this.idle = 0;
    }
  }

  /** Keys with at least one slot held. */
  get heldKeys(): number {
    return this.held.size - this.idle;
  }

  /** Keys in memory: the held ones and up to IDLE_KEYS_MAX released to 0. */
  get keptKeys(): number {
    return this.held.size;
  }

  clear(): void {
    this.held.clear();
    this.idle = 0;
  }
}
