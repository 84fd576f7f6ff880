// Readiness: what /readyz reports. The admin listener serves it with /livez and /metrics.
export interface ReadinessCheck {
  readonly name: string;
  /** Current state; checks keep their own state fresh (probes, key set fetches). */
  ready(): boolean;
  /** Why it is degraded, shown in /readyz's `details` (a check may be degraded and still ready); undefined when fine. */
  detail?(): string | undefined;
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

  report(): { ready: boolean; checks: Record<string, 'ok' | 'failing'>; details?: Record<string, string> } {
    const checks: Record<string, 'ok' | 'failing'> = { shutdown: this.shuttingDown ? 'failing' : 'ok' };
    let ready = !this.shuttingDown;
    for (const check of this.checks) {
      const ok = check.ready();
      checks[check.name] = ok ? 'ok' : 'failing';
      ready &&= ok;
    }
    let details: Record<string, string> | undefined;
    for (const check of this.checks) {
      const detail = check.detail?.();
      if (detail !== undefined) (details ??= {})[check.name] = detail;
    }
    return details === undefined ? { ready, checks } : { ready, checks, details };
  }
}
