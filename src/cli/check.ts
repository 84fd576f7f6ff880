// --check: everything start-up would judge, without starting anything (Envoy's --mode validate,
// `kong check`): the file and the environment, every file the config names (TLS certificates and
// keys, issuers' public keys, ${file:...} secrets), the auth, protection and policy sections.
// Nothing listens and nothing is fetched (a JWKS URL is checked for its form, not fetched).
import { resolveAuthConfig } from '../auth/config.js';
import { isDevelopmentMode } from '../auth/dev-mode.js';
import { effectiveConfigYaml } from '../config/effective.js';
import { ConfigError, loadConfiguration } from '../config/load.js';
import { assertPolicyConfig } from '../policy/authorization.js';
import { resolveProtectionConfig } from '../protection/config.js';

export interface CheckResult {
  /** The effective configuration as YAML, secrets redacted. */
  readonly effective: string;
  /** What the operator should know (development mode, unsafe settings in use). */
  readonly notes: readonly string[];
}

/** Throws one ConfigError naming every problem of every section. */
export function checkConfiguration(file: string | undefined, env: NodeJS.ProcessEnv = process.env): CheckResult {
  const { config, provenance } = loadConfiguration(file, env);
  const problems: string[] = [];
  const notes: string[] = [];
  const judge = (check: () => void) => {
    try {
      check();
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      problems.push(...error.problems);
    }
  };
  if (isDevelopmentMode(config)) {
    notes.push('development mode: upstream.url is "sandbox" and no auth.issuers; the development issuer is used');
  } else {
    judge(() => notes.push(...resolveAuthConfig(config.auth, config.upstream.url).warnings));
  }
  judge(() => resolveProtectionConfig(config.protection));
  judge(() => assertPolicyConfig(config));
  if (problems.length > 0) throw new ConfigError(file ?? 'defaults + environment', problems);
  return { effective: effectiveConfigYaml(config, provenance), notes };
}
