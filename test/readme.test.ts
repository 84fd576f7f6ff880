// The README is the front door: its error and metric tables must say what the code does.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { AUTH_FAILURE_REASONS } from '../src/auth/failure.js';
import { ENVIRONMENT_OVERRIDES } from '../src/config/load.js';
import { ConfigSchema } from '../src/config/schema.js';
import { Errors } from '../src/errors.js';
import { MetricNames } from '../src/telemetry/metrics.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

function tableRows(marker: string): string[][] {
  const start = readme.indexOf(`<!-- ${marker}:begin`);
  const end = readme.indexOf(`<!-- ${marker}:end -->`);
  expect(start, `README has a ${marker} table`).toBeGreaterThan(-1);
  return readme.slice(start, end).split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => line.split('|').slice(1, -1).map((cell) => cell.trim()));
}

describe('README', () => {
  it('lists every gateway error with its status, category and gRPC code, and no other', () => {
    const rows = tableRows('errors');
    const documented = new Map(rows.map((cells) => [cells[0]!.replaceAll('`', ''), cells]));
    expect([...documented.keys()].sort()).toEqual(Object.keys(Errors).sort());
    for (const [code, definition] of Object.entries(Errors)) {
      const [, status, category, grpc] = documented.get(code)!;
      expect(Number(status), code).toBe(definition.status);
      expect(Number(category!.split(' ')[0]), code).toBe(definition.category);
      expect(Number(grpc), code).toBe(definition.grpc);
      if (definition.redacted) expect(category, code).toContain('NA');
    }
  });

  it('lists every metric with its labels, and no other', async () => {
    const rows = tableRows('metrics');
    const documented = new Map(rows.map((cells) => [cells[0]!.replaceAll('`', ''), cells]));
    expect([...documented.keys()].sort()).toEqual(Object.values(MetricNames).sort());
    const { Registry } = await import('prom-client');
    const { createMetrics } = await import('../src/telemetry/metrics.js');
    const registry = new Registry();
    createMetrics(registry);
    for (const name of Object.values(MetricNames)) {
      const metric = registry.getSingleMetric(name) as unknown as { labelNames: string[]; type?: string } | undefined;
      expect(metric, name).toBeDefined();
      const labels = documented.get(name)![2]!.replaceAll('`', '').split(',').map((l) => l.trim()).filter(Boolean);
      expect([...labels].sort(), name).toEqual([...metric!.labelNames].sort());
    }
  });

  it('documents every environment override', () => {
    for (const { variable, path } of ENVIRONMENT_OVERRIDES) {
      expect(readme).toContain(`| \`${variable}\` | \`${path.join('.')}\` |`);
    }
  });

  it('names every authentication failure reason the metric can carry', () => {
    const row = readme.split('\n').find((line) => line.startsWith('| `ledger_gateway_auth_failures_total`'))!;
    for (const reason of AUTH_FAILURE_REASONS) expect(row, reason).toContain(`\`${reason}\``);
  });

  it('has every config section in the configuration table', () => {
    for (const section of Object.keys(ConfigSchema.properties)) {
      expect(readme, section).toMatch(new RegExp(`^\\| \`${section}\` \\|`, 'm'));
    }
  });

  it('gives the two quick-start commands', () => {
    expect(readme).toContain('npm ci && npm start');
    expect(readme).toContain('npm test');
  });
});
