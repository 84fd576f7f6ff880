// What the schema cannot say about consumers: names unique (and not the reserved `unmapped`), a
// token entry names a claim, no two consumers claim the same tokens, quotas name known operations,
// the key store has what it needs, budgets compile (budget-config.ts). Resolved once per
// configuration into lookups the hot path reads.
import { ConfigError, type ConsumerConfig, type ConsumersConfig } from '../config/schema.js';
import { certificateNames, type CertificateNames } from '../exchange/client-certificate.js';
import { OPERATION_NAMES } from '../operations.js';
import { budgetProblems, type AmountCompiler } from './budget-config.js';

/** The consumer label (and usage row) of calls no consumer claims: one value, however many callers. */
export const UNMAPPED = 'unmapped';

/** A quota of one consumer and operation; a period left undefined is not counted. */
export interface Quota {
  readonly perDay: number | undefined;
  readonly perMonth: number | undefined;
}

export interface ResolvedConsumer {
  readonly name: string;
  /** The principal's subject for a call by gateway key. */
  readonly userId: string;
  readonly certificate: CertificateNames | undefined;
  readonly upstreamToken: ConsumerConfig['upstreamToken'];
  /** The quota of an operation, or undefined when none applies. */
  quotaOf(operation: string): Quota | undefined;
}

/** The claims a token entry compares, in the order they are keyed. */
const TOKEN_CLAIMS = [
  ['issuer', 'iss'],
  ['azp', 'azp'],
  ['clientId', 'client_id'],
  ['sub', 'sub'],
] as const;

type TokenEntry = NonNullable<ConsumerConfig['match']['tokens']>[number];

/** A token entry's key: the claims it names with their values (the same key, the same tokens claimed). */
export function tokenEntryKey(entry: TokenEntry | Readonly<Record<string, unknown>>, fromClaims = false): string {
  const parts: string[] = [];
  for (const [configKey, claim] of TOKEN_CLAIMS) {
    const value = fromClaims
      ? (entry as Record<string, unknown>)[claim]
      : (entry as Record<string, string | undefined>)[configKey];
    if (value !== undefined) parts.push(`${claim}=${JSON.stringify(value)}`);
  }
  return parts.join('\n');
}

/** The claim names a token entry compares (a lookup tries each combination the configuration uses). */
export function tokenEntryClaims(entry: TokenEntry): string[] {
  return TOKEN_CLAIMS.filter(([configKey]) => entry[configKey] !== undefined).map(([, claim]) => claim);
}

function tokenProblems(list: readonly ConsumerConfig[]): string[] {
  const problems: string[] = [];
  const claimedBy = new Map<string, string>();
  list.forEach((consumer, index) => {
    (consumer.match.tokens ?? []).forEach((entry, entryIndex) => {
      const at = `consumers.list[${index}].match.tokens[${entryIndex}]`;
      const key = tokenEntryKey(entry);
      if (key === '') {
        problems.push(`${at}: name at least one of issuer, azp, clientId and sub`);
        return;
      }
      const other = claimedBy.get(key);
      if (other !== undefined) problems.push(`${at}: claims the same tokens as ${other}`);
      else claimedBy.set(key, at);
    });
    const certificates = consumer.match.certificates;
    if (certificates !== undefined && certificates.subjects === undefined && certificates.dnsNames === undefined)
      problems.push(`consumers.list[${index}].match.certificates: name subjects or dnsNames`);
  });
  return problems;
}

function nameAndQuotaProblems(list: readonly ConsumerConfig[]): string[] {
  const problems: string[] = [];
  const named = new Map<string, number>();
  list.forEach((consumer, index) => {
    const at = `consumers.list[${index}]`;
    const earlier = named.get(consumer.name);
    if (consumer.name === UNMAPPED)
      problems.push(`${at}.name: "${UNMAPPED}" is reserved for the calls no consumer claims`);
    else if (earlier !== undefined)
      problems.push(`${at}.name: "${consumer.name}" is also consumers.list[${earlier}].name`);
    else named.set(consumer.name, index);
    for (const operation of Object.keys(consumer.quotas.operations)) {
      if (!OPERATION_NAMES.includes(operation))
        problems.push(`${at}.quotas.operations.${operation}: unknown operation "${operation}"`);
    }
  });
  return problems;
}

/**
 * Every problem of the section; `redisConfigured`: whether protection.redis names a Redis;
 * `compileAmount`: the ledger policy's compiler of a budget's amount expression.
 */
export function consumersConfigProblems(
  section: ConsumersConfig,
  redisConfigured: boolean,
  compileAmount: AmountCompiler,
): string[] {
  const problems = [
    ...nameAndQuotaProblems(section.list),
    ...tokenProblems(section.list),
    ...budgetProblems(section.list, compileAmount),
  ];
  const { store, file } = section.keys;
  if (store === 'file' && file === undefined) problems.push('consumers.keys.file: required with store: file');
  if (store !== 'file' && file !== undefined) problems.push('consumers.keys.file: only with store: file');
  if (store === 'redis' && !redisConfigured)
    problems.push('consumers.keys.store: redis needs protection.redis (url, sentinel or cluster)');
  return problems;
}

/** Throws one ConfigError naming every problem. */
export function assertConsumersConfig(
  section: ConsumersConfig,
  redisConfigured: boolean,
  compileAmount: AmountCompiler,
): void {
  const problems = consumersConfigProblems(section, redisConfigured, compileAmount);
  if (problems.length > 0) throw new ConfigError('consumers', problems);
}

function quotaLookup(quotas: ConsumerConfig['quotas']): (operation: string) => Quota | undefined {
  const resolve = (own: Partial<Quota> | undefined): Quota | undefined => {
    const perDay = own?.perDay ?? quotas.default.perDay;
    const perMonth = own?.perMonth ?? quotas.default.perMonth;
    return perDay === undefined && perMonth === undefined ? undefined : { perDay, perMonth };
  };
  const fallback = resolve(undefined);
  const byOperation = new Map(Object.entries(quotas.operations).map(([name, own]) => [name, resolve(own)]));
  return (operation) => (byOperation.has(operation) ? byOperation.get(operation) : fallback);
}

export function resolveConsumer(consumer: ConsumerConfig): ResolvedConsumer {
  const certificates = consumer.match.certificates;
  return {
    name: consumer.name,
    userId: consumer.userId ?? consumer.name,
    certificate:
      certificates === undefined ? undefined : certificateNames(certificates.subjects, certificates.dnsNames),
    upstreamToken: consumer.upstreamToken,
    quotaOf: quotaLookup(consumer.quotas),
  };
}
