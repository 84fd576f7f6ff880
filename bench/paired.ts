// Paired micro-benchmark rounds (not a test): every variant runs in each round, in an order that
// rotates from round to round, so that a shared machine's noise falls on all of them alike; a ratio
// is the median over rounds of the two variants' ns/op in the same round.

export interface VariantResult {
  readonly name: string;
  /** ns per operation, each round. */
  readonly rounds: number[];
}

const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

function nsPerOperation(operation: () => void, ms: number): number {
  let count = 0;
  const started = process.hrtime.bigint();
  const deadline = started + BigInt(Math.round(ms * 1e6));
  let now = started;
  while (now < deadline) {
    // Batches keep the clock reads out of the measurement.
    for (let i = 0; i < 32; i++) operation();
    count += 32;
    now = process.hrtime.bigint();
  }
  return Number(now - started) / count;
}

export function pairedRounds(variants: Record<string, () => void>, rounds: number, roundMs: number): VariantResult[] {
  const entries = Object.entries(variants);
  for (const [, operation] of entries) nsPerOperation(operation, Math.min(roundMs, 200)); // warm-up: JIT, caches
  const results = entries.map(([name]) => ({ name, rounds: [] as number[] }));
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < entries.length; k++) {
      const index = (round + k) % entries.length;
      results[index]!.rounds.push(nsPerOperation(entries[index]![1], roundMs));
    }
  }
  return results;
}

/** Prints ns/op (median, min) per variant and its paired ratio to `reference`. */
export function printTable(results: readonly VariantResult[], reference: string): void {
  const base = results.find((result) => result.name === reference);
  if (base === undefined) throw new Error(`no variant ${reference}`);
  const rows = results.map((result) => ({
    variant: result.name,
    'median ns/op': Math.round(median(result.rounds)),
    'min ns/op': Math.round(Math.min(...result.rounds)),
    [`ratio to ${reference} (paired median)`]: median(result.rounds.map((ns, i) => ns / base.rounds[i]!)).toFixed(3),
  }));
  console.table(rows);
  console.log(`${results[0]!.rounds.length} rounds, node ${process.version}, ${new Date().toISOString()}`);
}
