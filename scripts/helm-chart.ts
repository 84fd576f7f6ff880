// `npm run helm:chart`: writes the Helm chart's generated files (scripts/helm-chart-files.ts): its
// values.schema.json from the config schema, the config's defaults, the copies of the alerts and the
// dashboard, and the values table in deploy/README.md. Rerun it after a change of any of them
// (src/config/schema.ts above all). `-- --check` only reports stale files (exit 1), as the tests do.
import { readFileSync, writeFileSync } from 'node:fs';
import { generatedFiles, staleFiles } from './helm-chart-files.js';

const ROOT = new URL('../', import.meta.url);

if (process.argv.includes('--check')) {
  const stale = staleFiles();
  if (stale.length > 0) {
    console.error(`stale: ${stale.join(', ')}: run npm run helm:chart`);
    process.exit(1);
  }
} else {
  for (const { path, text } of generatedFiles()) {
    let current: string | undefined;
    try {
      current = readFileSync(new URL(path, ROOT), 'utf8');
    } catch {
      current = undefined;
    }
    if (current !== text) {
      writeFileSync(new URL(path, ROOT), text);
      console.log(`${path}: written`);
    }
  }
}
