// fast-check arbitraries built from Canton's own OpenAPI specs (spec/canton/<version>/openapi.yaml), so the
// property tests generate request bodies of the real shapes, every version. Refinements encode what
// the participant additionally requires of a valid request (non-empty lists, positive offsets, ...);
// they are the documented rules, not the schema. int64 values are bigints, written as raw digits.
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { parse } from 'yaml';

export const SPEC_VERSIONS = ['3.4', '3.5.1', '3.5'] as const;
export type SpecVersion = (typeof SPEC_VERSIONS)[number];

type Schema = {
  $ref?: string;
  type?: string;
  format?: string;
  enum?: string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  additionalProperties?: Schema | boolean;
  oneOf?: Schema[];
};

export interface Spec {
  readonly version: SpecVersion;
  readonly paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: Schema }> } }>>;
  readonly schemas: Record<string, Schema>;
}

const specs = new Map<SpecVersion, Spec>();

export function loadSpec(version: SpecVersion): Spec {
  let spec = specs.get(version);
  if (spec === undefined) {
    const document = parse(
      readFileSync(new URL(`../../../spec/canton/${version}/openapi.yaml`, import.meta.url), 'utf8'),
    );
    spec = { version, paths: document.paths, schemas: document.components.schemas };
    specs.set(version, spec);
  }
  return spec;
}

/** The component schema name of an operation's JSON request body. */
export function requestSchemaName(spec: Spec, method: string, path: string): string {
  const schema = spec.paths[path]?.[method]?.requestBody?.content['application/json']?.schema;
  if (schema?.$ref === undefined) throw new Error(`${spec.version}: no JSON request body for ${method} ${path}`);
  return schema.$ref.split('/').pop()!;
}

/** The generated JSON request bodies of one route, as the spec describes them, refined. */
export function requestBodies(
  spec: Spec,
  method: string,
  path: string,
  refinements: Refinements = {},
): fc.Arbitrary<unknown> {
  return schemaArbitrary(spec, requestSchemaName(spec, method, path), refinements);
}

/** The rule suites' shared setup: for every spec version, its spec and one route's generated bodies. */
export function requestBodiesPerVersion(
  method: string,
  path: string,
  refinements: Refinements = {},
): ReadonlyArray<{ readonly version: SpecVersion; readonly spec: Spec; readonly bodies: fc.Arbitrary<unknown> }> {
  return SPEC_VERSIONS.map((version) => {
    const spec = loadSpec(version);
    return { version, spec, bodies: requestBodies(spec, method, path, refinements) };
  });
}

export const INT64_MAX = 2n ** 63n - 1n;
export const INT32_MAX = 2 ** 31 - 1;

/**
 * Refinements by "Schema" or "Schema.property": given the arbitrary the schema alone gives (and a
 * builder for other schemas), return the one to use.
 */
export type Refinements = Record<
  string,
  (
    generic: () => fc.Arbitrary<unknown>,
    build: (schema: Schema) => fc.Arbitrary<unknown>,
    schema: Schema,
  ) => fc.Arbitrary<unknown>
>;

export function schemaArbitrary(spec: Spec, name: string, refinements: Refinements = {}): fc.Arbitrary<unknown> {
  const memo = new Map<string, fc.Arbitrary<unknown>>();

  const build = (schema: Schema, key?: string): fc.Arbitrary<unknown> => {
    if (schema.$ref !== undefined) {
      const ref = schema.$ref.split('/').pop()!;
      let cached = memo.get(ref);
      if (cached === undefined) {
        const target = spec.schemas[ref];
        if (target === undefined) throw new Error(`${spec.version}: unknown schema ${ref}`);
        cached = build(target, ref);
        memo.set(ref, cached);
      }
      return cached;
    }
    const generic = () => buildGeneric(schema, key);
    const refine = key === undefined ? undefined : refinements[key];
    return refine === undefined ? generic() : refine(generic, (inner) => build(inner), schema);
  };

  const buildGeneric = (schema: Schema, key: string | undefined): fc.Arbitrary<unknown> => {
    if (schema.oneOf !== undefined) return fc.oneof(...schema.oneOf.map((variant) => build(variant)));
    if (schema.enum !== undefined) return fc.constantFrom(...schema.enum);
    switch (schema.type) {
      case 'string':
        return fc.string({ maxLength: 8, unit: 'grapheme' });
      case 'boolean':
        return fc.boolean();
      case 'integer':
        return schema.format === 'int64' ? fc.bigInt(-(2n ** 63n), INT64_MAX) : fc.integer();
      case 'number':
        return fc.double({ noNaN: true, noDefaultInfinity: true });
      case 'array':
        return fc.array(build(schema.items!), { maxLength: 3 });
      case undefined:
      case 'object': {
        if (schema.type === undefined && schema.properties === undefined) {
          // `{}` in the spec: any JSON (Daml values, contract keys).
          return fc.jsonValue({ maxDepth: 2 });
        }
        if (schema.properties === undefined) {
          if (typeof schema.additionalProperties === 'object') {
            return fc.dictionary(fc.string({ minLength: 1, maxLength: 6 }), build(schema.additionalProperties), {
              maxKeys: 2,
            });
          }
          return fc.constant({});
        }
        const model: Record<string, fc.Arbitrary<unknown>> = {};
        for (const [property, propertySchema] of Object.entries(schema.properties)) {
          const propertyKey = key === undefined ? undefined : `${key}.${property}`;
          const refine = propertyKey === undefined ? undefined : refinements[propertyKey];
          model[property] =
            refine === undefined
              ? build(propertySchema)
              : refine(
                  () => build(propertySchema),
                  (inner) => build(inner),
                  propertySchema,
                );
        }
        return fc.record(model, { requiredKeys: schema.required ?? [] });
      }
      default:
        throw new Error(`unsupported schema type ${schema.type}`);
    }
  };

  return build({ $ref: `#/components/schemas/${name}` });
}

/** The variants of a oneOf schema other than the excluded ones. */
export function oneOfExcept(
  schema: Schema,
  build: (schema: Schema) => fc.Arbitrary<unknown>,
  excluded: readonly string[],
): fc.Arbitrary<unknown> {
  const variants = schema.oneOf!.filter((variant) => !excluded.includes(Object.keys(variant.properties ?? {})[0]!));
  return fc.oneof(...variants.map((variant) => build(variant)));
}

/** A non-empty array of the schema's items. */
export function nonEmptyArray(
  schema: Schema,
  build: (schema: Schema) => fc.Arbitrary<unknown>,
): fc.Arbitrary<unknown[]> {
  return fc.array(build(schema.items!), { minLength: 1, maxLength: 3 });
}

/** Writes a generated value as JSON text: bigints as raw digits, with the given spacing. */
export function toJsonText(value: unknown, space = ''): string {
  if (typeof value === 'bigint') return value.toString();
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value))
    return `[${space}${value.map((item) => toJsonText(item, space)).join(`,${space}`)}${space}]`;
  const entries = Object.entries(value as Record<string, unknown>).filter(([, item]) => item !== undefined);
  return `{${space}${entries.map(([key, item]) => `${JSON.stringify(key)}${space}:${space}${toJsonText(item, space)}`).join(`,${space}`)}${space}}`;
}

export const spacing = fc.constantFrom('', ' ', '\n', '\t', ' \r\n  ');
