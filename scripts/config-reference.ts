// docs/configuration.md's key reference, rendered from the schema's own types, defaults and
// descriptions, so that the documentation cannot drift from what the gateway accepts.
import { ConfigSchema } from '../src/config/schema.js';

export const BEGIN_MARKER =
  '<!-- config:begin (generated from src/config/schema.ts by `npm run docs:config`; do not edit) -->';
export const END_MARKER = '<!-- config:end -->';

/** The part of a TypeBox (JSON Schema) node the reference reads. */
interface SchemaNode {
  type?: string;
  description?: string;
  default?: unknown;
  minimum?: number;
  maximum?: number;
  const?: unknown;
  enum?: unknown[];
  anyOf?: SchemaNode[];
  items?: SchemaNode;
  properties?: Record<string, SchemaNode>;
  additionalProperties?: boolean | SchemaNode;
  patternProperties?: Record<string, SchemaNode>;
  required?: string[];
}

interface Row {
  key: string;
  type: string;
  default: string;
  meaning: string;
}

const code = (text: string): string => `\`${text}\``;

function literalText(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function defaultText(node: SchemaNode, required: boolean): string {
  if (node.default !== undefined) return code(literalText(node.default));
  return required ? 'required' : 'unset';
}

function rangeText(node: SchemaNode): string {
  if (node.minimum === undefined || node.maximum === undefined) return '';
  return ` ${node.minimum.toLocaleString('en')}–${node.maximum.toLocaleString('en')}`;
}

/** The node's type in words; a union of literals is listed. */
function typeText(node: SchemaNode): string {
  if (node.const !== undefined) return code(literalText(node.const));
  if (node.enum) return `one of ${node.enum.map((v) => code(literalText(v))).join(', ')}`;
  if (node.anyOf) {
    if (node.anyOf.every((member) => member.const !== undefined)) {
      return `one of ${node.anyOf.map((member) => code(literalText(member.const))).join(', ')}`;
    }
    return node.anyOf.map(typeText).join(' or ');
  }
  if (node.type === 'array' && node.items) return `list of ${pluralType(node.items)}`;
  if (node.patternProperties) return `map of ${pluralType(Object.values(node.patternProperties)[0]!)}`;
  if (node.type === 'integer') return `integer${rangeText(node)}`;
  return node.type ?? 'any';
}

function pluralType(node: SchemaNode): string {
  if (node.enum || node.anyOf || node.const !== undefined) return `(${typeText(node)})`;
  if (node.type === 'object' || node.type === 'integer') return `${node.type}s`;
  if (node.type === 'array' && node.items) return `lists of ${pluralType(node.items)}`;
  return `${typeText(node)}s`;
}

/** The object a node describes: itself, or the object member of a union (a string or an object); else undefined. */
function objectOf(node: SchemaNode): SchemaNode | undefined {
  return node.properties ? node : node.anyOf?.find((member) => member.properties);
}

/**
 * One row per key, depth first; objects with properties of their own are opened up, except open
 * documents (an inline JWKS) and a map value whose keys are listed already (`seen`, by shape).
 */
function rowsOf(node: SchemaNode, path: string, required: boolean, rows: Row[], seen: Map<string, string>): void {
  const object = objectOf(node) ?? node;
  const shape = object.properties ? JSON.stringify(object.properties) : undefined;
  const sameAs = shape === undefined ? undefined : seen.get(shape);
  const meaning = sameAs && !node.description ? `The keys of ${code(sameAs)}.` : (node.description ?? '');
  rows.push({ key: path, type: typeText(node), default: defaultText(node, required), meaning });
  if (shape !== undefined && sameAs === undefined) seen.set(shape, path);
  if (object.properties && object.additionalProperties !== true && sameAs === undefined) {
    for (const [name, child] of Object.entries(object.properties)) {
      rowsOf(child, `${path}.${name}`, object.required?.includes(name) ?? false, rows, seen);
    }
  }
  // A list of objects, or of entries that may be one (a URL or { url, name }), gets a row per field;
  // an entry that may be something else gets a row of its own saying so.
  const entry = node.items;
  if (entry && objectOf(entry)) {
    const otherwise = entry.anyOf ? `Each entry is ${typeText(entry)}; an object's keys follow.` : undefined;
    rowsOf({ ...entry, description: entry.description ?? otherwise }, `${path}[]`, false, rows, seen);
  }
  const value = node.patternProperties ? Object.values(node.patternProperties)[0] : undefined;
  if (value?.properties || value?.items?.properties) {
    rowsOf({ ...value, description: undefined }, `${path}.<operation>`, false, rows, seen);
  }
}

function cell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

/** The generated reference: one heading and one table per top-level section. */
export function renderConfigReference(schema: SchemaNode = ConfigSchema): string {
  const parts: string[] = [];
  for (const [section, node] of Object.entries(schema.properties ?? {})) {
    const rows: Row[] = [];
    const seen = new Map<string, string>();
    for (const [name, child] of Object.entries(node.properties ?? {})) {
      rowsOf(child, `${section}.${name}`, node.required?.includes(name) ?? false, rows, seen);
    }
    const table = rows
      // A list element or a map value that only opens up its fields needs no row of its own.
      .filter((row) => row.meaning !== '' || !/(\[\]|<operation>)$/.test(row.key))
      .map((row) => `| ${code(row.key)} | ${cell(row.type)} | ${cell(row.default)} | ${cell(row.meaning)} |`);
    parts.push(
      `### ${code(section)}\n\n${node.description ?? ''}\n\n| key | type | default | meaning |\n|---|---|---|---|\n${table.join('\n')}\n`,
    );
  }
  return parts.join('\n');
}

/** The document with its generated part replaced; throws when the markers are missing. */
export function withConfigReference(document: string, reference = renderConfigReference()): string {
  const begin = document.indexOf(BEGIN_MARKER);
  const end = document.indexOf(END_MARKER);
  if (begin === -1 || end < begin)
    throw new Error(`docs/configuration.md lacks the ${BEGIN_MARKER} … ${END_MARKER} markers`);
  return `${document.slice(0, begin + BEGIN_MARKER.length)}\n\n${reference}\n${document.slice(end)}`;
}
