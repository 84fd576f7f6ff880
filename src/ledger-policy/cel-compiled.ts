// The common forms of a `where` condition (fields, indexes, comparisons, &&, ||, !, in, ?:, double(),
// size(), exists and all) as JavaScript closures over the decision document, for the values they
// expect: anything else (a missing key, an index out of range, a string compared with <, two
// numbers of different kinds) returns BAIL, and cel-js decides the condition as before, errors and
// all. The closures read the document's own parts, so the common case builds no CEL records. Kept
// because cel-js interprets a condition several times slower: docs/performance.md, "Ledger policy".
import type { DecisionDocument } from './document.js';

/** The closures' answer when the values are not the ones they handle: cel-js decides instead. */
export const BAIL: unique symbol = Symbol('cel-js decides');

/** A compiled node: its value on the document, with the macro variables (exists, all) by slot in `locals`. */
type Compiled = (document: DecisionDocument, locals: unknown[]) => unknown;

/** The part of cel-js's checked AST the compiler reads (lib/parser.js ASTNode). */
interface Node {
  readonly op: string;
  readonly args: unknown;
  readonly checkedType?: { readonly name: string; readonly kind?: string };
}

/** The document's variables read as they are (CelVariables builds records of the same values for cel-js). */
const ROOTS: Readonly<Record<string, (document: DecisionDocument) => unknown>> = {
  operation: (document) => document.operation,
  writes: (document) => document.writes,
  targetUserId: (document) => document.targetUserId,
  commandSource: (document) => document.commandSource,
  commands: (document) => document.commands,
  principal: (document) => document.principal,
  parties: (document) => document.parties,
};
/** The record types of the document (cel.ts): their fields are read as properties (getters included). */
const RECORDS: ReadonlySet<string> = new Set(['Command', 'Template', 'Principal', 'Parties']);

const isPlainObject = (value: unknown): value is Record<string, unknown> => {
  if (value === null || typeof value !== 'object') return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
};

/** A JSON key of a map or a dyn object, or BAIL (cel-js: no such key). */
function key(value: unknown, name: string): unknown {
  if (!isPlainObject(value) || !Object.hasOwn(value, name)) return BAIL;
  const found = value[name];
  return found === undefined ? BAIL : found;
}

/**
 * double() as cel-js gives it (lib/functions.js): a trimmed, non-empty text is Number(text) unless
 * that is NaN ("inf" and "nan" spelt otherwise than JavaScript does are left to cel-js).
 */
function toDouble(value: unknown): unknown {
  if (typeof value === 'number') return value;
  if (typeof value === 'bigint') return Number(value);
  if (typeof value !== 'string' || value === '' || value !== value.trim()) return BAIL;
  const parsed = Number(value);
  return Number.isNaN(parsed) ? BAIL : parsed;
}

/** Values CEL's == compares as JavaScript's === does: two of one primitive kind, or two nulls. */
const sameKind = (left: unknown, right: unknown) =>
  typeof left === typeof right && (left === null) === (right === null) && (typeof left !== 'object' || left === null);

function equals(left: unknown, right: unknown): unknown {
  if (left === BAIL || right === BAIL || !sameKind(left, right)) return BAIL;
  return left === right;
}

function compare(op: string, left: unknown, right: unknown): unknown {
  if (left === BAIL || right === BAIL) return BAIL;
  // Strings compare by code point in CEL, by UTF-16 unit here: left to cel-js, as mixed numbers are.
  if (!(
    (typeof left === 'number' && typeof right === 'number') ||
    (typeof left === 'bigint' && typeof right === 'bigint')
  ))
    return BAIL;
  const a = left as number;
  const b = right as number;
  return op === '<' ? a < b : op === '<=' ? a <= b : op === '>' ? a > b : a >= b;
}

function member(item: unknown, list: unknown): unknown {
  if (item === BAIL || !Array.isArray(list)) return BAIL;
  let found = false;
  for (const entry of list) {
    if (!sameKind(item, entry)) return BAIL;
    if (entry === item) found = true;
  }
  return found;
}

const bool = (value: unknown): value is boolean => typeof value === 'boolean';

/** exists (some item true) or all (no item false) over a list, the item in `slot`. */
function quantifier(all: boolean, list: Compiled, slot: number, predicate: Compiled): Compiled {
  return (document, locals) => {
    const items = list(document, locals);
    if (!Array.isArray(items)) return BAIL;
    // Every item is judged: one that cel-js would have to decide (an error) sends the whole condition there.
    let decided = all;
    for (const item of items) {
      locals[slot] = item;
      const holds = predicate(document, locals);
      if (!bool(holds)) return BAIL;
      if (holds !== all) decided = !all;
    }
    return decided;
  };
}

/** A step of a path: a record's field, a JSON key (of a map or a dyn object), a literal list index. */
type Step =
  | { readonly kind: 'record'; readonly name: string }
  | { readonly kind: 'key'; readonly name: string }
  | { readonly kind: 'index'; readonly at: number };

/** A literal, non-negative int index, as a number (read once, at load). */
const literalIndex = (node: Node): number | undefined =>
  node.op === 'value' && typeof node.args === 'bigint' && node.args >= 0n ? Number(node.args) : undefined;

/**
 * The value at the end of `steps` from `value`, or BAIL: a record without the field, an object
 * without the key, an index out of range or into what is not a list (a map's keys are strings: an
 * int literal names none), cel-js deciding each of these.
 */
function walk(value: unknown, steps: readonly Step[]): unknown {
  let found = value;
  for (const step of steps) {
    if (step.kind === 'index') {
      if (!Array.isArray(found) || step.at >= found.length) return BAIL;
      found = (found as unknown[])[step.at];
    } else if (step.kind === 'record') {
      if (found === BAIL || found === null || typeof found !== 'object') return BAIL;
      found = (found as Record<string, unknown>)[step.name];
      if (found === undefined) return BAIL;
    } else {
      found = key(found, step.name);
      if (found === BAIL) return BAIL;
    }
  }
  return found;
}

class Compiler {
  /** Macro variables in scope, innermost last: their slots in a call's `locals`. */
  private readonly scope: string[] = [];
  slots = 0;

  compile(node: Node): Compiled | undefined {
    const args = node.args as readonly unknown[];
    switch (node.op) {
      case 'value':
        return this.literal(node.args);
      case 'id':
        return this.variable(node.args as string);
      case 'list':
        return this.all(args as Node[], (items) => (document, locals) => {
          const values = items.map((item) => item(document, locals));
          return values.includes(BAIL) ? BAIL : values;
        });
      case '.':
        return this.path(node);
      case '[]':
        return literalIndex(args[1] as Node) === undefined
          ? this.index(args[0] as Node, args[1] as Node)
          : this.path(node);
      case '==':
      case '!=': {
        const negate = node.op === '!=';
        return this.all(args as Node[], ([left, right]) => (document, locals) => {
          const same = equals(left!(document, locals), right!(document, locals));
          return same === BAIL ? BAIL : same !== negate;
        });
      }
      case '<':
      case '<=':
      case '>':
      case '>=':
        return this.all(
          args as Node[],
          ([left, right]) =>
            (document, locals) =>
              compare(node.op, left!(document, locals), right!(document, locals)),
        );
      case 'in':
        return this.all(
          args as Node[],
          ([item, list]) =>
            (document, locals) =>
              member(item!(document, locals), list!(document, locals)),
        );
      default:
        return this.logic(node);
    }
  }

  /** `list[index]` with an index computed per call (a literal one is a step of a path). */
  private index(of: Node, at: Node): Compiled | undefined {
    return this.all([of, at], ([list, index]) => (document, locals) => {
      const value = list!(document, locals);
      const position = index!(document, locals);
      if (Array.isArray(value))
        return typeof position === 'bigint' && position >= 0n && position < value.length
          ? (value as unknown[])[Number(position)]
          : BAIL;
      return typeof position === 'string' ? key(value, position) : BAIL;
    });
  }

  /**
   * A chain of fields and literal indexes (`commands[0].createArguments.amount`) as one closure that
   * walks its steps, where each would otherwise be a closure of its own.
   */
  private path(node: Node): Compiled | undefined {
    const steps: Step[] = [];
    let at = node;
    for (;;) {
      const args = at.args as readonly Node[];
      if (at.op === '.') {
        const of = args[0]!;
        const name = args[1] as unknown as string;
        const record = of.checkedType !== undefined && RECORDS.has(of.checkedType.name);
        steps.push(record ? { kind: 'record', name } : { kind: 'key', name });
        at = of;
      } else if (at.op === '[]' && literalIndex(args[1]!) !== undefined) {
        steps.push({ kind: 'index', at: literalIndex(args[1]!)! });
        at = args[0]!;
      } else break;
    }
    const start = this.compile(at);
    if (start === undefined) return undefined;
    steps.reverse();
    return (document, locals) => walk(start(document, locals), steps);
  }

  private logic(node: Node): Compiled | undefined {
    const args = node.args as readonly Node[];
    switch (node.op) {
      case '&&':
      case '||': {
        const stopsOn = node.op === '||';
        return this.all(args, ([left, right]) => (document, locals) => {
          const first = left!(document, locals);
          if (!bool(first)) return BAIL;
          if (first === stopsOn) return first;
          const second = right!(document, locals);
          return bool(second) ? second : BAIL;
        });
      }
      case '!_':
        return this.all([node.args as Node], ([operand]) => (document, locals) => {
          const value = operand!(document, locals);
          return bool(value) ? !value : BAIL;
        });
      case '?:':
        return this.all(args, ([test, then, otherwise]) => (document, locals) => {
          const value = test!(document, locals);
          if (!bool(value)) return BAIL;
          return value ? then!(document, locals) : otherwise!(document, locals);
        });
      case 'call':
        return this.call(args[0] as unknown as string, args[1] as unknown as Node[]);
      case 'rcall':
        return this.method(args[0] as unknown as string, args[1]!, args[2] as unknown as Node[]);
      default:
        return undefined;
    }
  }

  private literal(value: unknown): Compiled | undefined {
    if (value !== null && !['string', 'number', 'bigint', 'boolean'].includes(typeof value)) return undefined;
    return () => value;
  }

  private variable(name: string): Compiled | undefined {
    const slot = this.scope.lastIndexOf(name);
    if (slot !== -1) return (document, locals) => locals[slot];
    const root = Object.hasOwn(ROOTS, name) ? ROOTS[name] : undefined;
    return root === undefined ? undefined : (document) => root(document);
  }

  private call(name: string, args: readonly Node[]): Compiled | undefined {
    const apply = name === 'double' ? toDouble : name === 'size' ? listSize : undefined;
    if (args.length !== 1 || apply === undefined) return undefined;
    return this.all(
      args,
      ([value]) =>
        (document, locals) =>
          apply(value!(document, locals)),
    );
  }

  private method(name: string, receiver: Node, args: readonly Node[]): Compiled | undefined {
    if (name === 'size' && args.length === 0)
      return this.all(
        [receiver],
        ([value]) =>
          (document, locals) =>
            listSize(value!(document, locals)),
      );
    if ((name !== 'exists' && name !== 'all') || args.length !== 2 || args[0]!.op !== 'id') return undefined;
    const list = this.compile(receiver);
    if (list === undefined) return undefined;
    const slot = this.scope.length;
    this.scope.push(args[0]!.args as string);
    this.slots = Math.max(this.slots, this.scope.length);
    const predicate = this.compile(args[1]!);
    this.scope.pop();
    return predicate === undefined ? undefined : quantifier(name === 'all', list, slot, predicate);
  }

  /** The closure over `nodes` compiled, when all of them compile. */
  private all(nodes: readonly Node[], make: (compiled: Compiled[]) => Compiled): Compiled | undefined {
    const compiled: Compiled[] = [];
    for (const node of nodes) {
      const one = this.compile(node);
      if (one === undefined) return undefined;
      compiled.push(one);
    }
    return make(compiled);
  }
}

const listSize = (value: unknown): unknown => (Array.isArray(value) ? BigInt(value.length) : BAIL);

/**
 * A checked condition's AST (cel-js `program.ast`, after its type check) as a closure over the
 * decision document: its value, or BAIL. Undefined when the condition uses what is not compiled here.
 */
export function compileToClosure(ast: unknown): ((document: DecisionDocument) => unknown) | undefined {
  const compiler = new Compiler();
  const compiled = compiler.compile(ast as Node);
  if (compiled === undefined) return undefined;
  const slots = compiler.slots;
  // A condition without macro variables needs no slots; one with them gets its own, so that nothing
  // of a call is kept past it.
  if (slots === 0) return (document) => compiled(document, NO_LOCALS);
  // Made as a literal: a list made by its length (new Array(n)) changes its kind of elements when
  // its first item is stored, at every call.
  if (slots === 1) return (document) => compiled(document, [undefined]);
  return (document) => compiled(document, Array.from({ length: slots }));
}

const NO_LOCALS: unknown[] = [];
