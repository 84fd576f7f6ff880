// The commands of a call, from Canton's JSON shapes (openapi.yaml): JsCommands and Command (a submission),
// JsPrepareSubmissionRequest (prepare), ReassignmentCommands (reassignments), DisclosedContract.
import { templateRef, type CommandFacts, type CommandKind, type DecisionDocument } from './document.js';

type Json = Record<string, unknown>;

export const isObject = (value: unknown): value is Json =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** One empty list for every part a call does not have: a document's lists are never changed. */
export const NO_ENTRIES: never[] = Object.freeze([]) as unknown as never[];

/** The strings of a list (the list itself when it holds nothing else: a parsed body's, never changed). */
export function strings(value: unknown): string[] {
  if (!Array.isArray(value)) return NO_ENTRIES;
  for (const item of value) if (typeof item !== 'string') return value.filter((entry) => typeof entry === 'string');
  return value as string[];
}

/** Appends each value not '' and not already in `found` (a short list, the usual one, without a Set). */
export function addUnique(found: string[], values: readonly string[]): void {
  for (const value of values) if (value !== '' && !found.includes(value)) found.push(value);
}

/**
 * The values without '' and repeats, in first-seen order: `values` itself when it has none (the
 * builders hand over lists of their own), else a new list.
 */
export function unique(values: string[]): string[] {
  if (values.length > 8) return [...new Set(values)].filter((value) => value !== '');
  for (let i = 0; i < values.length; i++)
    if (values[i] === '' || values.indexOf(values[i]!, i + 1) !== -1) {
      const found: string[] = [];
      addUnique(found, values);
      return found;
    }
  return values;
}

export const text = (value: unknown): string => (typeof value === 'string' ? value : '');

const COMMAND_KINDS: ReadonlySet<string> = new Set([
  'CreateCommand',
  'ExerciseCommand',
  'CreateAndExerciseCommand',
  'ExerciseByKeyCommand',
]);

/** A oneof's variant: the object's first own key (Object.keys(value)[0] without the list). */
function firstKey(value: Json): string | undefined {
  for (const key in value) if (Object.hasOwn(value, key)) return key;
  return undefined;
}

/** One Command oneof (`{"ExerciseCommand": {...}}`, no `value` wrapper: Canton `JsCommandService.scala`). */
export function commandFacts(command: unknown): CommandFacts | undefined {
  if (!isObject(command)) return undefined;
  const kind = firstKey(command);
  const payload = kind === undefined ? undefined : command[kind];
  if (kind === undefined || !COMMAND_KINDS.has(kind) || !isObject(payload)) return undefined;
  return {
    kind: kind as CommandKind,
    template: templateRef(payload.templateId),
    choice: text(payload.choice),
    contractId: text(payload.contractId),
    createArguments: payload.createArguments ?? null,
    choiceArgument: payload.choiceArgument ?? null,
    contractKey: payload.contractKey ?? null,
    source: '',
    target: '',
  };
}

/** A ReassignmentCommand: `{"command": {"UnassignCommand": {"value": {...}}}}`. */
function reassignmentFacts(entry: unknown): CommandFacts | undefined {
  const command = isObject(entry) ? entry.command : undefined;
  if (!isObject(command)) return undefined;
  const kind = Object.keys(command)[0];
  const variant = kind === undefined ? undefined : command[kind];
  const payload = isObject(variant) && isObject(variant.value) ? variant.value : undefined;
  if ((kind !== 'AssignCommand' && kind !== 'UnassignCommand') || payload === undefined) return undefined;
  return {
    kind,
    template: undefined,
    choice: '',
    contractId: text(payload.contractId),
    createArguments: null,
    choiceArgument: null,
    contractKey: null,
    source: text(payload.source),
    target: text(payload.target),
  };
}

/**
 * What a command-bearing body says, or undefined when it is not one. A command the gateway cannot
 * read is kept as an `unreadable` count: the participant will refuse the call, the rules deny it.
 */
export interface CommandPart {
  /** Where the commands were read from: the JSON body, the prepared transaction, or nowhere. */
  readonly source: DecisionDocument['commandSource'];
  readonly commands: CommandFacts[];
  readonly unreadable: number;
  readonly actAs: string[];
  readonly readAs: string[];
  readonly submitter: string[];
  readonly userId: string;
  readonly disclosedContracts: DecisionDocument['disclosedContracts'];
}

/** The facts of each entry of a list that can be read (a list of their own, of their number), in order. */
function commandList(list: unknown, read: (entry: unknown) => CommandFacts | undefined): CommandFacts[] {
  if (!Array.isArray(list) || list.length === 0) return NO_ENTRIES;
  const found = list.map(read);
  return found.includes(undefined) ? found.filter((facts) => facts !== undefined) : (found as CommandFacts[]);
}

/** JsCommands, or the JsPrepareSubmissionRequest that carries the same fields at its top. */
export function jsCommandsPart(jsCommands: Json): CommandPart {
  const commands = commandList(jsCommands.commands, commandFacts);
  const disclosed = jsCommands.disclosedContracts;
  return {
    source: 'json',
    commands,
    unreadable: unreadableCount(jsCommands.commands, commands),
    actAs: strings(jsCommands.actAs),
    readAs: strings(jsCommands.readAs),
    submitter: NO_ENTRIES,
    userId: text(jsCommands.userId),
    disclosedContracts:
      !Array.isArray(disclosed) || disclosed.length === 0
        ? NO_ENTRIES
        : disclosed.filter(isObject).map((contract) => ({
            template: templateRef(contract.templateId),
            contractId: text(contract.contractId),
          })),
  };
}

/** How many entries of `list` could not be read as commands. */
const unreadableCount = (list: unknown, found: readonly CommandFacts[]) =>
  (Array.isArray(list) ? list.length : 0) - found.length;

/** ReassignmentCommands (SubmitReassignmentRequest.reassignmentCommands). */
export function reassignmentPart(reassignment: Json): CommandPart {
  const commands = commandList(reassignment.commands, reassignmentFacts);
  const submitter = text(reassignment.submitter);
  return {
    source: 'json',
    commands,
    unreadable: unreadableCount(reassignment.commands, commands),
    actAs: NO_ENTRIES,
    readAs: NO_ENTRIES,
    submitter: submitter === '' ? NO_ENTRIES : [submitter],
    userId: text(reassignment.userId),
    disclosedContracts: NO_ENTRIES,
  };
}
