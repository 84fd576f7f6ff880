// Reading request bodies the way Canton's JSON API decodes them (Canton `CirceRelaxedCodec.scala`, `V2Routes.scala`):
// protobuf-generated types decode *relaxed* (a missing field is its default), hand-written Js* types
// (JsCommands) are strict, and any type mismatch is a tapir decode failure: 400 text/plain
// "Invalid value for: body (...)".

import { isJsonObject, type Json, type JsonObject } from './json.js';

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** A body that tapir/circe would refuse to decode; rendered as 400 text/plain. */
export class DecodeFailure extends Error {
  override name = 'DecodeFailure';
  constructor(readonly detail: string) {
    super(`Invalid value for: body (${detail})`);
  }
}

export function fieldPath(parent: string, key: string | number): string {
  if (typeof key === 'number') return `${parent}[${key}]`;
  return parent === '' ? key : `${parent}.${key}`;
}

function wrongType(expected: string, path: string): DecodeFailure {
  return new DecodeFailure(`Got value with wrong type, expecting ${expected} at '${path}'`);
}

/** The body as an object; an absent body decodes as `{}` (every field defaulted). */
export function bodyObject(body: Json | undefined): JsonObject {
  if (body === undefined) return {};
  if (!isJsonObject(body)) throw wrongType('object', '');
  return body;
}

/** Strict decode of a field the Js* mirror type declares without a default. */
export function requiredField(object: JsonObject, key: string, parent: string): Json {
  const value = object[key];
  if (value === undefined) throw new DecodeFailure(`Missing required field at '${fieldPath(parent, key)}'`);
  return value;
}

export function optionalObject(object: JsonObject, key: string, parent: string): JsonObject | undefined {
  const value = object[key];
  if (value === undefined || value === null) return undefined;
  if (!isJsonObject(value)) throw wrongType('object', fieldPath(parent, key));
  return value;
}

export function relaxedString(object: JsonObject, key: string, parent: string): string {
  const value = object[key];
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string') throw wrongType('string', fieldPath(parent, key));
  return value;
}

export function relaxedBoolean(object: JsonObject, key: string, parent: string): boolean {
  const value = object[key];
  if (value === undefined || value === null) return false;
  if (typeof value !== 'boolean') throw wrongType('boolean', fieldPath(parent, key));
  return value;
}

export function relaxedArray(object: JsonObject, key: string, parent: string): Json[] {
  const value = object[key];
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw wrongType('array', fieldPath(parent, key));
  return value;
}

export function relaxedStringArray(object: JsonObject, key: string, parent: string): string[] {
  const path = fieldPath(parent, key);
  return relaxedArray(object, key, parent).map((item, index) => {
    if (typeof item !== 'string') throw wrongType('string', fieldPath(path, index));
    return item;
  });
}

export function relaxedObjectArray(object: JsonObject, key: string, parent: string): JsonObject[] {
  const path = fieldPath(parent, key);
  return relaxedArray(object, key, parent).map((item, index) => {
    if (!isJsonObject(item)) throw wrongType('object', fieldPath(path, index));
    return item;
  });
}

/**
 * An int64 field, exact beyond 2^53. circe's Long decoder also takes a numeric string
 * (not confirmed for Canton; the sandbox accepts it).
 */
export function relaxedInt64(object: JsonObject, key: string, parent: string): bigint {
  const value = object[key];
  if (value === undefined || value === null) return 0n;
  const path = fieldPath(parent, key);
  let parsed: bigint;
  if (typeof value === 'bigint') parsed = value;
  else if (typeof value === 'number' && Number.isInteger(value)) parsed = BigInt(value);
  else if (typeof value === 'string' && /^-?\d+$/.test(value)) parsed = BigInt(value);
  else throw wrongType('int64', path);
  if (parsed < INT64_MIN || parsed > INT64_MAX) throw wrongType('int64', path);
  return parsed;
}

export function relaxedInt32(object: JsonObject, key: string, parent: string): number {
  const value = relaxedInt64(object, key, parent);
  if (value < -(2n ** 31n) || value >= 2n ** 31n) throw wrongType('int32', fieldPath(parent, key));
  return Number(value);
}

export interface OneofValue {
  readonly variant: string;
  readonly payload: JsonObject;
  readonly path: string;
}

/**
 * A protobuf oneof: `{"Variant": {...}}` (Canton's OpenAPI oneof encoding). Missing, `{}` and `{"Empty":{}}` are the
 * unset oneof and return undefined.
 */
export function relaxedOneof(object: JsonObject, key: string, parent: string): OneofValue | undefined {
  const container = optionalObject(object, key, parent);
  if (container === undefined) return undefined;
  const path = fieldPath(parent, key);
  const variants = Object.keys(container);
  if (variants.length === 0) return undefined;
  const variant = variants[0] as string;
  if (variants.length > 1) throw new DecodeFailure(`Expected a single oneof variant at '${path}'`);
  if (variant === 'Empty') return undefined;
  const payload = container[variant];
  if (!isJsonObject(payload)) throw wrongType('object', fieldPath(path, variant));
  return { variant, payload, path: fieldPath(path, variant) };
}
