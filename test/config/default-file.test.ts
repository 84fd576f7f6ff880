// config/default.yaml documents every key with its default: keep it in step with the schema.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig, validateGatewayConfig } from '../../src/config/load.js';

const file = new URL('../../config/default.yaml', import.meta.url).pathname;

function leafPaths(value: unknown, prefix = ''): string[] {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return [prefix];
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return [prefix];
  return entries.flatMap(([key, child]) => leafPaths(child, prefix ? `${prefix}.${key}` : key));
}

describe('config/default.yaml', () => {
  it('validates', () => {
    expect(() => loadConfig(file, {})).not.toThrow();
  });

  it('states exactly the defaults the schema fills in', () => {
    const fromFile = loadConfig(file, {});
    const fromSchema = validateGatewayConfig({}, 'defaults', {});
    expect(fromFile).toEqual(fromSchema);
  });

  it('names every key the schema defaults, and nothing else', () => {
    const written = leafPaths(parse(readFileSync(file, 'utf8'))).sort();
    const defaults = leafPaths(validateGatewayConfig({}, 'defaults', {})).sort();
    expect(written).toEqual(defaults);
  });
});
