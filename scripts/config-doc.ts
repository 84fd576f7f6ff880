// `npm run docs:config`: rewrites the key reference in docs/configuration.md from the schema.
// `-- --check` only reports whether the committed file is stale (exit 1), as the docs test does.
import { readFileSync, writeFileSync } from 'node:fs';
import { withConfigReference } from './config-reference.js';

const file = new URL('../docs/configuration.md', import.meta.url);
const current = readFileSync(file, 'utf8');
const next = withConfigReference(current);
if (process.argv.includes('--check')) {
  if (next !== current) {
    console.error('docs/configuration.md is stale: run npm run docs:config');
    process.exit(1);
  }
} else if (next !== current) {
  writeFileSync(file, next);
  console.log('docs/configuration.md: key reference updated');
}
