// Rules indexed, not scanned: policies by the subjects they name, and each policy's rules by
// operation and by the template entity they name, so that a call is judged against the few rules
// that can concern it whether the configuration holds 20 rules or 1,000 (docs/performance.md,
// "Ledger policy").
import type { DecisionDocument, PrincipalFacts, TemplateRef } from './document.js';
import type { CompiledPolicy, CompiledRule } from './rules.js';

interface Bucket {
  /** Rules whose templates all name one entity (or more): by entity name. */
  readonly byEntity: Map<string, CompiledRule[]>;
  /** Rules without templates, or with a template pattern of any entity. */
  readonly general: CompiledRule[];
  /**
   * The deny rules of byEntity that a wildcard read touches whatever its commands name (templates
   * without choices or command kinds: decide.ts readTouched). The allow rules of byEntity never cover
   * a wildcard read (only a "*" template does, and such a rule is general).
   */
  readonly wildcardDenies: CompiledRule[];
}

export interface IndexedPolicy {
  readonly policy: CompiledPolicy;
  /** By operation name, "reads", "writes", and "*" (rules naming no operation). */
  readonly buckets: ReadonlyMap<string, Bucket>;
  /** A rule's position in its policy: candidates are judged in the configuration's order. */
  readonly order: ReadonlyMap<CompiledRule, number>;
  /** The entity names some rule of the policy names: only these can add candidates. */
  readonly entities: ReadonlySet<string>;
  /** Candidate lists already found, by what they depend on (candidatesOf, then the entities named). */
  readonly candidates: Map<string, Map<string, readonly CompiledRule[]>[]>;
  /** How many lists the cache holds: at most MAX_CACHED_CANDIDATES. */
  readonly cached: { count: number };
  /** The last list found and what it was found for: a caller's calls mostly repeat one shape. */
  readonly last: LastCandidates;
}

interface LastCandidates {
  operation: string;
  writes: boolean;
  wildcard: boolean;
  key: string;
  candidates: readonly CompiledRule[];
}

/** Calls naming other combinations of a policy's entities find their candidates anew. */
const MAX_CACHED_CANDIDATES = 1_024;

export interface PolicyIndex {
  /** The policies that name this caller, in the configuration's order (a list not to be changed). */
  governing(principal: PrincipalFacts): readonly IndexedPolicy[];
  readonly policies: readonly IndexedPolicy[];
}

function bucketOf(buckets: Map<string, Bucket>, key: string): Bucket {
  let bucket = buckets.get(key);
  if (bucket === undefined) {
    bucket = { byEntity: new Map(), general: [], wildcardDenies: [] };
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
      if (entities === undefined) bucket.general.push(rule);
      else {
        if (rule.effect === 'deny' && rule.choices === undefined && rule.commandKinds === undefined)
          bucket.wildcardDenies.push(rule);
        for (const entity of entities) {
          const list = bucket.byEntity.get(entity) ?? [];
          list.push(rule);
          bucket.byEntity.set(entity, list);
        }
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
    cached: { count: 0 },
    last: { operation: '', writes: false, wildcard: false, key: '', candidates: [] },
  };
}

/** The indexed entity names a call names, gathered without a list while there is only one. */
class EntityNames {
  first = '';
  several: string[] | undefined;
  constructor(private readonly indexed: ReadonlySet<string>) {}
  add(entity: string): void {
    if (!this.indexed.has(entity) || entity === this.first) return;
    if (this.first === '') this.first = entity;
    else if (this.several === undefined) this.several = [this.first, entity];
    else if (!this.several.includes(entity)) this.several.push(entity);
  }
  /** The names sorted and joined: what a policy's candidates depend on besides the operation. */
  key(): string {
    return this.several === undefined ? this.first : this.several.sort().join(',');
  }
  list(): readonly string[] {
    return this.several ?? (this.first === '' ? [] : [this.first]);
  }
}

/** The entity names a document's commands and read filters name that the policy's rules name too. */
function indexedEntitiesOf(indexed: IndexedPolicy, document: DecisionDocument): EntityNames {
  const names = new EntityNames(indexed.entities);
  for (const command of document.commands) if (command.template !== undefined) names.add(command.template.entityName);
  const read = document.read;
  if (read !== undefined) {
    for (const template of read.templates) names.add(template.entityName);
    for (const template of read.interfaces) names.add(template.entityName);
  }
  return names;
}

/**
 * The one indexed entity a call names ('' for none), found without a list; undefined when it names
 * several (indexedEntitiesOf gathers them). A call of one command, the usual one, allocates nothing.
 */
function onlyIndexedEntity(indexed: IndexedPolicy, document: DecisionDocument): string | undefined {
  const names = indexed.entities;
  let found: string | undefined = '';
  for (const command of document.commands) {
    const entity = command.template?.entityName;
    if (entity === undefined || entity === found || !names.has(entity)) continue;
    if (found !== '') return undefined;
    found = entity;
  }
  const read = document.read;
  if (read === undefined) return found;
  found = withOnly(found, read.templates, names);
  return found === undefined ? undefined : withOnly(found, read.interfaces, names);
}

/** `found` and the indexed entities of `templates`, while that is at most one name. */
function withOnly(found: string, templates: readonly TemplateRef[], names: ReadonlySet<string>): string | undefined {
  for (const { entityName } of templates) {
    if (entityName === found || !names.has(entityName)) continue;
    if (found !== '') return undefined;
    found = entityName;
  }
  return found;
}

function findCandidates(
  indexed: IndexedPolicy,
  document: DecisionDocument,
  wildcard: boolean,
  entities: readonly string[],
): CompiledRule[] {
  const found = new Set<CompiledRule>();
  for (const key of [document.operation, document.writes ? 'writes' : 'reads', '*']) {
    const bucket = indexed.buckets.get(key);
    if (bucket === undefined) continue;
    for (const rule of bucket.general) found.add(rule);
    if (wildcard) for (const rule of bucket.wildcardDenies) found.add(rule);
    for (const entity of entities) for (const rule of bucket.byEntity.get(entity) ?? []) found.add(rule);
  }
  if (found.size < 2) return [...found];
  return [...found].sort((a, b) => indexed.order.get(a)! - indexed.order.get(b)!);
}

/**
 * The cache of a policy's candidates for one operation, whether it writes and whether it reads every
 * template (keyed then by the indexed entities named: a bounded set, the configuration's names, never
 * the caller's).
 */
function candidatesOf(indexed: IndexedPolicy, document: DecisionDocument, wildcard: boolean) {
  let byFlags = indexed.candidates.get(document.operation);
  if (byFlags === undefined) {
    if (indexed.cached.count >= MAX_CACHED_CANDIDATES) return undefined;
    byFlags = [new Map(), new Map(), new Map(), new Map()];
    indexed.candidates.set(document.operation, byFlags);
  }
  return byFlags[(document.writes ? 2 : 0) + (wildcard ? 1 : 0)];
}

/** The rules of a policy that can concern this call, in the configuration's order. */
export function candidateRules(indexed: IndexedPolicy, document: DecisionDocument): readonly CompiledRule[] {
  const wildcard = document.read?.wildcard === true;
  const one = onlyIndexedEntity(indexed, document);
  const entities = one === undefined ? indexedEntitiesOf(indexed, document) : undefined;
  const key = entities === undefined ? one! : entities.key();
  const last = indexed.last;
  if (
    last.operation === document.operation &&
    last.writes === document.writes &&
    last.wildcard === wildcard &&
    last.key === key
  )
    return last.candidates;
  const cache = candidatesOf(indexed, document, wildcard);
  let candidates = cache?.get(key);
  if (candidates === undefined) {
    const list = entities === undefined ? (one === '' ? [] : [one!]) : entities.list();
    candidates = findCandidates(indexed, document, wildcard, list);
    if (cache !== undefined && indexed.cached.count < MAX_CACHED_CANDIDATES) {
      cache.set(key, candidates);
      indexed.cached.count++;
    }
  }
  last.operation = document.operation;
  last.writes = document.writes;
  last.wildcard = wildcard;
  last.key = key;
  last.candidates = candidates;
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
  const alone = new Map(indexed.map((entry) => [entry, [entry]]));
  const NONE: IndexedPolicy[] = [];
  // A call asks twice with one principal (whether it is governed, then its decision): the last answer is kept.
  let lastPrincipal: PrincipalFacts | undefined;
  let lastNamed: IndexedPolicy[] = NONE;
  const add = (named: IndexedPolicy[], list: readonly IndexedPolicy[], principal: PrincipalFacts) => {
    for (const entry of list) {
      if (!entry.policy.names(principal)) continue;
      // One policy naming the caller, the usual case: its own list of one, made once.
      named = named === NONE ? alone.get(entry)! : [...named, entry];
    }
    return named;
  };
  return {
    policies: indexed,
    governing(principal) {
      if (lastPrincipal === principal) return lastNamed;
      const named = add(add(NONE, bySubject.get(principal.subject) ?? NONE, principal), others, principal);
      if (named.length > 1) named.sort((a, b) => position.get(a)! - position.get(b)!);
      lastPrincipal = principal;
      lastNamed = named;
      return named;
    },
  };
}
