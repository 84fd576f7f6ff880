// Micro-benchmark (not a test), paired: the two conditions of the 20-rule benchmark policy on a 1 KB
// submission's document, as the rules run them (compiled closures, src/ledger-policy/cel-compiled.ts)
// and as cel-js alone runs them (its program on the CEL input). Why the closures are kept:
// docs/performance.md, "Hand-made parts kept for speed". Run: npx vite-node bench/cel-compiled.ts [-- rounds ms]
import { celInput, compileCondition, parseChecked } from '../src/ledger-policy/cel.js';
import { decisionDocument, principalFacts } from '../src/ledger-policy/build-document.js';
import { submitBody } from './requests.mjs';
import { pairedRounds, printTable } from './paired.js';

const ROUNDS = Number(process.argv[2] ?? 15);
const ROUND_MS = Number(process.argv[3] ?? 300);
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

let next = 0;
const results = pairedRounds(
  {
    // Each a decision's own input, as decide.ts builds it once per decision.
    'cel-js alone': () => {
      const input = celInput(documents[next++ & 255]!, Date.now());
      if (interpreted[0]!(input) !== true || interpreted[1]!(input) !== false) throw new Error('unexpected');
    },
    'compiled closures': () => {
      const document = documents[next++ & 255]!;
      let input: object | undefined;
      const activation = { document, input: () => (input ??= celInput(document, Date.now())) };
      if (!compiled[0]!.on(activation) || compiled[1]!.on(activation)) throw new Error('unexpected');
    },
  },
  ROUNDS,
  ROUND_MS,
);
printTable(results, 'cel-js alone');
