// A Daml value (value.proto, com.daml.ledger.api.v2.Value) to and from the JSON API's encoding of
// Daml values (Daml-LF JSON: int64 and numeric as strings, records by field label, variants as
// {tag, value}, enums as their constructor): the ledger policy reads a prepared transaction's
// arguments as a submission's, and the sandbox encodes and decodes the transactions it prepares.
// The messages are @canton-network/core-ledger-proto's (protobuf-ts: plain objects, a oneof as
// `{ oneofKind, [kind]: value }`); only their types are imported, so this file loads no bindings.
import type { Value } from '@canton-network/core-ledger-proto';

/** A value the JSON form cannot hold (too deep, a time out of range). */
export class DamlValueError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DamlValueError';
  }
}

/** RFC 3339 text of a time in milliseconds; a time outside JavaScript's range is not a Daml time. */
function isoTime(milliseconds: number): string {
  const time = new Date(milliseconds);
  if (Number.isNaN(time.getTime())) throw new DamlValueError('a date or timestamp out of range');
  return time.toISOString();
}

/** The JSON form of a value; deeper than `maxDepth` is refused (a hostile transaction cannot exhaust the stack). */
export function damlValueToJson(value: Value | undefined, maxDepth: number, depth = 0): unknown {
  if (value === undefined) return null;
  if (depth > maxDepth) throw new DamlValueError(`a value is nested deeper than ${maxDepth}`);
  const next = (inner: Value | undefined) => damlValueToJson(inner, maxDepth, depth + 1);
  const sum = value.sum;
  switch (sum.oneofKind) {
    case 'unit':
      return {};
    case 'bool':
      return sum.bool;
    case 'text':
      return sum.text;
    case 'party':
      return sum.party;
    case 'contractId':
      return sum.contractId;
    case 'numeric':
      return sum.numeric;
    case 'int64':
      return sum.int64;
    case 'date':
      return isoTime(sum.date * 86_400_000).slice(0, 10);
    case 'timestamp':
      return isoTime(Number(BigInt(sum.timestamp) / 1000n));
    case 'optional':
      return sum.optional.value === undefined ? null : next(sum.optional.value);
    case 'list':
      return sum.list.elements.map(next);
    case 'textMap':
      return Object.fromEntries(sum.textMap.entries.map((entry) => [entry.key, next(entry.value)]));
    case 'genMap':
      return sum.genMap.entries.map((entry) => [next(entry.key), next(entry.value)]);
    case 'record': {
      const fields = sum.record.fields;
      // Labels are optional on the wire: without them a record reads as the list of its values.
      if (fields.some((field) => field.label === '')) return fields.map((field) => next(field.value));
      return Object.fromEntries(fields.map((field) => [field.label, next(field.value)]));
    }
    case 'variant':
      return { tag: sum.variant.constructor, value: next(sum.variant.value) };
    case 'enum':
      return sum.enum.constructor;
    default:
      return null;
  }
}

/**
 * A value for JSON without its Daml type (the sandbox checks no types): objects as records with
 * labels, arrays as lists, strings as text, numbers as int64, booleans, null as an empty optional.
 * Every field of each message is set, so the bindings' writer takes it as it is.
 */
export function jsonToDamlValue(json: unknown): Value {
  if (typeof json === 'string') return { sum: { oneofKind: 'text', text: json } };
  if (typeof json === 'boolean') return { sum: { oneofKind: 'bool', bool: json } };
  if (typeof json === 'number' || typeof json === 'bigint') return { sum: { oneofKind: 'int64', int64: String(json) } };
  if (Array.isArray(json)) return { sum: { oneofKind: 'list', list: { elements: json.map(jsonToDamlValue) } } };
  if (json !== null && typeof json === 'object') {
    const fields = Object.entries(json).map(([label, value]) => ({ label, value: jsonToDamlValue(value) }));
    return { sum: { oneofKind: 'record', record: { fields } } };
  }
  return { sum: { oneofKind: 'optional', optional: {} } };
}
