// The load generator: wrk (one thread, a Lua script for the method, body and Authorization header,
// and a done() that prints the figures as JSON), else autocannon from node_modules.
// Both are closed-loop: each connection sends its next request when the previous answer is in.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { canPin, which } from './processes.mjs';

const MARK = 'BENCH_JSON ';

/** Lua long string that cannot be closed by the text it holds. */
function luaString(text) {
  let level = '';
  while (text.includes(`]${level}]`)) level += '=';
  return `[${level}[${text}]${level}]`;
}

function wrkScript({ method, body, token, paceMs }) {
  return `-- written by bench/run.mjs
wrk.method = "${method}"
wrk.headers["Authorization"] = "Bearer ${token}"
${body === undefined ? '' : `wrk.headers["Content-Type"] = "application/json"\nwrk.body = ${luaString(body)}\n`}${paceMs === undefined ? '' : `function delay() return ${paceMs} end\n`}
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('${MARK}{"requests":%d,"durationUs":%d,"bytes":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},"latencyUs":{"p50":%.1f,"p90":%.1f,"p99":%.1f,"p999":%.1f,"max":%.1f,"mean":%.1f}}\\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9), latency.max, latency.mean))
end
`;
}

function collect(child) {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (data) => {
      stdout += data;
    });
    child.stderr.on('data', (data) => {
      stderr += data;
    });
    child.once('error', reject);
    // 'close', not 'exit': a process can exit before its output is read, and wrk's figures come last.
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A uniform result: requests, seconds, req/s, latency in ms, error counts. */
function result(requests, seconds, latencyMs, errors) {
  return { requests, seconds, rps: requests / seconds, latencyMs, errors, nonSuccess: errors.status };
}

export function createLoadGenerator({ root, dir, core, autocannonAllowed = true }) {
  const wrk = which('wrk');
  const autocannonCli = join(root, 'node_modules/autocannon/autocannon.js');
  const hasAutocannon = autocannonAllowed && existsSync(autocannonCli);
  const pinned = (command, args) =>
    core !== undefined && canPin() ? ['taskset', ['-c', String(core), command, ...args]] : [command, args];
  let scripts = 0;

  /** paceMs: each connection waits that long before its next request (wrk's delay(); not measured as latency). */
  async function runWrk({ url, method, body, token, connections, seconds, paceMs }) {
    const script = join(dir, `wrk-${++scripts}.lua`);
    writeFileSync(script, wrkScript({ method, body, token, paceMs }));
    const [file, args] = pinned(wrk, [
      '-t1',
      `-c${connections}`,
      `-d${seconds}s`,
      '--timeout',
      '5s',
      '-s',
      script,
      url,
    ]);
    const { code, stdout, stderr } = await collect(spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
    const line = stdout.split('\n').find((text) => text.startsWith(MARK));
    if (code !== 0 || line === undefined) throw new Error(`wrk failed (${code}): ${stderr || stdout}`);
    const parsed = JSON.parse(line.slice(MARK.length));
    const ms = (us) => us / 1000;
    return result(
      parsed.requests,
      parsed.durationUs / 1e6,
      {
        p50: ms(parsed.latencyUs.p50),
        p90: ms(parsed.latencyUs.p90),
        p99: ms(parsed.latencyUs.p99),
        p999: ms(parsed.latencyUs.p999),
        max: ms(parsed.latencyUs.max),
        mean: ms(parsed.latencyUs.mean),
      },
      parsed.errors,
    );
  }

  async function runAutocannon({ url, method, body, token, connections, seconds, paceMs }) {
    if (paceMs !== undefined) throw new Error('a paced load needs wrk (autocannon has no per-connection delay)');
    const headers = [`authorization=Bearer ${token}`, ...(body === undefined ? [] : ['content-type=application/json'])];
    const [file, args] = pinned(process.execPath, [
      autocannonCli,
      '-j',
      '-c',
      String(connections),
      '-d',
      String(seconds),
      '-m',
      method,
      ...headers.flatMap((header) => ['-H', header]),
      ...(body === undefined ? [] : ['-b', body]),
      url,
    ]);
    const { code, stdout, stderr } = await collect(spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
    if (code !== 0) throw new Error(`autocannon failed (${code}): ${stderr}`);
    const parsed = JSON.parse(stdout);
    const latency = parsed.latency;
    return result(
      parsed.requests.total,
      parsed.duration,
      {
        p50: latency.p50,
        p90: latency.p90,
        p99: latency.p99,
        p999: latency.p99_9 ?? latency.p99,
        max: latency.max,
        mean: latency.average,
      },
      { connect: 0, read: parsed.errors ?? 0, write: 0, status: parsed.non2xx ?? 0, timeout: parsed.timeouts ?? 0 },
    );
  }

  if (wrk !== undefined) {
    const banner = spawnSync(wrk, ['-v'], { encoding: 'utf8' });
    return {
      name: 'wrk',
      version: `${banner.stdout}${banner.stderr}`.split('\n')[0].split(' Copyright')[0],
      run: runWrk,
    };
  }
  if (hasAutocannon) return { name: 'autocannon', version: 'autocannon (node_modules)', run: runAutocannon };
  return undefined;
}
