// --check: everything start-up would judge, without starting anything (Envoy's --mode validate,
// `kong check`): the file and the environment, every file the config names (TLS certificates and
// keys, issuers' public keys, ${file:...} secrets, FILE_CHECKS below), the auth, protection, policy and
// ledgerPolicy sections (its CEL conditions type-checked).
// Nothing listens and nothing is fetched (a JWKS URL is checked for its form, not fetched).
import { readFileSync } from 'node:fs';
import { readSigningKey } from '../audit/chain.js';
import { resolveAuthConfig } from '../auth/config.js';
import { isDevelopmentMode } from '../auth/dev-mode.js';
import { effectiveConfigYaml } from '../config/effective.js';
import { ConfigError, loadConfiguration, type LoadedConfig } from '../config/load.js';
import type { GatewayConfig } from '../config/schema.js';
import { assertLedgerPolicyConfig } from '../ledger-policy/ledger-policy.js';
import { assertPolicyConfig } from '../policy/authorization.js';
import { resolveProtectionConfig } from '../protection/config.js';
import { redisMode } from '../protection/redis-connection.js';
import { assertConsumersConfig } from '../consumers/config.js';
import { compileBudgetAmount } from '../ledger-policy/cel.js';

export interface CheckResult {
  /** The effective configuration as YAML, secrets redacted. */
  readonly effective: string;
  /** What the operator should know (development mode, unsafe settings in use). */
  readonly notes: readonly string[];
}

/**
 * Whether the gateway runs in development mode (the embedded sandbox and the development issuer):
 * decided once, at start, by the upstream that runs and the issuers of the start's file. A reload
 * passes the running answer: it can neither enter nor leave the mode.
 */
export type DevelopmentMode = boolean | ((config: GatewayConfig) => boolean);

/** Why a file holding one secret (a bearer token) cannot serve: unreadable or empty. Its contents are never echoed. */
function secretFileProblem(key: string, file: string | undefined): string | undefined {
  if (file === undefined) return undefined;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    return `${key}: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`;
  }
  return text.trim() === '' ? `${key}: ${file} is empty` : undefined;
}

/**
 * The files the configuration names beyond those the load and the sections' own checks read (the
 * listener's and the upstream's TLS files, issuers' publicKeyFile): files read at each use or only
 * when their room is built, judged here as they will be read, so that --check and the start name a
 * missing one. One line per file; the sections whose types must be sound first.
 */
const FILE_CHECKS: ReadonlyArray<{
  readonly sections: readonly string[];
  readonly problem: (config: GatewayConfig) => string | undefined;
}> = [
  {
    sections: ['auth'],
    problem: ({ auth }) =>
      secretFileProblem('auth.participantIdentityProviders.tokenFile', auth.participantIdentityProviders.tokenFile),
  },
  {
    // Missing, unreadable or not an Ed25519 private key (audit/chain.ts); unset is a note (UNSIGNED_TRAIL_NOTE).
    sections: ['audit'],
    problem: ({ audit }) =>
      audit.enabled && audit.signingKeyFile !== undefined ? readSigningKey(audit.signingKeyFile).problem : undefined,
  },
];

const UNSIGNED_TRAIL_NOTE =
  'audit.signingKeyFile is not set: the trail is hash-chained but not signed, so whoever can write its volume can rewrite it undetected (docs/audit.md)';

/**
 * Loads the configuration and judges every section (the schema and values, then auth, protection
 * and policy, each section whose types are sound), so that one run names every problem, in one
 * spelling. Throws one ConfigError with all of them. Returns the notes of the auth section too.
 */
export function judgeConfiguration(
  file: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
  development: DevelopmentMode = isDevelopmentMode,
): { loaded: LoadedConfig; notes: string[] } {
  let loaded: LoadedConfig | undefined;
  let config: GatewayConfig;
  let sound: (section: string) => boolean = () => true;
  const problems: string[] = [];
  try {
    loaded = loadConfiguration(file, env);
    config = loaded.config;
  } catch (error) {
    if (!(error instanceof ConfigError) || error.partial === undefined) throw error;
    problems.push(...error.problems);
    ({ config, sound } = error.partial);
  }
  const notes: string[] = [];
  const judge = (sections: readonly string[], check: () => void) => {
    if (!sections.every(sound)) return;
    try {
      check();
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      problems.push(...error.problems.filter((problem) => !problems.includes(problem)));
    }
  };
  const inDevelopment = typeof development === 'function' ? development(config) : development;
  if (inDevelopment && config.auth.issuers.length === 0) {
    notes.push('development mode: upstream.url is "sandbox" and no auth.issuers; the development issuer is used');
  } else {
    judge(['auth', 'upstream'], () => notes.push(...resolveAuthConfig(config.auth, config.upstream.url).warnings));
  }
  judge(['protection'], () => resolveProtectionConfig(config.protection));
  judge(['policy', 'cors'], () => assertPolicyConfig(config));
  judge(['ledgerPolicy'], () => assertLedgerPolicyConfig(config.ledgerPolicy));
  judge(['consumers', 'protection'], () =>
    assertConsumersConfig(config.consumers, redisMode(config.protection.redis) !== undefined, compileBudgetAmount),
  );
  for (const { sections, problem } of FILE_CHECKS) {
    judge(sections, () => {
      const found = problem(config);
      if (found !== undefined) throw new ConfigError(file ?? 'defaults + environment', [found]);
    });
  }
  judge(['audit'], () => {
    if (config.audit.enabled && config.audit.signingKeyFile === undefined) notes.push(UNSIGNED_TRAIL_NOTE);
  });
  if (problems.length > 0 || loaded === undefined)
    throw new ConfigError(file ?? 'defaults + environment', problems, { config, sound });
  return { loaded, notes };
}

/** Throws one ConfigError naming every problem of every section. */
export function checkConfiguration(file: string | undefined, env: NodeJS.ProcessEnv = process.env): CheckResult {
  const { loaded, notes } = judgeConfiguration(file, env);
  return { effective: effectiveConfigYaml(loaded.config, loaded.provenance), notes };
}
