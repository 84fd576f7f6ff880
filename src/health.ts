// Readiness: what /readyz reports. The admin listener serves it with /livez and /metrics.
export interface ReadinessCheck {
  readonly name: string;
  /** Current state; checks keep their own state fresh (probes, key set fetches). */
  ready(): boolean;
}

export class Readiness {
  private readonly checks: ReadinessCheck[] = [];
  private shuttingDown = false;

  add(check: ReadinessCheck): void {
    this.checks.push(check);
  }

  /** From the moment shutdown begins, the answer is 503 for good. */
  beginShutdown(): void {
    this.shuttingDown = true;
  }

  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  report(): { ready: boolean; checks: Record<string, 'ok' | 'failing'> } {
    const checks: Record<string, 'ok' | 'failing'> = { shutdown: this.shuttingDown ? 'failing' : 'ok' };
    let ready = !this.shuttingDown;
    for (const check of this.checks) {
      const ok = check.ready();
      checks[check.name] = ok ? 'ok' : 'failing';
      ready &&= ok;
    }
    return { ready, checks };
  }
}
