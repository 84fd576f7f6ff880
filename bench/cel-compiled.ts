// Micro-benchmark (not a test), paired: the two conditions of the 20-rule benchmark policy on a 1 KB
// submission's document, as the rules run them (compiled closures, src/ledger-policy/cel-compiled.ts)
// and as cel-js alone runs them (its program on the CEL input). Why the closures are kept:
// docs/performance.md, "Hand-made parts kept for speed". Run: npx vite-node bench/cel-compiled.ts [-- rounds ms]
// With --cold, each decision first touches 16 MiB of other memory, as a gateway's other calls do
// between two governed ones: the conditions' own time then (clock reads around them, fresh documents).
import { celInput, compileCondition, parseChecked } from '../src/ledger-policy/cel.js';
import { decisionDocument, principalFacts } from '../src/ledger-policy/build-document.js';
import type { DecisionDocument } from '../src/ledger-policy/document.js';
import { submitBody } from './requests.mjs';
import { pairedRounds, printTable } from './paired.js';

const positional = process.argv.slice(2).filter((argument) => !argument.startsWith('--'));
const ROUNDS = Number(positional[0] ?? 15);
const ROUND_MS = Number(positional[1] ?? 300);
const COLD = process.argv.includes('--cold');
const CONDITIONS = [
  'double(commands[0].createArguments.amount) < 1000.0',
  'commands.exists(c, c.createArguments.owner == "nobody")',
];

const principal = principalFacts(
  { subject: 'alice', issuer: 'https://idp', claims: { sub: 'alice' } },
  { clientAddress: '10.0.0.7' },
);
const text = submitBody();
const documentOf = () =>
  decisionDocument({
    operation: 'submitAndWaitForTransaction',
    writes: true,
    principal,
    body: JSON.parse(text) as unknown,
  });
const documents = Array.from({ length: 256 }, documentOf);

const compiled = CONDITIONS.map((expression) => {
  const condition = compileCondition(expression);
  if (typeof condition !== 'function') throw new Error(condition.problem);
  return condition;
});
const interpreted = CONDITIONS.map((expression) => {
  const checked = parseChecked(expression);
  if ('problem' in checked) throw new Error(checked.problem);
  return checked.program;
});

const variants = {
  // Each a decision's own input, as decide.ts builds it once per decision.
  'cel-js alone': (document: DecisionDocument) => {
    const input = celInput(document, Date.now());
    if (interpreted[0]!(input) !== true || interpreted[1]!(input) !== false) throw new Error('unexpected');
  },
  'compiled closures': (document: DecisionDocument) => {
    let input: object | undefined;
    const activation = { document, input: () => (input ??= celInput(document, Date.now())) };
    if (!compiled[0]!.on(activation) || compiled[1]!.on(activation)) throw new Error('unexpected');
  },
};

if (COLD) coldRounds();
else {
  let next = 0;
  const hot = Object.fromEntries(
    Object.entries(variants).map(([name, run]) => [name, () => run(documents[next++ & 255]!)]),
  );
  printTable(pairedRounds(hot, ROUNDS, ROUND_MS), 'cel-js alone');
}

/** Rounds of 500 cold decisions per variant, in turn: ns per decision, the median round. */
function coldRounds(): void {
  const other = new Float64Array((16 * 1024 * 1024) / 8);
  const rounds = new Map(Object.keys(variants).map((name) => [name, [] as number[]]));
  for (let round = 0; round < ROUNDS; round++)
    for (const [name, run] of Object.entries(variants)) {
      let total = 0n;
      for (let i = 0; i < 500; i++) {
        for (let j = 0; j < other.length; j += 8) other[j]! += 1;
        const document = documentOf();
        const started = process.hrtime.bigint();
        run(document);
        total += process.hrtime.bigint() - started;
      }
      rounds.get(name)!.push(Number(total) / 500);
    }
  for (const [name, values] of rounds) {
    const sorted = [...values].sort((a, b) => a - b);
    console.log(
      `${name}: ${Math.round(sorted[sorted.length >> 1]!)} ns per decision, cold (median of ${ROUNDS} rounds)`,
    );
  }
}
