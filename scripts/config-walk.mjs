#!/usr/bin/env node
// `node scripts/config-walk.mjs [--json] [dir]`: how far the configuration travels from buildGateway.
// From src/app.ts it follows every import into a module that imports src/config/schema.ts (a room
// the configuration is handed to), using dependency-cruiser's JSON output, and counts:
//   rooms entered  the modules reached that way (app.ts and config/ left out);
//   whole config   those of them that name GatewayConfig instead of the section they read;
//   climbs         imports on the walk from a lower floor of the house to a higher one
//                  (the floors of floors.cjs; a stage importing a stage is a climb too).
// dir defaults to this checkout; pass another checkout (a `git worktree add`) to measure an older build.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

// The floors are the table's (floors.cjs), the one .dependency-cruiser.cjs reads; a folder with no floor counts as a climb.
const { floorOf, roomOf } = createRequire(import.meta.url)('../floors.cjs');
const isFolder = (path) => /^src\/[^/]+\//.test(path);
/** Two rooms beside each other on one floor (a stage importing another stage). */
const sideways = (from, to) =>
  isFolder(from) && isFolder(to) && roomOf(from) !== roomOf(to) && floorOf(from) === floorOf(to);

const args = process.argv.slice(2);
const json = args.includes('--json');
const here = join(dirname(fileURLToPath(import.meta.url)), '..');
const root = resolve(args.find((arg) => !arg.startsWith('--')) ?? here);

const cruise = JSON.parse(
  execFileSync(
    join(here, 'node_modules', '.bin', 'depcruise'),
    ['src', '--config', '.dependency-cruiser.cjs', '--output-type', 'json'],
    { cwd: root, maxBuffer: 64 * 1024 * 1024 },
  ).toString(),
);
const modules = new Map(cruise.modules.map((module) => [module.source, module]));
const takesConfig = (path) =>
  !path.startsWith('src/config/') &&
  modules.get(path)?.dependencies.some((dependency) => dependency.resolved === 'src/config/schema.ts');
const namesWholeConfig = (path) => /\bGatewayConfig\b/.test(readFileSync(join(root, path), 'utf8'));

const entered = new Set();
const climbs = [];
const queue = ['src/app.ts'];
while (queue.length > 0) {
  const from = queue.shift();
  for (const { resolved: to } of modules.get(from).dependencies) {
    if (!takesConfig(to) || to === 'src/app.ts') continue;
    const up = floorOf(to) === undefined || floorOf(from) === undefined || floorOf(to) > floorOf(from);
    if (up || sideways(from, to)) climbs.push(`${from} -> ${to}`);
    if (!entered.has(to)) {
      entered.add(to);
      queue.push(to);
    }
  }
}
const wholeConfig = [...entered].filter(namesWholeConfig).sort();

if (json) {
  console.log(JSON.stringify({ rooms: [...entered].sort(), wholeConfig, climbs }, null, 2));
} else {
  console.log(`rooms entered: ${entered.size}`);
  console.log(`whole config:  ${wholeConfig.length}${wholeConfig.map((path) => `\n  ${path}`).join('')}`);
  console.log(`climbs:        ${climbs.length}${climbs.map((climb) => `\n  ${climb}`).join('')}`);
}
