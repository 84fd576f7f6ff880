// POST /v2/commands/submit-and-wait-for-transaction (Canton `JsCommandService.scala`). JsCommands is a strict
// hand-written mirror type: `commands`, `commandId`, `actAs` must be present; each command is one of
// four variants (no "value" wrapper); a template id must split into package:module:entity as
// Canton's IdentifierConverter splits it. Then, as the participant orders it: authorization (a
// user token may only submit as its own user), then validation (command_id, act_as, commands).
import { INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, readInteger } from '../numbers.js';
import {
  decodeFailure,
  field,
  isAbsent,
  isObject,
  join,
  missingField,
  missingRequired,
  optionalOfType,
  optionalStringArray,
  requestRule,
  oneofViolation,
  variantKeys,
  wrongType,
  type JsonObject,
  type RuleContext,
  type Violation,
} from '../violation.js';
import { decodeTransactionFormat, validateTransactionFormat } from './formats.js';
import { otherUserViolation } from './submitting-user.js';

/** Each command variant and the fields its JSON decoder requires. */
const COMMAND_FIELDS = {
  CreateCommand: ['templateId', 'createArguments'],
  ExerciseCommand: ['templateId', 'contractId', 'choice', 'choiceArgument'],
  CreateAndExerciseCommand: ['templateId', 'createArguments', 'choice', 'choiceArgument'],
  ExerciseByKeyCommand: ['templateId', 'contractKey', 'choice', 'choiceArgument'],
} as const;
type CommandVariant = keyof typeof COMMAND_FIELDS;
const COMMAND_VARIANTS = Object.keys(COMMAND_FIELDS) as CommandVariant[];
const STRING_FIELDS = new Set(['templateId', 'contractId', 'choice']);
const DEDUPLICATION_PERIODS = ['DeduplicationDuration', 'DeduplicationOffset', 'Empty'] as const;

/**
 * Canton's IdentifierConverter.fromJson: `split(":")` (Java: trailing empty parts dropped) must give
 * exactly three parts. Both `<packageId>:<Module>:<Entity>` and `#<package-name>:<Module>:<Entity>`
 * pass; what the parts name is the participant's to resolve.
 */
export function templateIdProblem(templateId: string): string | undefined {
  const parts = templateId.split(':');
  while (parts.length > 1 && parts[parts.length - 1] === '') parts.pop();
  if (parts.length !== 3) {
    return `Invalid identifier format (${templateId}) not matching the expected format (<package>:<moduleName>:<entityName>)`;
  }
  const [packageRef, moduleName, entityName] = parts as [string, string, string];
  if (packageRef === '' || packageRef === '#') return 'Expected a non-empty package reference';
  if (moduleName === '' || entityName === '') return 'Expected a non-empty string';
  return undefined;
}

function decodeCommand(variant: CommandVariant, payload: unknown, path: string): Violation | undefined {
  if (!isObject(payload)) return wrongType(path, 'an object', payload);
  for (const name of COMMAND_FIELDS[variant]) {
    const value = field(payload, name);
    if (value === undefined) return missingRequired(join(path, name));
    if (STRING_FIELDS.has(name) && typeof value !== 'string') return wrongType(join(path, name), 'a string', value);
  }
  const problem = templateIdProblem(field(payload, 'templateId') as string);
  return problem === undefined ? undefined : decodeFailure(problem, join(path, 'templateId'));
}

/** CommandsValidator: contract_id and choice must be non-empty. */
function validateCommand(variant: CommandVariant, payload: JsonObject): Violation | undefined {
  if (variant === 'ExerciseCommand' && field(payload, 'contractId') === '') return missingField('contract_id');
  if (variant !== 'CreateCommand' && field(payload, 'choice') === '') return missingField('choice');
  return undefined;
}

/** One command: accepted when any variant key present would be (the decoder picks one). */
function checkCommand(command: unknown, path: string, phase: 'decode' | 'validate'): Violation | undefined {
  if (!isObject(command)) return wrongType(path, 'an object', command);
  const present = variantKeys(command, COMMAND_VARIANTS);
  if (present.length === 0) return decodeFailure(`expected one of ${COMMAND_VARIANTS.join(', ')}`, path);
  return oneofViolation(present, (variant) => {
    const payload = command[variant];
    return (
      decodeCommand(variant, payload, join(path, variant)) ??
      (phase === 'validate' ? validateCommand(variant, payload as JsonObject) : undefined)
    );
  });
}

/** google.protobuf.Duration: seconds (int64) and nanos (int32), both optional. */
function decodeDuration(value: unknown, path: string, context: RuleContext): Violation | undefined {
  if (!isObject(value)) return wrongType(path, 'an object', value);
  for (const [name, min, max] of [
    ['seconds', INT64_MIN, INT64_MAX],
    ['nanos', INT32_MIN, INT32_MAX],
  ] as const) {
    const raw = field(value, name);
    if (isAbsent(raw)) continue;
    const reading = readInteger(raw, context.numberText(join(path, name)), min, max);
    if (!reading.ok) return decodeFailure(reading.reason, join(path, name));
  }
  return undefined;
}

function decodeDeduplicationPeriod(value: unknown, path: string, context: RuleContext): Violation | undefined {
  if (!isObject(value)) return wrongType(path, 'an object', value);
  const present = variantKeys(value, DEDUPLICATION_PERIODS);
  if (present.length === 0) return decodeFailure(`expected one of ${DEDUPLICATION_PERIODS.join(', ')}`, path);
  return oneofViolation(present, (variant) => decodeDeduplicationVariant(value, variant, join(path, variant), context));
}

/** One variant of a deduplication period: Empty, or an object whose `value` is a duration or an offset. */
function decodeDeduplicationVariant(
  value: JsonObject,
  variant: (typeof DEDUPLICATION_PERIODS)[number],
  variantPath: string,
  context: RuleContext,
): Violation | undefined {
  if (variant === 'Empty') return undefined;
  const payload = value[variant];
  if (!isObject(payload)) return wrongType(variantPath, 'an object', payload);
  const inner = field(payload, 'value');
  if (inner === undefined) return missingRequired(join(variantPath, 'value'));
  if (variant === 'DeduplicationDuration') return decodeDuration(inner, join(variantPath, 'value'), context);
  const reading = readInteger(inner, context.numberText(join(variantPath, 'value')), INT64_MIN, INT64_MAX);
  return reading.ok
    ? undefined
    : decodeFailure(`${reading.reason}; expected an offset (int64)`, join(variantPath, 'value'));
}

function decodeObjectArray(holder: JsonObject, name: string): Violation | undefined {
  const value = field(holder, name);
  if (isAbsent(value)) return undefined;
  const path = join('commands', name);
  if (!Array.isArray(value)) return wrongType(path, 'an array', value);
  const index = value.findIndex((entry) => !isObject(entry));
  return index === -1 ? undefined : wrongType(join(path, index), 'an object', value[index]);
}

/** What the JSON decoder refuses in JsCommands. */
function decodeCommands(commands: JsonObject, context: RuleContext): Violation | undefined {
  const list = field(commands, 'commands');
  if (isAbsent(list)) return missingRequired('commands.commands');
  if (!Array.isArray(list)) return wrongType('commands.commands', 'an array', list);
  for (const [index, command] of list.entries()) {
    const problem = checkCommand(command, `commands.commands[${index}]`, 'decode');
    if (problem !== undefined) return problem;
  }
  const commandId = field(commands, 'commandId');
  if (isAbsent(commandId)) return missingRequired('commands.commandId');
  if (typeof commandId !== 'string') return wrongType('commands.commandId', 'a string', commandId);
  const actAs = field(commands, 'actAs');
  if (isAbsent(actAs)) return missingRequired('commands.actAs');
  const typeProblem =
    optionalStringArray(commands, 'actAs', 'commands') ??
    optionalStringArray(commands, 'readAs', 'commands') ??
    optionalOfType(commands, 'userId', 'commands', 'string') ??
    optionalOfType(commands, 'workflowId', 'commands', 'string') ??
    optionalOfType(commands, 'submissionId', 'commands', 'string') ??
    optionalOfType(commands, 'synchronizerId', 'commands', 'string') ??
    optionalOfType(commands, 'minLedgerTimeAbs', 'commands', 'string') ??
    optionalStringArray(commands, 'packageIdSelectionPreference', 'commands') ??
    decodeObjectArray(commands, 'disclosedContracts') ??
    decodeObjectArray(commands, 'prefetchContractKeys');
  if (typeProblem !== undefined) return typeProblem;
  const minLedgerTimeRel = field(commands, 'minLedgerTimeRel');
  if (!isAbsent(minLedgerTimeRel)) {
    const problem = decodeDuration(minLedgerTimeRel, 'commands.minLedgerTimeRel', context);
    if (problem !== undefined) return problem;
  }
  const deduplication = field(commands, 'deduplicationPeriod');
  if (!isAbsent(deduplication)) {
    const problem = decodeDeduplicationPeriod(deduplication, 'commands.deduplicationPeriod', context);
    if (problem !== undefined) return problem;
  }
  const passes = field(commands, 'tapsMaxPasses');
  if (!isAbsent(passes)) {
    const reading = readInteger(passes, context.numberText('commands.tapsMaxPasses'), INT32_MIN, INT32_MAX);
    if (!reading.ok) return decodeFailure(`${reading.reason}; expected an integer (int32)`, 'commands.tapsMaxPasses');
  }
  return undefined;
}

/** The integers judged on their exact digits: durations, the deduplication offset, tapsMaxPasses. */
const EXACT_NUMBERS = [
  'commands.tapsMaxPasses',
  'commands.minLedgerTimeRel.seconds',
  'commands.minLedgerTimeRel.nanos',
  'commands.deduplicationPeriod.DeduplicationDuration.value.seconds',
  'commands.deduplicationPeriod.DeduplicationDuration.value.nanos',
  'commands.deduplicationPeriod.DeduplicationOffset.value',
];

export const submitAndWaitForTransactionRule = requestRule(EXACT_NUMBERS, (body, context): Violation | undefined => {
  if (!isObject(body)) return wrongType('', 'an object', body);

  // What the JSON decoder refuses.
  const commands = field(body, 'commands');
  if (isAbsent(commands)) return missingRequired('commands');
  if (!isObject(commands)) return wrongType('commands', 'an object', commands);
  const decodeProblem = decodeCommands(commands, context);
  if (decodeProblem !== undefined) return decodeProblem;
  const transactionFormat = field(body, 'transactionFormat');
  if (!isAbsent(transactionFormat)) {
    const problem = decodeTransactionFormat(transactionFormat, 'transactionFormat');
    if (problem !== undefined) return problem;
  }

  // Authorization: a user's token may only submit as that user (submitting-user.ts).
  const otherUser = otherUserViolation(field(commands, 'userId'), 'commands.userId', context);
  if (otherUser !== undefined) return otherUser;

  // CommandsValidator, in its order.
  if (field(commands, 'commandId') === '') return missingField('command_id');
  if ((field(commands, 'actAs') as unknown[]).length === 0) return missingField('party or act_as'); // Canton's CommandsValidator names it so
  const list = field(commands, 'commands') as unknown[];
  if (list.length === 0) return missingField('commands');
  for (const [index, command] of list.entries()) {
    const problem = checkCommand(command, `commands.commands[${index}]`, 'validate');
    if (problem !== undefined) return problem;
  }
  return isObject(transactionFormat) ? validateTransactionFormat(transactionFormat) : undefined;
});
