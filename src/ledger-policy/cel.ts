// `where` conditions in CEL (the language of Kubernetes admission policies and Envoy RBAC), on
// @marcbachmann/cel-js: the decision document's fields are declared as CEL types, so a condition
// that names a field the document lacks, or compares a string to a number, is refused when the
// configuration is loaded, not when a call arrives (the choice and its measurements:
// docs/performance.md, "CEL").
import { Environment } from '@marcbachmann/cel-js';
import { BAIL, compileToClosure } from './cel-compiled.js';
import type { CommandFacts, DecisionDocument, TemplateRef } from './document.js';

const TEMPLATE_FIELDS = {
  templateId: 'string',
  packageId: 'string',
  packageName: 'string',
  moduleName: 'string',
  entityName: 'string',
} as const;

// cel-js checks a list item's type by its constructor: each document part is an instance of its own class.
class CelRecord {
  constructor(values: object) {
    Object.assign(this, values);
  }
}
class Template extends CelRecord {}
class Command extends CelRecord {}
class Disclosed extends CelRecord {}
class Principal extends CelRecord {}
class Parties extends CelRecord {}
class Read extends CelRecord {}
class Package extends CelRecord {}
class Right extends CelRecord {}

/** The CEL environment every condition is checked and run in: one per process, never changed after. */
const environment = new Environment({
  limits: { maxAstNodes: 2_000, maxDepth: 64, maxListElements: 1_000, maxMapEntries: 1_000, maxCallArguments: 32 },
})
  .registerType('Template', { ctor: Template, fields: TEMPLATE_FIELDS })
  .registerType('Command', {
    ctor: Command,
    fields: {
      kind: 'string',
      template: 'Template',
      choice: 'string',
      contractId: 'string',
      createArguments: 'dyn',
      choiceArgument: 'dyn',
      contractKey: 'dyn',
      source: 'string',
      target: 'string',
    },
  })
  .registerType('Disclosed', { ctor: Disclosed, fields: { template: 'Template', contractId: 'string' } })
  .registerType('Principal', {
    ctor: Principal,
    fields: {
      issuer: 'string',
      subject: 'string',
      userId: 'string',
      claims: 'map<string, dyn>',
      certificateSubject: 'string',
      certificateDnsNames: 'list<string>',
      clientAddress: 'string',
      consumer: 'string',
    },
  })
  .registerType('Parties', {
    ctor: Parties,
    fields: {
      actAs: 'list<string>',
      readAs: 'list<string>',
      submitter: 'list<string>',
      subjects: 'list<string>',
      all: 'list<string>',
    },
  })
  .registerType('Read', {
    ctor: Read,
    fields: {
      requested: 'bool',
      parties: 'list<string>',
      anyParty: 'bool',
      wildcard: 'bool',
      templates: 'list<Template>',
      interfaces: 'list<Template>',
    },
  })
  .registerType('Package', {
    ctor: Package,
    fields: { change: 'string', packageId: 'string', packageName: 'string', packageVersion: 'string' },
  })
  .registerType('Right', {
    ctor: Right,
    fields: { change: 'string', kind: 'string', party: 'string', identityProviderId: 'string' },
  })
  .registerVariable('operation', 'string')
  .registerVariable('writes', 'bool')
  .registerVariable('principal', 'Principal')
  .registerVariable('parties', 'Parties')
  .registerVariable('commands', 'list<Command>')
  .registerVariable('disclosedContracts', 'list<Disclosed>')
  .registerVariable('read', 'Read')
  .registerVariable('packages', 'list<Package>')
  .registerVariable('rights', 'list<Right>')
  .registerVariable('targetUserId', 'string')
  .registerVariable('commandSource', 'string')
  .registerVariable('now', 'google.protobuf.Timestamp');

/** A decision's document, and its CEL input, built by `input()` the first time cel-js has to run. */
export interface CelActivation {
  readonly document: DecisionDocument;
  input(): CelInput;
}

export interface CelCondition {
  (input: CelInput): boolean;
  /** The same on an activation: a compiled condition reads the document, and builds no CEL input. */
  readonly on: (activation: CelActivation) => boolean;
}

/** The document as the CEL environment reads it (celInput). */
export type CelInput = object;

/** The first line of a cel-js error (the rest repeats the expression with a caret). */
function firstLine(error: unknown): string {
  return String((error as Error).message ?? error).split('\n')[0]!;
}

type Problem = { readonly problem: string };

/** Parses and type-checks an expression against the decision document: its program and type, or why not. */
export function parseChecked(
  expression: string,
): { readonly program: ReturnType<typeof environment.parse>; readonly type: string | undefined } | Problem {
  let program: ReturnType<typeof environment.parse>;
  try {
    program = environment.parse(expression);
  } catch (error) {
    return { problem: `does not parse: ${firstLine(error)}` };
  }
  // The program's own tree checked: its nodes keep their types (what cel-compiled.ts reads).
  const checked = program.check();
  if (!checked.valid) return { problem: `does not type-check: ${firstLine(checked.error)}` };
  return { program, type: checked.type };
}

/** Compiles and type-checks a condition: a CelCondition, or why it cannot be one. */
export function compileCondition(expression: string): CelCondition | Problem {
  const checked = parseChecked(expression);
  if ('problem' in checked) return checked;
  if (checked.type !== 'bool') return { problem: `is of type ${checked.type}, not bool` };
  const { program } = checked;
  const compiled = compileToClosure(program.ast);
  if (compiled === undefined)
    return Object.assign((input: CelInput) => program(input) === true, {
      on: (activation: CelActivation) => program(activation.input()) === true,
    });
  return Object.assign(
    (input: CelInput) => {
      const value = compiled(documentOf(input));
      return value === BAIL ? program(input) === true : value === true;
    },
    {
      on: (activation: CelActivation) => {
        const value = compiled(activation.document);
        return value === BAIL ? program(activation.input()) === true : value === true;
      },
    },
  );
}

const EMPTY_TEMPLATE: Readonly<Record<keyof typeof TEMPLATE_FIELDS, string>> = {
  templateId: '',
  packageId: '',
  packageName: '',
  moduleName: '',
  entityName: '',
};

const templateValue = (template: TemplateRef | undefined) => new Template(template ?? EMPTY_TEMPLATE);

function commandValue(command: CommandFacts): Command {
  const value = new Command(command) as Command & { template: Template };
  value.template = templateValue(command.template);
  return value;
}

const NO_READ = { requested: false, parties: [], anyParty: false, wildcard: false, templates: [], interfaces: [] };

/**
 * The CEL variables of a document at `now` (absent parts as empty values, never null). cel-js reads
 * only the variables an expression names, so each is built the first time a condition reads it, then
 * kept for the other conditions of the decision: a policy whose conditions read `commands` never
 * builds the principal, the parties or the read.
 */
class CelVariables {
  #principal: Principal | undefined;
  #parties: Parties | undefined;
  #commands: Command[] | undefined;
  #disclosedContracts: Disclosed[] | undefined;
  #read: Read | undefined;
  #packages: Package[] | undefined;
  #rights: Right[] | undefined;

  #now: Date | undefined;

  /** `at`: the time, or its ms since the epoch (its Date made when a condition reads `now`). */
  constructor(
    private readonly document: DecisionDocument,
    private readonly at: Date | number,
  ) {}

  get now(): Date {
    return (this.#now ??= typeof this.at === 'number' ? new Date(this.at) : this.at);
  }

  /** The document itself, for a compiled condition (cel-compiled.ts); cel-js reads only the variables. */
  static documentOf(variables: CelVariables): DecisionDocument {
    return variables.document;
  }

  get operation() {
    return this.document.operation;
  }
  get writes() {
    return this.document.writes;
  }
  get targetUserId() {
    return this.document.targetUserId;
  }
  get commandSource() {
    return this.document.commandSource;
  }
  get principal() {
    return (this.#principal ??= new Principal(this.document.principal));
  }
  get parties() {
    if (this.#parties === undefined) {
      // Field by field: a call's parties find some of theirs when first read (build-document.ts).
      const { actAs, readAs, submitter, subjects, all } = this.document.parties;
      this.#parties = new Parties({ actAs, readAs, submitter, subjects, all });
    }
    return this.#parties;
  }
  get commands() {
    return (this.#commands ??= this.document.commands.map(commandValue));
  }
  get disclosedContracts() {
    return (this.#disclosedContracts ??= this.document.disclosedContracts.map(
      (contract) => new Disclosed({ template: templateValue(contract.template), contractId: contract.contractId }),
    ));
  }
  get read() {
    const read = this.document.read;
    return (this.#read ??= new Read(
      read === undefined
        ? NO_READ
        : {
            requested: true,
            ...read,
            templates: read.templates.map(templateValue),
            interfaces: read.interfaces.map(templateValue),
          },
    ));
  }
  get packages() {
    return (this.#packages ??= this.document.packages.map((pkg) => new Package(pkg)));
  }
  get rights() {
    return (this.#rights ??= this.document.rights.map((right) => new Right(right)));
  }
}

const documentOf = (input: CelInput) => CelVariables.documentOf(input as CelVariables);

/** The CEL variables of a document at `now` (a Date, or ms since the epoch). */
export function celInput(document: DecisionDocument, now: Date | number): CelInput {
  return new CelVariables(document, now);
}

/** What a budget's amount expression may give: a decimal (text or an int), or a list of them (summed). */
const AMOUNT_TYPES: ReadonlySet<string> = new Set([
  'string',
  'int',
  'uint',
  'dyn',
  'list',
  'list<string>',
  'list<int>',
  'list<uint>',
  'list<dyn>',
]);

/** An amount as a budget reads it: decimal text, a number (a JSON number read through dyn), or a list of them. */
export type CelAmount = string | number | readonly (string | number)[];

export type CelAmountExpression = (input: CelInput) => CelAmount | undefined;

/** A CEL value the budget reads as an amount; anything else is left as is for the budget to refuse. */
function amountValue(value: unknown): unknown {
  if (typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) return value.map(amountValue);
  return value;
}

/**
 * Compiles and type-checks a budget's amount (consumers.list[].budgets[].amount): a CelAmountExpression,
 * or why it cannot be one. A double is refused at load: an amount is never binary floating point.
 */
export function compileAmount(expression: string): CelAmountExpression | Problem {
  const checked = parseChecked(expression);
  if ('problem' in checked) return checked;
  if (checked.type === undefined || !AMOUNT_TYPES.has(checked.type))
    return { problem: `is of type ${checked.type}, not a decimal (string or int) or a list of them` };
  const { program } = checked;
  return (input) => amountValue(program(input)) as CelAmount | undefined;
}

/** A budget's measure (consumers/budget-config.ts AmountCompiler): its amount expression over a decision document. */
export function compileBudgetAmount(
  expression: string,
): ((document: object) => CelAmount | undefined) | { readonly problem: string } {
  const amount = compileAmount(expression);
  if (typeof amount !== 'function') return amount;
  return (document) => amount(celInput(document as DecisionDocument, new Date()));
}
