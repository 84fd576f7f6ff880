// Readiness: what /readyz reports. The admin listener serves it with /livez and /metrics.
export interface ReadinessCheck {
  readonly name: string;
  /** Current state; checks keep their own state fresh (probes, key set fetches). */
  ready(): boolean;
  /** Why it is degraded, shown in /readyz's `details` (a check may be degraded and still ready); undefined when fine. */
  detail?(): string | undefined;
}

/** A check (or the overall state, check `ready`) that turned failing or ok since the last look. */
export interface ReadinessChange {
  readonly check: string;
  readonly state: 'ok' | 'failing';
  /** The failing check's detail, e.g. 'refused' or 'status 503'. */
  readonly cause?: string;
}

export class Readiness {
  private readonly checks: ReadinessCheck[] = [];
  private shuttingDown = false;
  /** The states last returned by changes(); a check not seen yet counts as ok, so a first failure is reported. */
  private readonly seen = new Map<string, 'ok' | 'failing'>();

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

  /** What changed since the previous call: one entry per check that turned ok or failing, then `ready` if it did. */
  changes(): ReadinessChange[] {
    const report = this.report();
    const states: Array<[string, 'ok' | 'failing']> = [
      ...Object.entries(report.checks),
      ['ready', report.ready ? 'ok' : 'failing'],
    ];
    const changed: ReadinessChange[] = [];
    for (const [check, state] of states) {
      if ((this.seen.get(check) ?? 'ok') === state) continue;
      this.seen.set(check, state);
      const cause = state === 'failing' ? report.details?.[check] : undefined;
      changed.push(cause === undefined ? { check, state } : { check, state, cause });
    }
    return changed;
  }
}
