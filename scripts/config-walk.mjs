#!/usr/bin/env node
// `node scripts/config-walk.mjs [--json] [dir]`: how far the configuration travels from buildGateway.
// From src/app.ts it follows every import into a module that imports src/config/schema.ts (a room
// the configuration is handed to), using dependency-cruiser's JSON output, and counts:
//   rooms entered  the modules reached that way (app.ts and config/ left out);
//   whole config   those of them that name GatewayConfig instead of the section they read;
//   climbs         imports on the walk from a lower floor of the house to a higher one
//                  (floors as in docs/development.md; a stage importing a stage is a climb too).
// dir defaults to this checkout; pass another checkout (a `git worktree add`) to measure an older build.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const FLOORS = [
  [/^src\/(main|app)\.ts$/, 9],
  [/^src\/cli\//, 8],
  [/^src\/server\//, 7],
  [/^src\/live\//, 6],
  [/^src\/(auth|protection|policy|cache|proxy|audit)\//, 5],
  [/^src\/telemetry\//, 4],
  [/^src\/exchange\//, 3],
  [/^src\/body\//, 2],
  [/^src\/config\//, 1],
  [/^src\/sandbox\//, -1],
  [/^src\/[^/]+\.ts$/, 0],
];
const floorOf = (path) => FLOORS.find(([pattern]) => pattern.test(path))?.[1] ?? 0;
const stageOf = (path) => /^src\/(auth|protection|policy|cache|proxy|audit)\//.exec(path)?.[1];

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
    const sideways = stageOf(from) !== undefined && stageOf(to) !== undefined && stageOf(from) !== stageOf(to);
    if (floorOf(to) > floorOf(from) || sideways) climbs.push(`${from} -> ${to}`);
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
