// Micro-benchmark (not a test), paired: the CEL implementations on npm that the ledger policy could
// use, on the same conditions over the same decision document (as plain JSON, each library's own
// input form), plus what each can say before a condition runs (does it find a field the document
// lacks?). Run: npm run bench:cel [-- rounds ms-per-round]. The choice and the figures:
// docs/performance.md, "CEL".
import { Environment } from '@marcbachmann/cel-js';
import { celEnv, CelScalar, listType, mapType, parse as bufParse, plan } from '@bufbuild/cel';
import * as chromeCel from 'cel-js';
import { pairedRounds, printTable } from './paired.js';

const ROUNDS = Number(process.argv[2] ?? 15);
const ROUND_MS = Number(process.argv[3] ?? 300);

const ALICE = `Alice::1220${'a'.repeat(64)}`;
const CONDITIONS = [
  'parties.actAs.all(p, p == principal.claims.party)',
  'commands.exists(c, c.choice == "Transfer" && c.choiceArgument.newOwner == "nobody")',
];
const TYPO = 'commands.all(c, c.choise == "Transfer")';

/** The document's CEL variables as plain JSON. */
const plain = {
  principal: { subject: 'app', issuer: 'https://idp', claims: { party: ALICE } },
  parties: { actAs: [ALICE], readAs: [] as string[] },
  commands: [{ kind: 'ExerciseCommand', choice: 'Transfer', choiceArgument: { newOwner: ALICE, amount: '125.0' } }],
};

// @marcbachmann/cel-js: typed variables (cel-js checks list items by constructor: instances).
class Command {
  constructor(values: object) {
    Object.assign(this, values);
  }
}
class Principal extends Command {}
class Parties extends Command {}
const marc = new Environment()
  .registerType('Principal', {
    ctor: Principal,
    fields: { subject: 'string', issuer: 'string', claims: 'map<string, dyn>' },
  })
  .registerType('Parties', { ctor: Parties, fields: { actAs: 'list<string>', readAs: 'list<string>' } })
  .registerType('Command', { ctor: Command, fields: { kind: 'string', choice: 'string', choiceArgument: 'dyn' } })
  .registerVariable('principal', 'Principal')
  .registerVariable('parties', 'Parties')
  .registerVariable('commands', 'list<Command>');
const marcPrograms = CONDITIONS.map((condition) => marc.parse(condition));
const marcInput = () => ({
  principal: new Principal(plain.principal),
  parties: new Parties(plain.parties),
  commands: plain.commands.map((command) => new Command(command)),
});

// @bufbuild/cel: variables declared as maps and lists (its checker is not exported in 0.6.1).
const DYN_MAP = mapType(CelScalar.STRING, CelScalar.DYN);
const buf = celEnv({ variables: { principal: DYN_MAP, parties: DYN_MAP, commands: listType(DYN_MAP) } });
const bufPrograms = CONDITIONS.map((condition) => plan(buf, bufParse(condition)));

// cel-js (ChromeGG): parse once, evaluate the tree.
const chromePrograms = CONDITIONS.map((condition) => chromeCel.parse(condition)).map((parsed) => {
  if (!parsed.isSuccess) throw new Error('cel-js could not parse a condition');
  return parsed.cst;
});

const results = [
  ['@marcbachmann/cel-js 8.0.0', (): unknown[] => marcPrograms.map((program): unknown => program(marcInput()))],
  ['@bufbuild/cel 0.6.1', () => bufPrograms.map((program) => program(plain))],
  ['cel-js 0.8.2', () => chromePrograms.map((cst) => chromeCel.evaluate(cst, plain))],
] as const;
for (const [name, run] of results) {
  const values = run();
  if (JSON.stringify(values) !== '[true,false]') throw new Error(`${name} answered ${JSON.stringify(values)}`);
}

const typoFound = {
  '@marcbachmann/cel-js 8.0.0': !marc.check(TYPO).valid,
  '@bufbuild/cel 0.6.1': (() => {
    try {
      plan(buf, bufParse(TYPO));
      return false;
    } catch {
      return true;
    }
  })(),
  'cel-js 0.8.2': !chromeCel.parse(TYPO).isSuccess,
};
console.log('finds `c.choise` (a field the document lacks) before running:', typoFound);

const timings = pairedRounds(
  Object.fromEntries(results.map(([name, run]) => [name, () => void run()])),
  ROUNDS,
  ROUND_MS,
);
printTable(timings, '@marcbachmann/cel-js 8.0.0');
