// CPU time and resident memory of a process and its descendants, from /proc (Linux only).
import { readdirSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

let ticksPerSecond;
function clockTicks() {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** Fields after the `(comm)` of /proc/<pid>/stat (comm may hold spaces and parentheses). */
function statFields(pid) {
  const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return text.slice(text.lastIndexOf(')') + 2).split(' ');
}

/** The pid and every descendant (nginx's and HAProxy's workers are children of the master). */
export function processTree(root) {
  const children = new Map();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const parent = Number(statFields(name)[1]); // field 4: ppid
      if (!children.has(parent)) children.set(parent, []);
      children.get(parent).push(Number(name));
    } catch {
      /* exited meanwhile */
    }
  }
  const tree = [];
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.shift();
    tree.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return tree;
}

/** utime + stime of the tree, in seconds (all threads; not the children already reaped). */
export function cpuSeconds(root) {
  let ticks = 0;
  for (const pid of processTree(root)) {
    try {
      const fields = statFields(pid);
      ticks += Number(fields[11]) + Number(fields[12]); // fields 14 and 15: utime, stime
    } catch {
      /* exited meanwhile */
    }
  }
  return ticks / clockTicks();
}

/** VmRSS of the tree, in bytes. */
export function residentBytes(root) {
  let kib = 0;
  for (const pid of processTree(root)) {
    try {
      const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (match) kib += Number(match[1]);
    } catch {
      /* exited meanwhile */
    }
  }
  return kib * 1024;
}

/**
 * The machine's CPU time so far, from /proc/stat's `cpu` line (clock ticks): all of it, and what the
 * hypervisor took for other guests (steal). A VM whose host is busy loses time to steal, and every
 * figure of a run slows with it, the peers' too.
 */
export function machineCpuTicks() {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal (guest time is already in user)
    return { total: fields.slice(0, 8).reduce((sum, value) => sum + value, 0), steal: fields[7] ?? 0 };
  } catch {
    return undefined;
  }
}

/** The share of the machine's CPU time the hypervisor took between two machineCpuTicks() readings, in %. */
export function stealPercent(before, after) {
  if (before === undefined || after === undefined || after.total <= before.total) return undefined;
  return ((after.steal - before.steal) / (after.total - before.total)) * 100;
}

export function loadAverage() {
  try {
    return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number);
  } catch {
    return [];
  }
}

/** The busiest other processes right now (to say whether something else was running). */
export function busiestProcesses(count = 5) {
  try {
    return execFileSync('ps', ['-eo', 'pcpu,pid,comm,args', '--sort=-pcpu', '--no-headers'], { encoding: 'utf8' })
      .split('\n')
      .slice(0, count)
      .map((line) => line.trim().slice(0, 140))
      .filter((line) => line !== '');
  } catch {
    return [];
  }
}
