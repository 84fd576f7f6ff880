// Reads a sampling heap profile (V8's HeapProfiler, bench/alloc-sampler.mjs) and says how many
// bytes one request allocated, and where: by origin (the gateway's own code, each package, Node's
// modules, V8 and native code) and by function. Each sampled allocation counts for the function
// that made it; an allocation inside a function V8 inlined counts for the function it was inlined
// into. Bytes, unlike CPU seconds, do not move with the machine's speed: the same build and load
// allocate the same within a few percent (the sampling), so a change shows however noisy the VM.

/** `url` of a call frame -> its origin: "ours" (dist/), a package, a node: module, or native. */
export function originOf(url) {
  const packageMatch = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (packageMatch) return `package ${packageMatch[1]}`;
  if (/\/dist\//.test(url)) return 'ours';
  if (url.startsWith('node:'))
    return `node:${url
      .slice(5)
      .split('/')
      .slice(0, url.startsWith('node:internal/') ? 2 : 1)
      .join('/')}`; // node:internal/streams
  return '(V8, native)';
}

function placeOf(url) {
  const packageMatch = /node_modules\/((?:@[^/]+\/)?[^/]+)\/(.+)$/.exec(url);
  if (packageMatch) return `${packageMatch[1]}/${packageMatch[2]}`;
  const own = /\/dist\/(.+)$/.exec(url);
  if (own) return own[1];
  return url;
}

const bytes = (value) => `${Math.round(value).toLocaleString('en').padStart(7)} B`;
const share = (value, total) => `${((100 * value) / total).toFixed(1).padStart(5)}%`;

/**
 * The summary as text lines, for `requests` requests served while sampling. `ownTop` lists that many
 * of the gateway's own functions after the overall top.
 */
export function summarizeAllocations(profile, requests, { top = 20, ownTop = 15 } = {}) {
  const self = new Map();
  const origins = new Map();
  let total = 0;
  const stack = [profile.head];
  while (stack.length > 0) {
    const node = stack.pop();
    for (const child of node.children ?? []) stack.push(child);
    if (node.selfSize === 0) continue;
    const frame = node.callFrame;
    const origin = originOf(frame.url);
    const name =
      `${frame.functionName || '(anonymous)'}  ${frame.url === '' ? '' : `${placeOf(frame.url)}:${frame.lineNumber + 1}`}`.trim();
    const entry = self.get(name) ?? { origin, size: 0 };
    entry.size += node.selfSize;
    self.set(name, entry);
    origins.set(origin, (origins.get(origin) ?? 0) + node.selfSize);
    total += node.selfSize;
  }
  if (total === 0 || requests <= 0) return ['allocations: nothing sampled'];
  const perRequest = (size) => size / requests;
  const functions = [...self].sort((a, b) => b[1].size - a[1].size);
  const own = functions.filter(([, entry]) => entry.origin === 'ours');
  const ownTotal = origins.get('ours') ?? 0;
  return [
    `allocated per request: ${Math.round(perRequest(total)).toLocaleString('en')} B (${requests.toLocaleString('en')} requests)`,
    'by origin:',
    ...[...origins]
      .sort((a, b) => b[1] - a[1])
      .filter(([, size]) => size / total >= 0.005)
      .map(([origin, size]) => `  ${bytes(perRequest(size))}  ${share(size, total)}  ${origin}`),
    `by function, top ${top}:`,
    ...functions
      .slice(0, top)
      .map(([name, entry]) => `  ${bytes(perRequest(entry.size))}  ${share(entry.size, total)}  ${name}`),
    ...(ownTotal === 0
      ? []
      : [
          `the gateway's own functions (${Math.round(perRequest(ownTotal)).toLocaleString('en')} B in all), top ${ownTop}:`,
          ...own
            .slice(0, ownTop)
            .map(([name, entry]) => `  ${bytes(perRequest(entry.size))}  ${share(entry.size, total)}  ${name}`),
        ]),
  ];
}
