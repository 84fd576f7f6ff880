// The documentation's tables must say what the code does: errors and metrics, environment
// overrides, config sections; and the README's quick start and minimal config must work as written.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { AUTH_FAILURE_REASONS } from '../src/auth/failure.js';
import { resolveAuthConfig } from '../src/auth/config.js';
import { ENVIRONMENT_OVERRIDES, validateGatewayConfig } from '../src/config/load.js';
import { ConfigSchema } from '../src/config/schema.js';
import { Errors } from '../src/errors.js';
import { HTTP_OPERATIONS } from '../src/operations.js';
import { REQUEST_RULES } from '../src/policy/rules/index.js';
import { MetricNames } from '../src/telemetry/metrics.js';
import { startGateway } from './helpers/gateway.js';
import { answerJson, startRecordingUpstream } from './helpers/recording-upstream.js';
import { createTestIssuer, TEST_PARTICIPANT } from './helpers/tokens.js';

const read = (path: string): string => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
const readme = read('README.md');
const errorsAndMetrics = read('docs/errors-and-metrics.md');
const configuration = read('docs/configuration.md');

function tableRows(document: string, marker: string): string[][] {
  const start = document.indexOf(`<!-- ${marker}:begin`);
  const end = document.indexOf(`<!-- ${marker}:end -->`);
  expect(start, `the document has a ${marker} table`).toBeGreaterThan(-1);
  return document
    .slice(start, end)
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) =>
      line
        .split('|')
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );
}

describe('docs/errors-and-metrics.md', () => {
  it('lists every gateway error with its status, category and gRPC code, and no other', () => {
    const rows = tableRows(errorsAndMetrics, 'errors');
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

  it('lists every metric a running gateway exports, with its type and labels, and no other', async () => {
    const rows = tableRows(errorsAndMetrics, 'metrics');
    const documented = new Map(rows.map((cells) => [cells[0]!.replaceAll('`', ''), cells]));
    // A running gateway with every optional part that registers metrics of its own (participant IdPs, the audit trail, consumers).
    const upstream = await startRecordingUpstream(answerJson(200, { identityProviderConfigs: [] }));
    const issuer = await createTestIssuer();
    const gateway = await startGateway(upstream.url, {
      auth: {
        issuers: [issuer.issuerConfig],
        participantId: TEST_PARTICIPANT,
        participantIdentityProviders: { enabled: true },
      },
      audit: { enabled: true, directory: mkdtempSync(join(tmpdir(), 'audit-')) },
      consumers: { list: [{ name: 'payments' }] },
    }).catch(async (error: unknown) => {
      await upstream.close();
      throw error;
    });
    try {
      const exported = new Map(
        (await gateway.registry.getMetricsAsJSON())
          .filter((metric) => metric.name.startsWith('ledger_gateway_'))
          .map((metric) => [metric.name, metric]),
      );
      expect([...documented.keys()].sort()).toEqual([...exported.keys()].sort());
      for (const name of Object.values(MetricNames)) expect(exported.has(name), name).toBe(true);
      for (const [name, metric] of exported) {
        const [, type, labelCell] = documented.get(name)!;
        expect(type, name).toBe(metric.type);
        const labels = labelCell!
          .replaceAll('`', '')
          .split(',')
          .map((l) => l.trim())
          .filter(Boolean);
        const registered = (gateway.registry.getSingleMetric(name) as unknown as { labelNames: string[] }).labelNames;
        expect([...labels].sort(), name).toEqual([...registered].sort());
      }
    } finally {
      await gateway.close();
      await upstream.close();
    }
  });

  it('names every authentication failure reason the metric can carry', () => {
    const row = errorsAndMetrics.split('\n').find((line) => line.startsWith('| `ledger_gateway_auth_failures_total`'))!;
    for (const reason of AUTH_FAILURE_REASONS) expect(row, reason).toContain(`\`${reason}\``);
  });
});

describe('docs/security.md', () => {
  it('lists every route whose body the request rules read, with its operation, counted from the catalogue, and no other', () => {
    const rows = tableRows(read('docs/security.md'), 'read-bodies');
    const documented = rows.map(
      ([route, operation]) => `${route!.replaceAll('`', '')} ${operation!.replaceAll('`', '')}`,
    );
    const readRoutes = HTTP_OPERATIONS.filter((operation) => REQUEST_RULES.has(operation.name)).map(
      (operation) => `${operation.method} ${operation.template} ${operation.name}`,
    );
    expect(documented.sort()).toEqual(readRoutes.sort());
    // The count the prose states is the table's.
    expect(read('docs/security.md')).toContain(`the bodies of ${readRoutes.length} routes, the\nrule-checked routes`);
    expect(readme).toContain(`request rules on ${REQUEST_RULES.size} operations (${readRoutes.length} routes)`);
  });
});

describe('docs/configuration.md', () => {
  it('documents every environment override', () => {
    for (const { variable, path } of ENVIRONMENT_OVERRIDES) {
      expect(configuration).toContain(`| \`${variable}\` | \`${path.join('.')}\` |`);
    }
  });

  it('has a heading for every config section in the key reference', () => {
    for (const section of Object.keys(ConfigSchema.properties)) {
      expect(configuration, section).toMatch(new RegExp(`^### \`${section}\`$`, 'm'));
    }
  });
});

describe('README', () => {
  it('gives the two quick-start commands and a curl line against npm start', () => {
    expect(readme).toContain('npm ci && npm start');
    expect(readme).toContain('npm test');
    expect(readme).toMatch(/^curl -H "Authorization: Bearer \$\(npm run -s token\)" http:\/\/127\.0\.0\.1:8080\/v2\//m);
  });

  it('gives a minimal participant config that passes validation, with a real key set', () => {
    const start = readme.indexOf('## Running against a participant');
    const block = /```yaml\n([\s\S]*?)```/.exec(readme.slice(start));
    expect(block, 'a yaml block under "Running against a participant"').not.toBeNull();
    const config = validateGatewayConfig(parseYaml(block![1]!), 'README');
    expect(config.upstream.url).not.toBe('sandbox');
    const auth = resolveAuthConfig(config.auth, config.upstream.url);
    expect(auth.issuers.map((issuer) => issuer.source.kind)).toEqual(['jwksUrl']);
  });

  it('stays a front door: about 150 lines at most', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(160);
  });
});
