// Parsing a body holds the event loop while it runs: a worst 1 MiB body (arrays nested as deep as
// allowed, side by side) takes 0.1 to 0.2 s on an idle core, and eight finishing together, parsed back
// to back, held the loop 3.2 to 5.1 s, past the liveness probe's 2 s. So a large body is parsed in a
// turn of the event loop of its own, one at a time, and the loop is left to the other calls for twice
// as long as the parse took before the next: no other call waits longer than one parse, and a flood
// of large bodies takes at most about half the loop, the garbage collection their trees cost included. Turns go round the callers, so that one caller's bodies
// never queue another's behind all of theirs. A small body (a few milliseconds at worst) is parsed
// at once, as before: most calls never wait for a turn. The trees the turns leave are collected in
// the turn that passes a bound (body/collect.ts), so the pause counts in that turn.
import { eventLoopGarbage } from './collect.js';

/** Bodies up to this size are parsed at once; larger ones wait for a turn of their own. */
export const PARSED_AT_ONCE_BYTES = 64 * 1024;

type Job = () => void;

/** Each caller's parses waiting for a turn, in arrival order; callers in the order of their turns. */
const waiting = new Map<string, Job[]>();
let scheduled = false;

function runOne(): void {
  scheduled = false;
  const next = waiting.entries().next();
  if (next.done === true) return;
  const [caller, jobs] = next.value;
  const job = jobs.shift()!;
  waiting.delete(caller);
  if (jobs.length > 0) waiting.set(caller, jobs); // to the back of the round
  const started = performance.now();
  job();
  eventLoopGarbage().letGo(); // the tree just let go, collected in its turn (body/collect.ts)
  // The loop then gets twice as long as the parse took before the next one: large bodies, and the
  // garbage collection their trees cost after them, take at most about half of it, so the other calls
  // keep at least half their pace while a flood of them waits.
  schedule(2 * (performance.now() - started));
}

function schedule(pauseMs = 0): void {
  if (scheduled || waiting.size === 0) return;
  scheduled = true;
  if (pauseMs < 1) setImmediate(runOne);
  else setTimeout(runOne, pauseMs);
}

/**
 * Runs `parse` (a body of `bytes` bytes from `caller`: parsing it and everything that reads the
 * parsed tree, which must not outlive it) at once when the body is small, else in a turn of its own.
 */
export function parseInTurn<T>(caller: string, bytes: number, parse: () => T): T | Promise<T> {
  if (bytes <= PARSED_AT_ONCE_BYTES) return parse();
  return new Promise<T>((resolve, reject) => {
    const job = () => {
      try {
        resolve(parse());
      } catch (error) {
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    };
    const jobs = waiting.get(caller);
    if (jobs === undefined) waiting.set(caller, [job]);
    else jobs.push(job);
    schedule();
  });
}

/** Parses waiting for a turn now, all callers together. */
export function parsesWaiting(): number {
  let count = 0;
  for (const jobs of waiting.values()) count += jobs.length;
  return count;
}
