// Medians of the repeated runs, the ratios the targets name, and the printed table.

export function median(values) {
  const sorted = values.filter((value) => value !== undefined && Number.isFinite(value)).sort((a, b) => a - b);
  if (sorted.length === 0) return undefined;
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** One row per scenario and path: the medians of its repetitions. */
export function summarize(runs) {
  const groups = new Map();
  for (const run of runs) {
    const key = `${run.scenario}\u0000${run.path}`;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(run);
  }
  return [...groups.values()].map((group) => {
    const [first] = group;
    const pick = (select) => median(group.map(select));
    const row = { scenario: first.scenario, path: first.path, repetitions: group.length };
    if (first.kind === 'stream') {
      Object.assign(row, {
        kind: 'stream',
        messages: first.messages,
        messagesPerSecond: pick((run) => run.messagesPerSecond),
        seconds: pick((run) => run.seconds),
        handshakeMs: pick((run) => run.handshakeMs),
      });
    } else {
      Object.assign(row, {
        kind: 'http',
        connections: first.connections,
        rps: pick((run) => run.rps),
        p50: pick((run) => run.latencyMs.p50),
        p99: pick((run) => run.latencyMs.p99),
        p999: pick((run) => run.latencyMs.p999),
        nonSuccess: group.reduce(
          (sum, run) =>
            sum + run.nonSuccess + run.errors.connect + run.errors.read + run.errors.write + run.errors.timeout,
          0,
        ),
        requests: group.reduce((sum, run) => sum + run.requests, 0),
        verificationsPerRequest: group.every((run) => run.verifications !== undefined)
          ? group.reduce((sum, run) => sum + run.verifications, 0) / group.reduce((sum, run) => sum + run.requests, 0)
          : undefined,
      });
    }
    row.cpuSecondsPer10k = pick((run) => run.cpuSecondsPer10k);
    row.rssMiB = pick((run) => run.rssMiB);
    return row;
  });
}

function find(rows, scenario, path) {
  return rows.find((row) => row.scenario === scenario && row.path === path);
}

/** The targets, each with its measured value (undefined when a side was not measured). */
export function ratios(rows, memory) {
  const out = [];
  const ratio = (name, a, b, field, target, compare = '>=') => {
    const value = a?.[field] !== undefined && b?.[field] ? a[field] / b[field] : undefined;
    out.push({
      name,
      value,
      target,
      compare,
      unit: '×',
      pass:
        value === undefined || target === undefined ? undefined : compare === '>=' ? value >= target : value <= target,
    });
  };
  const gatewayGet = find(rows, 'ledger-end', 'gateway');
  ratio('proxied GET: gateway / naive Fastify proxy', gatewayGet, find(rows, 'ledger-end', 'naive'), 'rps', 1.5);
  ratio(
    'proxied GET: gateway / HAProxy with jwt_verify',
    gatewayGet,
    find(rows, 'ledger-end', 'haproxy-jwt'),
    'rps',
    0.75,
  );
  ratio('proxied GET: gateway / HAProxy plain', gatewayGet, find(rows, 'ledger-end', 'haproxy'), 'rps');
  ratio('proxied GET: gateway / nginx plain', gatewayGet, find(rows, 'ledger-end', 'nginx'), 'rps');
  ratio('proxied GET: gateway / direct', gatewayGet, find(rows, 'ledger-end', 'direct'), 'rps');
  // Context for the first target: what a featureless Fastify or node:http proxy reaches here.
  ratio(
    'proxied GET: gateway / Fastify floor (Fastify + undici, no features)',
    gatewayGet,
    find(rows, 'ledger-end', 'fastify-floor'),
    'rps',
  );
  ratio(
    'proxied GET: Fastify floor / naive Fastify proxy',
    find(rows, 'ledger-end', 'fastify-floor'),
    find(rows, 'ledger-end', 'naive'),
    'rps',
  );
  ratio(
    'proxied GET: node:http floor / naive Fastify proxy',
    find(rows, 'ledger-end', 'node-floor'),
    find(rows, 'ledger-end', 'naive'),
    'rps',
  );
  ratio('cached GET /v2/version / proxied GET (gateway)', find(rows, 'version', 'gateway'), gatewayGet, 'rps', 2);
  ratio(
    'POST submit (1 KB, rules): gateway / naive',
    find(rows, 'submit', 'gateway'),
    find(rows, 'submit', 'naive'),
    'rps',
  );
  ratio(
    'POST submit (1 KB, rules): gateway / HAProxy with jwt_verify',
    find(rows, 'submit', 'gateway'),
    find(rows, 'submit', 'haproxy-jwt'),
    'rps',
  );
  ratio(
    'POST update-by-offset (rules): gateway / naive',
    find(rows, 'update-by-offset', 'gateway'),
    find(rows, 'update-by-offset', 'naive'),
    'rps',
  );
  ratio(
    'WebSocket stream: gateway / direct (messages/s)',
    find(rows, 'stream', 'gateway'),
    find(rows, 'stream', 'direct'),
    'messagesPerSecond',
  );

  const gatewayLow = find(rows, 'latency', 'gateway');
  const directLow = find(rows, 'latency', 'direct');
  for (const [field, target] of [
    ['p50', 0.5],
    ['p99', 2],
  ]) {
    const value = gatewayLow && directLow ? gatewayLow[field] - directLow[field] : undefined;
    out.push({
      name: `added ${field} latency at 4 connections: gateway - direct`,
      value,
      target,
      compare: '<=',
      unit: 'ms',
      pass: value === undefined ? undefined : value <= target,
    });
  }
  // Context: the same for a bare node:http + undici proxy, the least any Node proxy adds here.
  const floorLow = find(rows, 'latency', 'node-floor');
  for (const field of ['p50', 'p99']) {
    const value = floorLow && directLow ? floorLow[field] - directLow[field] : undefined;
    if (value !== undefined)
      out.push({ name: `added ${field} latency at 4 connections: node:http floor - direct`, value, unit: 'ms' });
  }
  const perRequest = rows.filter((row) => row.path === 'gateway' && row.verificationsPerRequest !== undefined);
  // The soak (--memory) has no runs: its own count, over all its chunks (one new token per chunk).
  const soaked =
    memory?.verifications !== undefined && memory.requests > 0 ? memory.verifications / memory.requests : undefined;
  const verifications =
    perRequest.length > 0
      ? perRequest.reduce((sum, row) => sum + row.verificationsPerRequest * row.requests, 0) /
        perRequest.reduce((sum, row) => sum + row.requests, 0)
      : soaked;
  out.push({
    name: `token cache: signature verifications per request (gateway, ${perRequest.length > 0 ? 'all runs; one new token per run' : 'the soak; one new token per chunk'})`,
    value: verifications,
    target: 0.001,
    compare: '<=',
    unit: '',
    pass: verifications === undefined ? undefined : verifications <= 0.001,
  });
  if (memory !== undefined) {
    out.push({
      name: `resident memory growth over ${memory.requests.toLocaleString('en')} requests after warm-up`,
      value: memory.growthPercent,
      target: 10,
      compare: '<=',
      unit: '%',
      pass: memory.growthPercent <= 10,
    });
  }
  return out;
}

const PATH_LABELS = {
  direct: 'direct (no proxy)',
  gateway: 'ledger-gateway',
  nginx: 'nginx plain proxy',
  haproxy: 'HAProxy plain',
  'haproxy-jwt': 'HAProxy + jwt_verify',
  naive: 'naive Fastify proxy',
  'fastify-floor': 'Fastify floor (no features)',
  'node-floor': 'node:http floor (no features)',
};

const fixed = (value, digits) => (value === undefined ? '-' : value.toFixed(digits));
const thousands = (value) => (value === undefined ? '-' : Math.round(value).toLocaleString('en'));

function table(header, lines, leftColumns = 2) {
  const widths = header.map((cell, index) => Math.max(cell.length, ...lines.map((line) => String(line[index]).length)));
  const render = (cells) =>
    cells
      .map((cell, index) =>
        index < leftColumns ? String(cell).padEnd(widths[index]) : String(cell).padStart(widths[index]),
      )
      .join('  ');
  return [render(header), widths.map((width) => '-'.repeat(width)).join('  '), ...lines.map(render)].join('\n');
}

export function renderTables(rows, scenarioTitles) {
  const http = rows.filter((row) => row.kind === 'http');
  const streams = rows.filter((row) => row.kind === 'stream');
  const parts = [];
  if (http.length > 0) {
    parts.push(
      table(
        ['scenario', 'path', 'req/s', 'p50 ms', 'p99 ms', 'p99.9 ms', 'CPU s/10k', 'RSS MiB', 'non-2xx/err', 'conns'],
        http.map((row) => [
          scenarioTitles[row.scenario] ?? row.scenario,
          PATH_LABELS[row.path],
          thousands(row.rps),
          fixed(row.p50, 2),
          fixed(row.p99, 2),
          fixed(row.p999, 2),
          fixed(row.cpuSecondsPer10k, 2),
          fixed(row.rssMiB, 0),
          row.nonSuccess,
          row.connections,
        ]),
      ),
    );
  }
  if (streams.length > 0) {
    parts.push(
      table(
        ['scenario', 'path', 'messages/s', 'total s', 'handshake ms', 'CPU s/10k msg', 'RSS MiB'],
        streams.map((row) => [
          `WebSocket stream, ${row.messages.toLocaleString('en')} messages`,
          PATH_LABELS[row.path],
          thousands(row.messagesPerSecond),
          fixed(row.seconds, 2),
          fixed(row.handshakeMs, 1),
          fixed(row.cpuSecondsPer10k, 2),
          fixed(row.rssMiB, 0),
        ]),
      ),
    );
  }
  return parts.join('\n\n');
}

export function renderRatios(list) {
  const unit = (entry) => (entry.unit === '×' ? '×' : entry.unit === '' ? '' : ` ${entry.unit}`);
  return table(
    ['ratio', 'value', 'target', 'verdict'],
    list.map((entry) => [
      entry.name,
      entry.value === undefined
        ? 'not measured'
        : `${entry.unit === '' ? entry.value.toFixed(5) : entry.value.toFixed(2)}${unit(entry)}`,
      entry.target === undefined ? '-' : `${entry.compare} ${entry.target}${unit(entry)}`,
      entry.pass === undefined ? '-' : entry.pass ? 'PASS' : 'FAIL',
    ]),
    1,
  );
}
