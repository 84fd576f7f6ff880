#!/usr/bin/env node
// Writes base/prometheus-rule.yaml from deploy/prometheus/alerts.yaml, the Prometheus rules file
// that promtool checks: the PrometheusRule's spec.groups is that file's groups, unchanged.
// Kustomize cannot wrap a plain file into a custom resource, hence this step. Run from anywhere:
//   node deploy/kubernetes/generate-prometheus-rule.mjs           # rewrite
//   node deploy/kubernetes/generate-prometheus-rule.mjs --check   # exit 1 if out of date
// test/deploy fails when the two differ.
import { readFileSync, writeFileSync } from 'node:fs';
import { parse, stringify } from 'yaml';

const ALERTS = new URL('../prometheus/alerts.yaml', import.meta.url);
const TARGET = new URL('base/prometheus-rule.yaml', import.meta.url);

const HEADER = `# GENERATED from deploy/prometheus/alerts.yaml by deploy/kubernetes/generate-prometheus-rule.mjs.
# Do not edit: change alerts.yaml and run the script. The \`release\` label must match your
# Prometheus' ruleSelector (kube-prometheus-stack: the Helm release name): components/monitoring sets it.
`;

/** The PrometheusRule manifest for the text of a Prometheus rules file. */
export function renderPrometheusRule(alertsText) {
  const rules = parse(alertsText);
  if (rules === null || typeof rules !== 'object' || !Array.isArray(rules.groups)) {
    throw new Error('alerts.yaml: expected a Prometheus rules file with a top-level `groups` list');
  }
  const manifest = {
    apiVersion: 'monitoring.coreos.com/v1',
    kind: 'PrometheusRule',
    metadata: { name: 'ledger-gateway', labels: { release: 'kube-prometheus-stack' } },
    spec: { groups: rules.groups },
  };
  return HEADER + stringify(manifest, { lineWidth: 0 });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const rendered = renderPrometheusRule(readFileSync(ALERTS, 'utf8'));
  if (process.argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(TARGET, 'utf8');
    } catch {
      // missing: out of date
    }
    if (current !== rendered) {
      console.error('deploy/kubernetes/base/prometheus-rule.yaml is out of date: run node deploy/kubernetes/generate-prometheus-rule.mjs');
      process.exit(1);
    }
  } else {
    writeFileSync(TARGET, rendered);
    console.log(`wrote ${TARGET.pathname}`);
  }
}
