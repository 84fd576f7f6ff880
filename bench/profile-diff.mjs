// Where two builds' CPU per request differs, function by function: reads a V8 CPU profile of each
// side (`npm run bench:compare -- --profile DIR` writes DIR/base/ and DIR/this/), sums each side's
// self time by function and file (line numbers left out, so that a function that moved between the
// builds is still one row), normalises it per request with the side's measured CPU per request, and
// prints the differences, largest first, then the same by file and package.
//
//   node bench/profile-diff.mjs DIR --us <base µs/req>,<this µs/req> [--top 40] [--skip 2]
//   node bench/profile-diff.mjs base.cpuprofile this.cpuprofile --us 52.1,53.8
//
// Without --us the figures are shares of each side's busy samples (%), not µs.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

/** `url` of a call frame -> a short place: package name, dist/ file, node: module (whole) or (native). */
function placeOf(url) {
  const packageMatch = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (packageMatch) return `pkg ${packageMatch[1]}`;
  const own = /\/(dist\/.+)$/.exec(url);
  if (own) return own[1];
  return url === '' ? '(native)' : url;
}

/**
 * A profile's busy samples (idle left out, the first `skipSeconds` too) by function-and-file (self)
 * and by place (self), as shares of the busy total.
 */
export function selfShares(file, skipSeconds = 2) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const counts = new Map();
  let elapsedUs = 0;
  profile.samples.forEach((id, index) => {
    elapsedUs += profile.timeDeltas[index];
    if (elapsedUs >= skipSeconds * 1e6) counts.set(id, (counts.get(id) ?? 0) + 1);
  });
  const byFunction = new Map();
  const byPlace = new Map();
  let total = 0;
  for (const [id, count] of counts) {
    const frame = byId.get(id).callFrame;
    if (frame.functionName === '(idle)') continue;
    total += count;
    const place = placeOf(frame.url);
    const name = `${frame.functionName || '(anonymous)'}  ${place}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + count);
    byPlace.set(place, (byPlace.get(place) ?? 0) + count);
  }
  const shares = (map) => new Map([...map].map(([key, count]) => [key, count / total]));
  return { total, byFunction: shares(byFunction), byPlace: shares(byPlace) };
}

/** A .cpuprofile file, or the newest one in a directory. */
function profileFile(path) {
  if (!statSync(path).isDirectory()) return path;
  const files = readdirSync(path)
    .filter((file) => file.endsWith('.cpuprofile'))
    .sort();
  if (files.length === 0) throw new Error(`no .cpuprofile in ${path}`);
  return join(path, files.at(-1));
}

/** Rows of `name, base, this, difference`, scaled by each side's `scale`, the largest differences first. */
export function differences(baseMap, thisMap, scales) {
  const names = new Set([...baseMap.keys(), ...thisMap.keys()]);
  return [...names]
    .map((name) => {
      const base = (baseMap.get(name) ?? 0) * scales[0];
      const other = (thisMap.get(name) ?? 0) * scales[1];
      return { name, base, other, difference: other - base };
    })
    .sort((a, b) => Math.abs(b.difference) - Math.abs(a.difference));
}

function main() {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { us: { type: 'string' }, top: { type: 'string' }, skip: { type: 'string' } },
  });
  const [first, second] = positionals;
  if (first === undefined) {
    console.log('usage: node bench/profile-diff.mjs DIR | BASE THIS [--us base,this] [--top n] [--skip s]');
    return;
  }
  const files = second === undefined ? [join(first, 'base'), join(first, 'this')] : [first, second];
  const sides = files.map((path) => selfShares(profileFile(path), Number(values.skip ?? 2)));
  const scales = values.us === undefined ? [100, 100] : values.us.split(',').map(Number);
  const unit = values.us === undefined ? '% of busy samples' : 'µs per request';
  const top = Number(values.top ?? 40);
  const fixed = (value) => value.toFixed(2).padStart(8);
  console.log(`busy samples: base ${sides[0].total}, this ${sides[1].total}`);
  for (const [title, key, rows] of [
    ['self time by function and file', 'byFunction', top],
    ['self time by file and package', 'byPlace', 25],
  ]) {
    const table = differences(sides[0][key], sides[1][key], scales);
    console.log(`\n${title}, ${unit}: base, this, difference (largest differences first)`);
    for (const row of table.slice(0, rows))
      console.log(`${fixed(row.base)} ${fixed(row.other)} ${fixed(row.difference)}  ${row.name}`);
    const sum = table.reduce((total, row) => total + row.difference, 0);
    console.log(`${' '.repeat(17)}${fixed(sum)}  (all rows)`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) main();
