// Reads a V8 CPU profile (`node --cpu-prof`) and says where the time went: the functions with the
// most self time, and the time spent inside each package and each of the gateway's own files
// (inclusive: a stage's share includes what it calls). The .cpuprofile itself opens as a flame
// graph in Chrome DevTools (Performance, "Load profile") or https://www.speedscope.app.
import { readFileSync } from 'node:fs';

/** `url` of a call frame -> a short place: package name, dist/ file, node: module or (native). */
function placeOf(url) {
  const packageMatch = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (packageMatch) return `pkg ${packageMatch[1]}`;
  const own = /\/(dist\/.+)$/.exec(url);
  if (own) return own[1];
  if (url.startsWith('node:')) return url.split('/')[0];
  return url === '' ? '(native)' : url;
}

const share = (count, total) => `${((100 * count) / total).toFixed(1).padStart(5)}%`;

/**
 * The summary as text lines. `skipSeconds` leaves out the profile's start (module loading, start-up)
 * so that the figures describe the load.
 */
export function summarizeProfile(file, { skipSeconds = 0, top = 25 } = {}) {
  const { total, self, inclusive, profile } = busyTimes(file, skipSeconds);
  if (total === 0) return ['profile: no busy samples after the start-up was left out'];
  const sorted = (map) => [...map].sort((a, b) => b[1] - a[1]);
  return [
    `profile: ${total.toLocaleString('en')} busy samples (${profile.samples.length.toLocaleString('en')} in all)`,
    `self time, top ${top}:`,
    ...sorted(self)
      .slice(0, top)
      .map(([name, count]) => `  ${share(count, total)}  ${name}`),
    'inclusive time by package and own file (a caller includes its callees):',
    ...sorted(inclusive)
      .filter(([place]) => place !== '(native)')
      .slice(0, top)
      .map(([place, count]) => `  ${share(count, total)}  ${place}`),
  ];
}

function busyTimes(file, skipSeconds) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);

  const samples = new Map(); // node id -> samples, after skipSeconds, idle left out
  let elapsedUs = 0;
  profile.samples.forEach((id, index) => {
    elapsedUs += profile.timeDeltas[index];
    if (elapsedUs < skipSeconds * 1e6) return;
    if (byId.get(id).callFrame.functionName === '(idle)') return;
    samples.set(id, (samples.get(id) ?? 0) + 1);
  });
  const total = [...samples.values()].reduce((sum, count) => sum + count, 0);

  const self = new Map();
  const inclusive = new Map();
  for (const [id, count] of samples) {
    const frame = byId.get(id).callFrame;
    const where = frame.url.startsWith('node:') ? frame.url : placeOf(frame.url);
    const name = `${frame.functionName || '(anonymous)'}  ${where}${frame.url ? `:${frame.lineNumber + 1}` : ''}`;
    self.set(name, (self.get(name) ?? 0) + count);
    const seen = new Set();
    for (let cursor = id; cursor !== undefined; cursor = parentOf.get(cursor)) {
      const place = placeOf(byId.get(cursor).callFrame.url);
      if (seen.has(place)) continue;
      seen.add(place);
      inclusive.set(place, (inclusive.get(place) ?? 0) + count);
    }
  }
  return { total, self, inclusive, profile };
}
