// The Helm chart's generated files (deploy/helm/ledger-gateway), from their sources, so that the chart
// cannot drift from the gateway (written by `npm run helm:chart`, scripts/helm-chart.ts):
//  - values.schema.json: the chart's values (helm-values-schema.ts, described by values.yaml's comments)
//    and `config`, the gateway's config schema made fit for Helm's validator, so that `helm install`
//    refuses what `--check` refuses, by key path;
//  - templates/_config-defaults.tpl: the config's defaults, which the templates read under `config`;
//  - files/alerts.yaml, files/ledger-gateway.json: copies of deploy/prometheus and deploy/grafana (Helm
//    reads no file outside its chart, and a packaged chart keeps no symlink);
//  - the values table in deploy/README.md.
// test/deploy/helm-files.test.ts fails when one is stale.
import { readFileSync } from 'node:fs';
import { isMap, isScalar, parseDocument, type YAMLMap } from 'yaml';
import { Type, type TSchema } from '@sinclair/typebox';
import { validateGatewayConfig } from '../src/config/load.js';
import { ConfigSchema } from '../src/config/schema.js';
import { OPERATION_NAMES, UNKNOWN_OPERATION, WRITE_OPERATION_NAMES } from '../src/operations.js';
import { chartValueSchemas } from './helm-values-schema.js';

const ROOT = new URL('../', import.meta.url);
export const CHART = 'deploy/helm/ledger-gateway';
const read = (path: string) => readFileSync(new URL(path, ROOT), 'utf8');

/** A JSON Schema node as TypeBox writes it (plain JSON once stringified). */
interface SchemaNode {
  type?: string;
  description?: string;
  default?: unknown;
  const?: unknown;
  enum?: unknown[];
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  anyOf?: SchemaNode[];
  items?: SchemaNode;
  properties?: Record<string, SchemaNode>;
  patternProperties?: Record<string, SchemaNode>;
  additionalProperties?: boolean | SchemaNode;
  propertyNames?: SchemaNode;
  required?: string[];
  [keyword: string]: unknown;
}

const plain = (schema: TSchema | SchemaNode): SchemaNode => JSON.parse(JSON.stringify(schema)) as SchemaNode;

/**
 * Keys named by operation, which the gateway checks against the route catalogue at start
 * (src/operations.ts); Helm gets the names as an enum. Key paths: `[]` is a list's entry.
 */
const OPERATION_NAME_LISTS = {
  operationName: OPERATION_NAMES,
  writeOperationName: [...WRITE_OPERATION_NAMES],
  publicOperationName: OPERATION_NAMES.filter((name) => name !== UNKNOWN_OPERATION.name),
} as const;
type NameList = { name: keyof typeof OPERATION_NAME_LISTS };
const OPERATION_NAMED_KEYS: Record<string, NameList> = {
  'upstream.operationTimeoutsMs': { name: 'operationName' },
  'audit.policy.levels': { name: 'writeOperationName' },
  'protection.operations': { name: 'operationName' },
  'policy.rules': { name: 'operationName' },
  'policy.sources[].operations[]': { name: 'operationName' },
  'auth.publicOperations[]': { name: 'publicOperationName' },
  'consumers.list[].quotas.operations': { name: 'operationName' },
  'consumers.list[].budgets[].operations[]': { name: 'operationName' },
};

/** A `${file:...}` reference (src/config/file-references.ts), resolved before the gateway judges the value. */
const FILE_REFERENCE = '\\$\\{file:[^}]*\\}';

/** Helm's validator runs patterns with Go's regexp (RE2): no lookaround, no backreference. */
function requireRe2(pattern: string, path: string): void {
  if (/\(\?<?[=!]|\\[1-9]|\\k</.test(pattern))
    throw new Error(
      `config schema: ${path}: pattern ${pattern} needs lookaround or a backreference, which Helm cannot run`,
    );
}

/** A string node whose value may also be a file reference: the file's text is judged at start, not here. */
function acceptingFileReference(node: SchemaNode, path: string): SchemaNode {
  if (node.pattern !== undefined) requireRe2(node.pattern, path);
  if (node.type !== 'string') return node;
  if ((node.minLength ?? 0) > 1 || node.maxLength !== undefined) {
    const { description, default: fallback, ...constraints } = node;
    return {
      ...(description === undefined ? {} : { description }),
      ...(fallback === undefined ? {} : { default: fallback }),
      anyOf: [constraints, { type: 'string', pattern: FILE_REFERENCE }],
    };
  }
  if (node.pattern !== undefined) return { ...node, pattern: `(?:${node.pattern})|${FILE_REFERENCE}` };
  return node;
}

/**
 * A union of literals (`log.level`) as one enum, whose refusal Helm's validator words as "must be one of
 * the following: ..." rather than a failed anyOf naming the first literal only.
 */
function literalUnionsAsEnums(node: SchemaNode): SchemaNode {
  if (node === null || typeof node !== 'object') return node;
  const out: SchemaNode = { ...node };
  for (const keyword of ['properties', 'patternProperties', 'definitions'] as const)
    if (node[keyword] !== undefined)
      out[keyword] = mapValues(node[keyword] as Record<string, SchemaNode>, (child) => literalUnionsAsEnums(child));
  for (const keyword of ['items', 'additionalProperties', 'propertyNames', 'if', 'then', 'else'] as const)
    if (typeof node[keyword] === 'object') out[keyword] = literalUnionsAsEnums(node[keyword] as SchemaNode);
  for (const keyword of ['anyOf', 'allOf'] as const)
    if (Array.isArray(node[keyword])) out[keyword] = (node[keyword] as SchemaNode[]).map(literalUnionsAsEnums);
  const branches = out.anyOf;
  if (branches !== undefined && branches.length > 0 && branches.every((branch) => branch.const !== undefined)) {
    delete out.anyOf;
    const types = [...new Set(branches.map((branch) => branch.type ?? typeof branch.const))];
    if (types.length === 1) out.type = types[0];
    out.enum = branches.map((branch) => branch.const);
  }
  return out;
}

function mapValues<T, U = T>(record: Record<string, T>, map: (value: T, key: string) => U): Record<string, U> {
  return Object.fromEntries(Object.entries(record).map(([key, value]) => [key, map(value, key)]));
}

/**
 * The config schema node at `path` as Helm's validator must read it: ajv fills defaults before it
 * checks `required` and Helm fills none, so a key with a default is not required; operation names
 * are enumerated; `secret` (the gateway's own marker) is dropped.
 */
function forHelm(node: SchemaNode, path: string, used: Set<string>): SchemaNode {
  const { secret: _secret, ...out } = node;
  if (node.properties !== undefined) {
    const properties = node.properties;
    out.properties = mapValues(properties, (child, key) => forHelm(child, path ? `${path}.${key}` : key, used));
    const required = node.required?.filter((key) => properties[key]!.default === undefined) ?? [];
    if (required.length > 0) out.required = required;
    else delete out.required;
  }
  if (node.patternProperties !== undefined)
    out.patternProperties = mapValues(node.patternProperties, (child) => forHelm(child, `${path}.*`, used));
  if (typeof node.additionalProperties === 'object')
    out.additionalProperties = forHelm(node.additionalProperties, `${path}.*`, used);
  if (node.anyOf !== undefined) out.anyOf = node.anyOf.map((branch) => forHelm(branch, path, used));
  if (node.items !== undefined) out.items = forHelm(node.items, `${path}[]`, used);
  const names = OPERATION_NAMED_KEYS[path];
  if (names !== undefined) {
    used.add(path);
    const definition = { $ref: `#/definitions/${names.name}` };
    if (out.type === 'object') out.propertyNames = definition;
    else if (out.type === 'string') Object.assign(out, definition);
  }
  return acceptingFileReference(out, path);
}

/** The config schema for Helm; throws when a key of OPERATION_NAMED_KEYS is no longer in it. */
export function helmConfigSchema(schema: TSchema = ConfigSchema): SchemaNode {
  const used = new Set<string>();
  const converted = forHelm(plain(schema), '', used);
  const missing = Object.keys(OPERATION_NAMED_KEYS).filter((path) => !used.has(path));
  if (missing.length > 0)
    throw new Error(
      `scripts/helm-chart.ts: OPERATION_NAMED_KEYS names keys the config schema lacks: ${missing.join(', ')}`,
    );
  return converted;
}

/** The paragraph of a comment that describes its key: from its last `-- ` line on. */
function describedBy(comment: string | null | undefined): string | undefined {
  if (!comment) return undefined;
  const lines = comment.split('\n').map((line) => line.replace(/^ /, ''));
  const start = lines.findLastIndex((line) => line.startsWith('-- '));
  if (start === -1) return undefined;
  return lines.slice(start).join(' ').replace(/^-- /, '').replace(/\s+/g, ' ').trim();
}

/**
 * Every value of values.yaml the chart names (not the keys inside `config`, resources or labels) with
 * its comment's description. The comment above a map's first key belongs to the map node in the YAML
 * library's tree.
 */
export function valueDescriptions(valuesText: string): Map<string, string | undefined> {
  const descriptions = new Map<string, string | undefined>();
  const walk = (map: YAMLMap, prefix: string) => {
    map.items.forEach((pair, index) => {
      const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
      const path = `${prefix}${key}`;
      const comment =
        (pair.key as { commentBefore?: string }).commentBefore ?? (index === 0 ? map.commentBefore : undefined);
      const description = describedBy(comment);
      descriptions.set(path, description);
      // A value with a description is one value (resources); a section without one is its keys (image).
      if (isMap(pair.value) && description === undefined && !isFreeForm(path)) walk(pair.value, `${path}.`);
    });
  };
  const document = parseDocument(valuesText);
  if (!isMap(document.contents)) throw new Error('values.yaml: not a mapping');
  walk(document.contents, '');
  return descriptions;
}

/** Values whose keys are not the chart's (labels, Kubernetes objects handed on), by the chart schema. */
function isFreeForm(path: string): boolean {
  const node = chartNodeAt(path);
  return node === undefined || node.properties === undefined;
}

function chartNodeAt(path: string): SchemaNode | undefined {
  let node: SchemaNode | undefined = { properties: plain(Type.Object(chartValueSchemas(Type.Object({})))).properties };
  for (const key of path.split('.')) node = node?.properties?.[key];
  return node;
}

/** values.schema.json: the chart's values described by values.yaml, `config` by the config schema. */
export function valuesSchema(valuesText = read(`${CHART}/values.yaml`)): SchemaNode {
  const descriptions = valueDescriptions(valuesText);
  const root = plain(Type.Object(chartValueSchemas(Type.Unsafe(helmConfigSchema())), { additionalProperties: false }));
  const describe = (node: SchemaNode, prefix: string) => {
    for (const [key, child] of Object.entries(node.properties ?? {})) {
      const path = `${prefix}${key}`;
      const description = descriptions.get(path);
      if (description !== undefined) child.description = description;
      if (path !== 'config') describe(child, `${path}.`);
    }
  };
  describe(root, '');
  return literalUnionsAsEnums({
    $schema: 'http://json-schema.org/draft-07/schema#',
    title: 'ledger-gateway chart values (generated by npm run helm:chart; do not edit)',
    ...root,
    // The operation names the config's keys take (src/operations.ts).
    definitions: mapValues<readonly string[], SchemaNode>(OPERATION_NAME_LISTS, (names) => ({
      type: 'string',
      enum: [...names],
    })),
  });
}

/** A `code` span. */
const code = (text: string) => `\`${text}\``;

function typeText(node: SchemaNode): string {
  if (node.const !== undefined) return code(JSON.stringify(node.const));
  if (node.enum !== undefined) return `one of ${node.enum.map((value) => code(JSON.stringify(value))).join(', ')}`;
  if (node.anyOf?.every((branch) => branch.const !== undefined))
    return `one of ${node.anyOf.map((branch) => code(JSON.stringify(branch.const))).join(', ')}`;
  if (node.anyOf !== undefined) return node.anyOf.map(typeText).join(' or ');
  if (node.type === 'array') return 'list';
  if (node.type === 'object') return node.patternProperties === undefined ? 'object' : 'map of strings';
  return node.type ?? 'any';
}

/** One row per value of values.yaml the chart names: key, type, default, meaning. */
export function renderValuesTable(valuesText = read(`${CHART}/values.yaml`)): string {
  const schema = valuesSchema(valuesText);
  const values = parseDocument(valuesText).toJS() as Record<string, unknown>;
  const rows: string[] = [];
  const walk = (node: SchemaNode, value: unknown, prefix: string) => {
    for (const [key, child] of Object.entries(node.properties ?? {})) {
      if (key === 'global') continue;
      const path = `${prefix}${key}`;
      const own = (value as Record<string, unknown> | undefined)?.[key];
      // A section without a description of its own (image, redis) is its keys; one with a description is one value.
      if (child.properties !== undefined && child.description === undefined) {
        walk(child, own, `${path}.`);
        continue;
      }
      const shown = path === 'config' ? "the ingress overlay's config (values.yaml)" : code(JSON.stringify(own));
      const meaning = (child.description ?? '').replaceAll('|', '\\|');
      rows.push(`| ${code(path)} | ${typeText(child)} | ${shown} | ${meaning} |`);
    }
  };
  walk(schema, values, '');
  return `| value | type | default | meaning |\n|---|---|---|---|\n${rows.join('\n')}\n`;
}

export const TABLE_BEGIN =
  '<!-- helm-values:begin (generated from deploy/helm/ledger-gateway/values.yaml by `npm run helm:chart`; do not edit) -->';
export const TABLE_END = '<!-- helm-values:end -->';

/** deploy/README.md with its values table replaced; throws when the markers are missing. */
export function withValuesTable(readme: string, table = renderValuesTable()): string {
  const begin = readme.indexOf(TABLE_BEGIN);
  const end = readme.indexOf(TABLE_END);
  if (begin === -1 || end < begin) throw new Error(`deploy/README.md lacks the ${TABLE_BEGIN} … ${TABLE_END} markers`);
  return `${readme.slice(0, begin + TABLE_BEGIN.length)}\n\n${table}\n${readme.slice(end)}`;
}

/** The config's defaults as the gateway fills them, for the templates (ports, the body budget, shutdown). */
export function renderConfigDefaults(): string {
  const defaults = JSON.stringify(validateGatewayConfig({}, 'the defaults'));
  return `{{/* GENERATED from src/config/schema.ts by npm run helm:chart (do not edit): the config's defaults, which the templates read under the values' config. */}}
{{- define "ledger-gateway.configDefaults" -}}
${defaults}
{{- end }}
`;
}

/** Every generated file with the text it must hold. */
export function generatedFiles(): Array<{ path: string; text: string }> {
  return [
    { path: `${CHART}/values.schema.json`, text: `${JSON.stringify(valuesSchema(), null, 2)}\n` },
    { path: `${CHART}/templates/_config-defaults.tpl`, text: renderConfigDefaults() },
    { path: `${CHART}/files/alerts.yaml`, text: read('deploy/prometheus/alerts.yaml') },
    { path: `${CHART}/files/ledger-gateway.json`, text: read('deploy/grafana/ledger-gateway.json') },
    { path: 'deploy/README.md', text: withValuesTable(read('deploy/README.md')) },
  ];
}

/** The generated files whose text differs from what they must hold. */
export function staleFiles(): string[] {
  return generatedFiles()
    .filter(({ path, text }) => {
      try {
        return read(path) !== text;
      } catch {
        return true;
      }
    })
    .map(({ path }) => path);
}
