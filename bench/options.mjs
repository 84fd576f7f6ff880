// Command-line flags and BENCH_* environment variables -> the run's options. Flags win over the environment.
import { parseArgs } from 'node:util';

export const SCENARIOS = ['version', 'ledger-end', 'submit', 'update-by-offset', 'latency', 'stream'];
export const PATHS = ['direct', 'gateway', 'nginx', 'haproxy', 'haproxy-jwt', 'naive', 'fastify-floor', 'node-floor'];

/**
 * Which paths each scenario runs by default: the full matrix (--all) does not fit the 10-minute
 * budget on two cores with 10 s runs, so the default keeps the pairs the ratios need.
 */
export const DEFAULT_MATRIX = {
  version: ['gateway'], // the peers answer it like ledger-end (no cache): only the gateway's cached figure is new
  // The Fastify floor (bench/floor-proxy.mjs) where it says the most: what any Fastify proxy costs
  // here. The node:http floor's throughput only on request (--paths): the run stays under 10 minutes.
  'ledger-end': ['direct', 'gateway', 'nginx', 'haproxy', 'haproxy-jwt', 'naive', 'fastify-floor'],
  submit: ['direct', 'gateway', 'naive', 'haproxy-jwt'],
  'update-by-offset': ['gateway', 'naive'],
  // The node:http floor here too: the tail any Node proxy shows at low load on this machine.
  latency: ['direct', 'gateway', 'node-floor'],
  stream: ['direct', 'gateway', 'nginx', 'haproxy', 'haproxy-jwt', 'naive'],
};

export const USAGE = `Usage: npm run bench -- [options]     (or: node bench/run.mjs [options] after npm run build)

  --duration <s>        seconds per load run (BENCH_DURATION, default 10; --quick: 2)
  --connections <n>     wrk connections for the throughput runs (BENCH_CONNECTIONS, default 50)
  --repetitions <n>     interleaved rounds, medians reported (BENCH_REPETITIONS, default 3; --quick: 1)
  --scenarios <list>    comma list of ${SCENARIOS.join(', ')} (BENCH_SCENARIOS)
  --paths <list>        comma list of ${PATHS.join(', ')} (BENCH_PATHS)
  --all                 every path for every scenario (about 15 minutes with the defaults)
  --quick               1-2 s runs, 1 repetition: checks that the harness works, not for figures
  --memory              memory soak only: --memory-requests requests through the gateway after warm-up
  --memory-requests <n> default 1000000 (BENCH_MEMORY_REQUESTS)
  --stream-messages <n> messages per WebSocket stream (default 10000)
  --upstream <kind>     nginx | node: the fixed upstream (default nginx when installed)
  --no-pin              do not pin processes to cores with taskset
  --gateway-log <file>  where the gateway's info logs go (default /dev/null)
  --profile             run the gateway under node --cpu-prof; print where its CPU time went and
                        keep the profile in bench/results/profile/ (a flame graph in Chrome DevTools
                        or speedscope). Best with one scenario: --scenarios ledger-end --paths gateway
  --out <file>          JSON results (default bench/results/latest.json; --memory: bench/results/memory.json)
  --help`;

function positiveInteger(value, name) {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 1) throw new Error(`${name} must be a positive integer, got "${value}"`);
  return parsed;
}

function list(value, known, name) {
  const items = value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  for (const item of items)
    if (!known.includes(item)) throw new Error(`${name}: unknown "${item}" (known: ${known.join(', ')})`);
  return items;
}

export function readOptions(argv = process.argv.slice(2), env = process.env) {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string' },
      connections: { type: 'string' },
      repetitions: { type: 'string' },
      scenarios: { type: 'string' },
      paths: { type: 'string' },
      all: { type: 'boolean', default: false },
      quick: { type: 'boolean', default: false },
      memory: { type: 'boolean', default: false },
      'memory-requests': { type: 'string' },
      'stream-messages': { type: 'string' },
      upstream: { type: 'string' },
      'no-pin': { type: 'boolean', default: false },
      'gateway-log': { type: 'string' },
      profile: { type: 'boolean', default: false },
      out: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) return { help: true };
  const quick = values.quick;
  const duration = positiveInteger(values.duration ?? env.BENCH_DURATION ?? (quick ? 2 : 10), 'duration');
  const scenarios = list(values.scenarios ?? env.BENCH_SCENARIOS ?? SCENARIOS.join(','), SCENARIOS, 'scenarios');
  const paths = list(values.paths ?? env.BENCH_PATHS ?? PATHS.join(','), PATHS, 'paths');
  const upstream = values.upstream ?? env.BENCH_UPSTREAM;
  if (upstream !== undefined && upstream !== 'nginx' && upstream !== 'node')
    throw new Error(`upstream must be nginx or node, got "${upstream}"`);
  const matrix = {};
  for (const scenario of scenarios) {
    const wanted = values.all ? PATHS : DEFAULT_MATRIX[scenario];
    matrix[scenario] = wanted.filter((path) => paths.includes(path));
  }
  return {
    help: false,
    quick,
    duration,
    connections: positiveInteger(values.connections ?? env.BENCH_CONNECTIONS ?? 50, 'connections'),
    repetitions: positiveInteger(values.repetitions ?? env.BENCH_REPETITIONS ?? (quick ? 1 : 3), 'repetitions'),
    latencyConnections: 4,
    warmupSeconds: quick ? 1 : 2,
    matrix,
    memory: values.memory,
    memoryRequests: positiveInteger(
      values['memory-requests'] ?? env.BENCH_MEMORY_REQUESTS ?? 1_000_000,
      'memory-requests',
    ),
    streamMessages: positiveInteger(values['stream-messages'] ?? (quick ? 2_000 : 10_000), 'stream-messages'),
    upstream,
    pin: !values['no-pin'],
    gatewayLog: values['gateway-log'] ?? '/dev/null',
    profile: values.profile,
    out: values.out ?? (values.memory ? 'bench/results/memory.json' : 'bench/results/latest.json'),
  };
}
