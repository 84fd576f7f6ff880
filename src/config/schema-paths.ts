// The config schema, walked by key path: what the environment convention, the "did you mean"
// suggestions and the redaction of secrets need to know about one key.
import { ConfigSchema } from './schema.js';

/** The parts of a JSON Schema (as TypeBox builds it) the walk reads. */
export interface SchemaNode {
  readonly type?: string;
  readonly properties?: Readonly<Record<string, SchemaNode>>;
  readonly patternProperties?: Readonly<Record<string, SchemaNode>>;
  readonly additionalProperties?: boolean | SchemaNode;
  readonly items?: SchemaNode;
  readonly anyOf?: readonly SchemaNode[];
  readonly const?: unknown;
  readonly enum?: readonly unknown[];
  /** Set in schema.ts on keys that hold a secret: never printed (the value may also come from a file). */
  readonly secret?: boolean;
  readonly description?: string;
}

/** A key path: object keys, and array indexes as numbers. */
export type KeyPath = readonly (string | number)[];

export const ROOT_SCHEMA = ConfigSchema as unknown as SchemaNode;

/** `auth.issuers[0].unsafeHmacSecret`: how problems and --check name a key. */
export function pathText(path: KeyPath): string {
  let text = '';
  for (const segment of path)
    text += typeof segment === 'number' ? `[${segment}]` : text === '' ? segment : `.${segment}`;
  return text || '(root)';
}

/** The branch of a union that has keys or items (`rate: { ... } | null`), else the node itself. */
function structured(node: SchemaNode): SchemaNode {
  return (
    node.anyOf?.find(
      (branch) =>
        branch.properties !== undefined || branch.patternProperties !== undefined || branch.items !== undefined,
    ) ?? node
  );
}

/** Whether the node's keys are free (a record by operation name, an inline JWKS) rather than named by the schema. */
export function hasFreeKeys(node: SchemaNode): boolean {
  const object = structured(node);
  return (
    object.patternProperties !== undefined ||
    object.additionalProperties === true ||
    typeof object.additionalProperties === 'object'
  );
}

export function childSchema(node: SchemaNode, segment: string | number): SchemaNode | undefined {
  const object = structured(node);
  if (typeof segment === 'number') return object.items;
  const named = object.properties?.[segment];
  if (named !== undefined) return named;
  const pattern = object.patternProperties === undefined ? undefined : Object.values(object.patternProperties)[0];
  if (pattern !== undefined) return pattern;
  if (typeof object.additionalProperties === 'object') return object.additionalProperties;
  return object.additionalProperties === true ? {} : undefined;
}

/** The schema of the key at `path`, or undefined when the schema has no such key. */
export function schemaAt(path: KeyPath, root: SchemaNode = ROOT_SCHEMA): SchemaNode | undefined {
  let node: SchemaNode | undefined = root;
  for (const segment of path) {
    if (node === undefined) return undefined;
    node = childSchema(node, segment);
  }
  return node;
}

/** The keys the schema names at this node (none for a record or a list). */
export function namedKeys(node: SchemaNode | undefined): string[] {
  return node === undefined ? [] : Object.keys(structured(node).properties ?? {});
}

/** How a key's value is written where only text can be (an environment variable). */
export type ValueKind = 'string' | 'integer' | 'number' | 'boolean' | 'json';

export function valueKind(node: SchemaNode): ValueKind {
  if (node.anyOf !== undefined) return node.anyOf.every((branch) => branch.type === 'string') ? 'string' : 'json';
  switch (node.type) {
    case 'string':
    case 'integer':
    case 'number':
    case 'boolean':
      return node.type;
    default:
      return 'json';
  }
}

/** The values a key allows when it is a choice of constants (log.level), else undefined. */
export function allowedValues(node: SchemaNode | undefined): unknown[] | undefined {
  if (node === undefined) return undefined;
  if (node.enum !== undefined) return [...node.enum];
  if ('const' in node) return [node.const];
  if (node.anyOf !== undefined && node.anyOf.every((branch) => 'const' in branch))
    return node.anyOf.map((branch) => branch.const);
  return undefined;
}

export interface SettableKey {
  readonly path: readonly string[];
  readonly kind: ValueKind;
  readonly secret: boolean;
}

/**
 * Every key an operator sets as one value: the schema's leaves, and lists, records and unions of
 * objects as a whole (their items have no fixed names). Sections and fixed objects are walked into.
 */
export function settableKeys(node: SchemaNode = ROOT_SCHEMA, prefix: readonly string[] = []): SettableKey[] {
  return Object.entries(node.properties ?? {}).flatMap(([key, child]) => {
    const path = [...prefix, key];
    if (child.properties !== undefined && !hasFreeKeys(child)) return settableKeys(child, path);
    const whole = { path, kind: valueKind(child), secret: child.secret === true };
    // An object or null (`rate`): set whole in JSON, or key by key (the environment walks into it too).
    const branch = child.anyOf?.find((candidate) => candidate.properties !== undefined);
    if (branch !== undefined && !hasFreeKeys(branch)) return [whole, ...settableKeys(branch, path)];
    return [whole];
  });
}
