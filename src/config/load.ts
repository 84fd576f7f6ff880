// Loading: YAML file + environment overrides, validated once against the schema.
// Bad config stops the process at boot with every bad key path named.
import { readFileSync } from 'node:fs';
import { Ajv, type ErrorObject } from 'ajv';
import { parse as parseYaml } from 'yaml';
import { ConfigSchema, type GatewayConfig } from './schema.js';

export class ConfigError extends Error {
  readonly problems: readonly string[];
  constructor(source: string, problems: readonly string[]) {
    super(`invalid configuration (${source}):\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/** The few keys operators set per pod, by environment variable. */
export const ENVIRONMENT_OVERRIDES: ReadonlyArray<{ variable: string; path: readonly string[]; type: 'string' | 'integer' }> = [
  { variable: 'LEDGER_GATEWAY_UPSTREAM_URL', path: ['upstream', 'url'], type: 'string' },
  { variable: 'LEDGER_GATEWAY_HOST', path: ['server', 'host'], type: 'string' },
  { variable: 'LEDGER_GATEWAY_PORT', path: ['server', 'port'], type: 'integer' },
  { variable: 'LEDGER_GATEWAY_ADMIN_HOST', path: ['admin', 'host'], type: 'string' },
  { variable: 'LEDGER_GATEWAY_ADMIN_PORT', path: ['admin', 'port'], type: 'integer' },
  { variable: 'LEDGER_GATEWAY_LOG_LEVEL', path: ['log', 'level'], type: 'string' },
];

const ajv = new Ajv({ allErrors: true, useDefaults: true, coerceTypes: false, strict: false });
const validateConfig = ajv.compile<GatewayConfig>(ConfigSchema);

function keyPath(error: ErrorObject): string {
  const base = error.instancePath.split('/').filter(Boolean).join('.');
  if (error.keyword === 'additionalProperties') {
    const extra = (error.params as { additionalProperty: string }).additionalProperty;
    return base ? `${base}.${extra}` : extra;
  }
  if (error.keyword === 'required') {
    const missing = (error.params as { missingProperty: string }).missingProperty;
    return base ? `${base}.${missing}` : missing;
  }
  return base || '(root)';
}

function describe(error: ErrorObject): string {
  const path = keyPath(error);
  switch (error.keyword) {
    case 'additionalProperties': return `${path}: unknown key`;
    case 'required': return `${path}: required`;
    case 'enum':
    case 'const': return `${path}: must be one of ${JSON.stringify((error.params as { allowedValues?: unknown[] }).allowedValues ?? (error.params as { allowedValue?: unknown }).allowedValue)}`;
    default: return `${path}: ${error.message ?? 'invalid'}`;
  }
}

function problemsOf(errors: readonly ErrorObject[]): string[] {
  // A union (log.level) reports one error per branch; say it once.
  const seen = new Set<string>();
  const problems: string[] = [];
  for (const error of errors) {
    if (error.keyword === 'const' && errors.some((e) => e.keyword === 'anyOf' && e.instancePath === error.instancePath)) continue;
    const text = error.keyword === 'anyOf' ? `${keyPath(error)}: must be one of the allowed values` : describe(error);
    if (!seen.has(text)) {
      seen.add(text);
      problems.push(text);
    }
  }
  return problems;
}

function applyEnvironment(raw: Record<string, unknown>, env: NodeJS.ProcessEnv, problems: string[]): void {
  for (const { variable, path, type } of ENVIRONMENT_OVERRIDES) {
    const value = env[variable];
    if (value === undefined || value === '') continue;
    let parsed: string | number = value;
    if (type === 'integer') {
      if (!/^\d+$/.test(value)) {
        problems.push(`${variable}: must be an integer (sets ${path.join('.')})`);
        continue;
      }
      parsed = Number(value);
    }
    let node = raw;
    for (const key of path.slice(0, -1)) {
      const child = node[key];
      if (child === undefined || child === null) node[key] = {};
      else if (typeof child !== 'object' || Array.isArray(child)) break;
      node = node[key] as Record<string, unknown>;
    }
    node[path[path.length - 1]!] = parsed;
  }
}

/** Validate an already-parsed config object (file contents + overrides); fills defaults. */
export function validateGatewayConfig(raw: unknown, source = 'config', env: NodeJS.ProcessEnv = {}): GatewayConfig {
  const problems: string[] = [];
  if (raw === null || raw === undefined) raw = {};
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new ConfigError(source, ['(root): must be a mapping of sections']);
  const copy = structuredClone(raw) as Record<string, unknown>;
  applyEnvironment(copy, env, problems);
  if (!validateConfig(copy)) problems.push(...problemsOf(validateConfig.errors ?? []));
  if (problems.length > 0) throw new ConfigError(source, problems);
  return copy as unknown as GatewayConfig;
}

/** Read, parse and validate a YAML config file, with environment overrides. */
export function loadConfig(file: string | undefined, env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  if (file === undefined) return validateGatewayConfig({}, 'defaults + environment', env);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(file, [`cannot read the file: ${(error as Error).message}`]);
  }
  let parsed: unknown;
  try {
    parsed = parseYaml(text, { prettyErrors: true, uniqueKeys: true });
  } catch (error) {
    throw new ConfigError(file, [`not valid YAML: ${(error as Error).message}`]);
  }
  return validateGatewayConfig(parsed, file, env);
}
