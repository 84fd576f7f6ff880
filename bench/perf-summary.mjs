// Where the gateway's CPU time goes, from Linux perf (bench/README.md "Profiling with perf"):
//   node --perf-basic-prof dist/main.js ...                 (JIT frames get their JavaScript names)
//   perf record -F 4000 -e cpu-clock -g -p <pid> -o perf.data -- sleep 6   (under load)
//   perf script -i perf.data -F comm,tid,ip,sym > perf.txt
//   node bench/perf-summary.mjs perf.txt [own functions to list]
// Unlike V8's --cpu-prof, which samples the main thread on a wall clock (a descheduled thread is
// still sampled, and syscalls show as "(program)"), perf samples CPU time, kernel included. Each
// sample is charged to its innermost JavaScript frame: a builtin, a V8 runtime call or a syscall
// counts for the JavaScript function that made it, so "ours" includes what our code costs inside
// V8 and Node (inlined callees count for the function they were inlined into).
import { readFileSync } from 'node:fs';

const [file, listed = '20'] = process.argv.slice(2);
if (file === undefined) {
  console.error('usage: node bench/perf-summary.mjs <perf script output> [own functions to list]');
  process.exit(2);
}

const KERNEL_LEAF = /^(_|tcp|do_|sock|ip_|vfs|fdget|skb|ep_|inet|sys_|entry_|syscall)/;

function origin(frame) {
  if (frame.includes('/dist/') && !frame.includes('node_modules')) {
    return { group: 'ours', name: frame.replace(/^JS:[*~+^]?'?/, '').replace(/\S*\/dist\//, '') }; // "authenticateRequest auth/hooks.js:21:40"
  }
  const pkg = frame.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/);
  if (pkg !== null) return { group: `package ${pkg[1]}`, name: undefined };
  const internal = frame.match(/ node:([\w/]+)/);
  if (internal !== null) return { group: `node:${internal[1]}`, name: undefined };
  return { group: 'other JavaScript (wasm, eval)', name: undefined };
}

const groups = new Map();
const own = new Map();
let total = 0;
const add = (map, key) => map.set(key, (map.get(key) ?? 0) + 1);
for (const block of readFileSync(file, 'utf8').split('\n\n')) {
  const lines = block
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
  if (lines.length < 2) continue;
  total++;
  if (!lines[0].includes('MainThread')) {
    add(groups, '(other threads: GC helpers, compilers)');
    continue;
  }
  const frames = lines.slice(1).map((line) => line.replace(/^[0-9a-f]+\s+/, ''));
  const js = frames.find((frame) => frame.startsWith('JS:'));
  if (js === undefined) {
    add(
      groups,
      KERNEL_LEAF.test(frames[0]) ? '(no JavaScript frame: kernel)' : '(no JavaScript frame: libuv, V8, Node C++)',
    );
    continue;
  }
  const { group, name } = origin(js);
  add(groups, group);
  if (name !== undefined) add(own, name);
}
if (total === 0) {
  console.error(`${file}: no samples (is it the output of perf script -F comm,tid,ip,sym?)`);
  process.exit(1);
}
const share = (count) => `${((100 * count) / total).toFixed(2).padStart(6)}%`;
console.log(`${total} samples`);
const sorted = [...groups].sort((a, b) => b[1] - a[1]);
const shown = sorted.filter(([, count]) => count / total >= 0.001);
for (const [group, count] of shown) console.log(`${share(count)}  ${group}`);
if (shown.length < sorted.length) console.log(`         (${sorted.length - shown.length} more under 0.1% each)`);
console.log("\nthe gateway's own functions (with the builtins, runtime calls and syscalls they make):");
for (const [name, count] of [...own].sort((a, b) => b[1] - a[1]).slice(0, Number(listed)))
  console.log(`${share(count)}  ${name}`);
