// Rules indexed, not scanned: policies by the subjects they name, and each policy's rules by
// operation and by the template entity they name, so that a call is judged against the few rules
// that can concern it whether the configuration holds 20 rules or 1,000 (docs/performance.md,
// "Ledger policy").
import type { DecisionDocument, PrincipalFacts } from './document.js';
import type { CompiledPolicy, CompiledRule } from './rules.js';

interface Bucket {
  /** Rules whose templates all name one entity (or more): by entity name. */
  readonly byEntity: Map<string, CompiledRule[]>;
  /** Rules without templates, or with a template pattern of any entity. */
  readonly general: CompiledRule[];
  /** Every rule of the bucket (a wildcard read can concern any of them). */
  readonly all: CompiledRule[];
}

export interface IndexedPolicy {
  readonly policy: CompiledPolicy;
  /** By operation name, "reads", "writes", and "*" (rules naming no operation). */
  readonly buckets: ReadonlyMap<string, Bucket>;
  /** A rule's position in its policy: candidates are judged in the configuration's order. */
  readonly order: ReadonlyMap<CompiledRule, number>;
  /** The entity names some rule of the policy names: only these can add candidates. */
  readonly entities: ReadonlySet<string>;
  /** Candidate lists already found, by what they depend on (candidatesKey): at most MAX_CACHED_CANDIDATES. */
  readonly candidates: Map<string, readonly CompiledRule[]>;
}

/** Calls naming other combinations of a policy's entities find their candidates anew. */
const MAX_CACHED_CANDIDATES = 1_024;

export interface PolicyIndex {
  /** The policies that name this caller, in the configuration's order. */
  governing(principal: PrincipalFacts): IndexedPolicy[];
  readonly policies: readonly IndexedPolicy[];
}

function bucketOf(buckets: Map<string, Bucket>, key: string): Bucket {
  let bucket = buckets.get(key);
  if (bucket === undefined) {
    bucket = { byEntity: new Map(), general: [], all: [] };
    buckets.set(key, bucket);
  }
  return bucket;
}

function indexPolicy(policy: CompiledPolicy): IndexedPolicy {
  const buckets = new Map<string, Bucket>();
  for (const rule of policy.rules) {
    const entities = rule.templates?.every((pattern) => pattern.entityName !== '*')
      ? [...new Set(rule.templates.map((pattern) => pattern.entityName))]
      : undefined;
    for (const key of rule.operations ?? ['*']) {
      const bucket = bucketOf(buckets, key);
      bucket.all.push(rule);
      if (entities === undefined) bucket.general.push(rule);
      else
        for (const entity of entities) {
          const list = bucket.byEntity.get(entity) ?? [];
          list.push(rule);
          bucket.byEntity.set(entity, list);
        }
    }
  }
  const entities = new Set<string>();
  for (const bucket of buckets.values()) for (const entity of bucket.byEntity.keys()) entities.add(entity);
  return {
    policy,
    buckets,
    order: new Map(policy.rules.map((rule, index) => [rule, index])),
    entities,
    candidates: new Map(),
  };
}

/** The entity names a document's commands and read filters name that the policy's rules name too. */
function indexedEntitiesOf(indexed: IndexedPolicy, document: DecisionDocument): string[] {
  const entities: string[] = [];
  const add = (entity: string) => {
    if (indexed.entities.has(entity) && !entities.includes(entity)) entities.push(entity);
  };
  for (const command of document.commands) if (command.template !== undefined) add(command.template.entityName);
  const read = document.read;
  if (read !== undefined) {
    for (const template of read.templates) add(template.entityName);
    for (const template of read.interfaces) add(template.entityName);
  }
  return entities;
}

/**
 * What a policy's candidates depend on: the operation, whether it writes, and a wildcard read or the
 * indexed entities the call names (a bounded set: the configuration's names, never the caller's).
 */
function candidatesKey(document: DecisionDocument, entities: readonly string[] | undefined): string {
  const what = entities === undefined ? '*' : [...entities].sort().join(',');
  return `${document.operation} ${document.writes ? 'writes' : 'reads'} ${what}`;
}

function findCandidates(
  indexed: IndexedPolicy,
  document: DecisionDocument,
  entities: readonly string[] | undefined,
): CompiledRule[] {
  const found = new Set<CompiledRule>();
  for (const key of [document.operation, document.writes ? 'writes' : 'reads', '*']) {
    const bucket = indexed.buckets.get(key);
    if (bucket === undefined) continue;
    if (entities === undefined) {
      for (const rule of bucket.all) found.add(rule);
      continue;
    }
    for (const rule of bucket.general) found.add(rule);
    for (const entity of entities) for (const rule of bucket.byEntity.get(entity) ?? []) found.add(rule);
  }
  if (found.size < 2) return [...found];
  return [...found].sort((a, b) => indexed.order.get(a)! - indexed.order.get(b)!);
}

/** The rules of a policy that can concern this call (every rule, for a wildcard read), in the configuration's order. */
export function candidateRules(indexed: IndexedPolicy, document: DecisionDocument): readonly CompiledRule[] {
  const entities = document.read?.wildcard === true ? undefined : indexedEntitiesOf(indexed, document);
  const key = candidatesKey(document, entities);
  let candidates = indexed.candidates.get(key);
  if (candidates === undefined) {
    candidates = findCandidates(indexed, document, entities);
    if (indexed.candidates.size < MAX_CACHED_CANDIDATES) indexed.candidates.set(key, candidates);
  }
  return candidates;
}

export function indexPolicies(policies: readonly CompiledPolicy[]): PolicyIndex {
  const indexed = policies.map(indexPolicy);
  const bySubject = new Map<string, IndexedPolicy[]>();
  const others: IndexedPolicy[] = [];
  for (const entry of indexed) {
    if (entry.policy.subjects === undefined) others.push(entry);
    else
      for (const subject of entry.policy.subjects) {
        const list = bySubject.get(subject) ?? [];
        list.push(entry);
        bySubject.set(subject, list);
      }
  }
  const position = new Map(indexed.map((entry, index) => [entry, index]));
  return {
    policies: indexed,
    governing(principal) {
      const named = [...(bySubject.get(principal.subject) ?? []), ...others].filter((entry) =>
        entry.policy.names(principal),
      );
      return named.length < 2 ? named : named.sort((a, b) => position.get(a)! - position.get(b)!);
    },
  };
}
