// In charge of a saved query's parameter rules: checking the definitions when a query is saved, and
// compiling them into the per-call binder that coerces, checks and orders the caller's values.
//
// Decisions where the contract is silent or the brief asked for a choice:
// - Error text follows the contract: "Invalid parameters: a must be an integer; b is required" (name,
//   space, message), with `errors` mapping each name to its message. Every violation is reported at once.
// - Code: `param_required` only when every problem is a missing value ("is required", or "must not be
//   null" for an explicit JSON null); any broken rule makes it `param_invalid`.
// - Undeclared placeholders are required and reported in the same error ("is required"), instead of the
//   reference's later, separate "No value provided for parameter(s)" error. A JSON value for one must be
//   a scalar or null ("must be text, a number or true/false").
// - Query-string text is parsed strictly, without trimming: integers `^[+-]?\d+$` (so '1.5', '1e3', ' 7',
//   '1_000' fail, unlike Python's int()), numbers as decimal literals, booleans true/1/yes/false/0/no in
//   any case. Integers outside signed 64-bit fail "must be a 64-bit integer".
// - An integer beyond ±(2^53-1) is bound as a bigint (every driver here takes one); smaller ones as numbers.
// - JSON values must already have their type (no "7" for an integer). JSON can't tell 1 from 1.0, so 1.0
//   counts as an integer, and a JSON number rounded to 2^63 is refused even if the text was 2^63-1.
// - An explicit JSON null for an optional parameter binds NULL, even when it has a default (as the reference).
// - Numbers in messages use Python's `:g` formatting (6 significant digits), as the reference prints them.
// - `from_claim` is refused at save time: JWT sign-in is not built, and accepting the rule without
//   enforcing it would let a request set a value meant to come from a token.
// - Lengths count code points, as Python's len() does. Patterns are JavaScript regular expressions
//   (Unicode mode when they compile in it), anchored for a full match.

import { CallError } from './errors.js';

export type ParamType = 'integer' | 'number' | 'string' | 'boolean' | null;

export interface ParamRule {
  type: ParamType;
  required: boolean;
  default?: unknown;
  enum?: unknown[];
  min?: number;
  max?: number;
  min_length?: number;
  max_length?: number;
  pattern?: string;
  description?: string;
}

/** Where a call's values come from: query-string text, or a JSON body's already-typed values. */
export type ParamSource =
  | { kind: 'query'; get(name: string): string | undefined }
  | { kind: 'json'; get(name: string): unknown };

/** Values in placeholder order (one per distinct placeholder), or throws CallError. */
export type Binder = (source: ParamSource) => unknown[];

export const MAX_PATTERN_LENGTH = 500;
const NAME_RE = /^[A-Za-z_]\w*$/;
// A Map, so names like 'constructor' are not found on a prototype.
const TYPES = new Map<string, Exclude<ParamType, null>>([
  ['int', 'integer'],
  ['integer', 'integer'],
  ['float', 'number'],
  ['number', 'number'],
  ['str', 'string'],
  ['string', 'string'],
  ['bool', 'boolean'],
  ['boolean', 'boolean'],
]);
const RULE_KEYS = new Set([
  'type', 'required', 'default', 'enum', 'min', 'max', 'min_length', 'max_length', 'pattern', 'description',
]);
const ALLOWED_RULES = [...RULE_KEYS].sort().join(', ');

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const TWO_POW_63 = 2 ** 63;
const INT_TEXT = /^[+-]?\d+$/;
const NUMBER_TEXT = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

// Coercion returns FAIL and leaves the message in `why`, so the per-call path allocates nothing for it.
const FAIL: unique symbol = Symbol('invalid');
type Coerced = unknown;
let why = '';

function fail(message: string): typeof FAIL {
  why = message;
  return FAIL;
}

function isFiniteNumber(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** Sets an own property even for a name like `__proto__`. */
function put(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

function bigintToBound(b: bigint): number | bigint | typeof FAIL {
  if (b < INT64_MIN || b > INT64_MAX) return fail('must be a 64-bit integer');
  return b >= -9007199254740991n && b <= 9007199254740991n ? Number(b) : b;
}

function parseIntText(text: string): Coerced {
  if (!INT_TEXT.test(text)) return fail('must be an integer');
  // 15 characters (sign included) can't exceed 2^53, so Number() is exact there.
  return text.length <= 15 ? Number(text) : bigintToBound(BigInt(text));
}

/** Query-string text to the declared type. */
function coerceText(type: ParamType, text: string): Coerced {
  switch (type) {
    case 'integer':
      return parseIntText(text);
    case 'number': {
      if (!NUMBER_TEXT.test(text)) return fail('must be a number');
      const n = Number(text);
      return Number.isFinite(n) ? n : fail('must be a number'); // 1e999
    }
    case 'boolean':
      if (text.length <= 5) {
        switch (text.toLowerCase()) {
          case 'true': case '1': case 'yes': return true;
          case 'false': case '0': case 'no': return false;
        }
      }
      return fail('must be true or false');
    default:
      return text; // string, or untyped: text as sent
  }
}

/** A JSON value, which must already have the declared type. */
function coerceJson(type: ParamType, v: unknown): Coerced {
  switch (type) {
    case 'integer':
      if (typeof v === 'number') {
        if (!Number.isInteger(v)) return fail('must be an integer');
        if (v >= TWO_POW_63 || v < -TWO_POW_63) return fail('must be a 64-bit integer');
        return Number.isSafeInteger(v) ? v : BigInt(v);
      }
      if (typeof v === 'bigint') return bigintToBound(v);
      return fail('must be an integer'); // booleans included
    case 'number':
      if (isFiniteNumber(v)) return v;
      if (typeof v === 'bigint') return Number(v);
      return fail('must be a number');
    case 'boolean':
      return typeof v === 'boolean' ? v : fail('must be true or false');
    case 'string':
      return typeof v === 'string' ? v : fail('must be text');
    default:
      return isScalar(v) ? v : fail('must be text, a number or true/false');
  }
}

function isScalar(v: unknown): boolean {
  return typeof v === 'string' || typeof v === 'boolean' || isFiniteNumber(v) || typeof v === 'bigint';
}

/** Definitions (defaults, enum members) as the reference reads them: text is parsed, others must fit. */
function coerceDefinition(type: ParamType, v: unknown): Coerced {
  return typeof v === 'string' ? coerceText(type, v) : coerceJson(type, v);
}

/** Python's format(x, 'g'): 6 significant digits, exponent form outside 1e-4 .. 1e6. */
export function formatG(x: number): string {
  if (!Number.isFinite(x)) return x !== x ? 'nan' : x > 0 ? 'inf' : '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0' : '0';
  const e = x.toExponential(5);
  const at = e.indexOf('e');
  const exp = Number(e.slice(at + 1));
  if (exp < -4 || exp >= 6) {
    const digits = String(Math.abs(exp));
    return stripZeros(e.slice(0, at)) + 'e' + (exp < 0 ? '-' : '+') + (digits.length < 2 ? '0' + digits : digits);
  }
  return stripZeros(x.toFixed(5 - exp));
}

function stripZeros(s: string): string {
  if (s.indexOf('.') === -1) return s;
  let end = s.length;
  while (s.charCodeAt(end - 1) === 0x30) end--;
  if (s.charCodeAt(end - 1) === 0x2e) end--;
  return s.slice(0, end);
}

function codePointLength(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

/** The full-match regex for a pattern, or an error text. The pattern must compile on its own first,
 *  so wrapping it in `^(?:...)$` can't change its meaning. */
function compilePattern(pattern: string): RegExp | string {
  try {
    new RegExp(pattern, 'u');
    return new RegExp('^(?:' + pattern + ')$', 'u');
  } catch {
    // not valid in Unicode mode (e.g. `\-` outside a class): accept it in legacy mode
  }
  try {
    new RegExp(pattern);
    return new RegExp('^(?:' + pattern + ')$');
  } catch (error) {
    return (error as Error).message;
  }
}

// ---------------------------------------------------------------------------------------------------
// The checks shared by save-time validation (defaults) and the binder
// ---------------------------------------------------------------------------------------------------

/** A rule made ready for checking: regex compiled, enum and messages built once. */
interface Check {
  type: ParamType;
  enumSet: Set<unknown> | null;
  enumList: unknown[] | null;
  enumMessage: string;
  min: number | undefined;
  max: number | undefined;
  minMessage: string;
  maxMessage: string;
  minLength: number | undefined;
  maxLength: number | undefined;
  pattern: RegExp | null;
  patternMessage: string;
}

function prepareCheck(rule: ParamRule, pattern: RegExp | null): Check {
  let enumList: unknown[] | null = null;
  if (Array.isArray(rule.enum) && rule.enum.length) {
    enumList = rule.enum.map((v) => {
      const c = coerceDefinition(rule.type, v);
      return c === FAIL ? v : c;
    });
  }
  return {
    type: rule.type,
    enumSet: enumList && new Set(enumList),
    enumList,
    enumMessage: enumList ? 'must be one of: ' + (rule.enum as unknown[]).map((v) => String(v)).join(', ') : '',
    min: isFiniteNumber(rule.min) ? rule.min : undefined,
    max: isFiniteNumber(rule.max) ? rule.max : undefined,
    minMessage: isFiniteNumber(rule.min) ? 'must be at least ' + formatG(rule.min) : '',
    maxMessage: isFiniteNumber(rule.max) ? 'must be at most ' + formatG(rule.max) : '',
    minLength: typeof rule.min_length === 'number' ? rule.min_length : undefined,
    maxLength: typeof rule.max_length === 'number' ? rule.max_length : undefined,
    pattern,
    patternMessage: 'must match the pattern ' + (rule.pattern ?? ''),
  };
}

function inEnum(check: Check, v: unknown): boolean {
  if (check.enumSet!.has(v)) return true;
  // a bigint and a number of the same value are different Set keys
  if (typeof v === 'bigint') for (const e of check.enumList!) if (typeof e === 'number' && BigInt(e) === v) return true;
  if (typeof v === 'number') for (const e of check.enumList!) if (typeof e === 'bigint' && e === BigInt(v)) return true;
  return false;
}

/** Rules after coercion, in the reference's order; the first broken one is reported. */
function applyRules(check: Check, v: unknown): Coerced {
  if (check.enumSet !== null && !inEnum(check, v)) return fail(check.enumMessage);
  const t = typeof v;
  if (t === 'number' || t === 'bigint') {
    if (check.min !== undefined && (v as number) < check.min) return fail(check.minMessage);
    if (check.max !== undefined && (v as number) > check.max) return fail(check.maxMessage);
  } else if (t === 'string') {
    const s = v as string;
    if (check.minLength !== undefined || check.maxLength !== undefined) {
      const n = codePointLength(s);
      if (check.minLength !== undefined && n < check.minLength) {
        return fail(`must be at least ${check.minLength} characters long`);
      }
      if (check.maxLength !== undefined && n > check.maxLength) {
        return fail(`must be at most ${check.maxLength} characters long`);
      }
    }
    if (check.pattern !== null && !check.pattern.test(s)) return fail(check.patternMessage);
  }
  return v;
}

// ---------------------------------------------------------------------------------------------------
// Save time
// ---------------------------------------------------------------------------------------------------

/**
 * Checks a saved query's `parameters` map. `placeholders` are the SQL's marker names; every declared
 * parameter must be one of them. Returns the rules in long form (type names `integer`, `number`,
 * `string`, `boolean` or null) and, per bad name, what is wrong. `input` null/undefined means none.
 */
export function normalizeParameters(
  input: unknown,
  placeholders: string[],
): { rules: Record<string, ParamRule>; errors: Record<string, string> } {
  const rules: Record<string, ParamRule> = {};
  const errors: Record<string, string> = {};
  if (input === null || input === undefined) return { rules, errors };
  if (!isPlainObject(input)) {
    errors.parameters = 'must be a JSON object';
    return { rules, errors };
  }
  const used = new Set(placeholders);
  for (const name of Object.keys(input)) {
    if (!NAME_RE.test(name)) {
      put(errors, name, 'is not a valid parameter name (letters, digits and underscores; not starting with a digit)');
      continue;
    }
    const rule = parseRule(input[name]);
    if (typeof rule === 'string') put(errors, name, rule);
    else if (!used.has(name)) put(errors, name, 'is declared but not used in the SQL');
    else put(rules, name, rule);
  }
  return { rules, errors };
}

/** One definition (a type name or an object of rules) to a rule, or the message completing "<name> ...". */
function parseRule(spec: unknown): ParamRule | string {
  if (typeof spec === 'string') spec = { type: spec };
  if (!isPlainObject(spec)) return "must be a type name such as 'int' or an object of rules";
  const unknown = Object.keys(spec).filter((k) => !RULE_KEYS.has(k)).sort();
  if (unknown.length) return `has unknown rule(s): ${unknown.join(', ')} (allowed: ${ALLOWED_RULES})`;

  let type: ParamType = null;
  if (spec.type !== null && spec.type !== undefined) {
    const long = TYPES.get(String(spec.type).toLowerCase());
    if (long === undefined) return `has unknown type '${String(spec.type)}' (use int, float, str or bool)`;
    type = long;
  }
  const rule: ParamRule = { type, required: true };
  const has = (key: string): boolean => Object.prototype.hasOwnProperty.call(spec, key);

  if (has('required')) {
    if (typeof spec.required !== 'boolean') return "'required' must be true or false";
    rule.required = spec.required;
  } else if (has('default')) {
    rule.required = false;
  }
  if (has('description') && typeof spec.description !== 'string') return "'description' must be text";

  const numeric = type === null || type === 'integer' || type === 'number';
  const textual = type === null || type === 'string';
  for (const key of ['min', 'max'] as const) {
    if (!has(key)) continue;
    if (!numeric) return `'${key}' only applies to numbers (use min_length/max_length for text)`;
    if (!isFiniteNumber(spec[key])) return `'${key}' must be a number`;
  }
  if (has('min') && has('max') && (spec.min as number) > (spec.max as number)) {
    return "'min' must not be greater than 'max'";
  }
  for (const key of ['min_length', 'max_length'] as const) {
    if (!has(key)) continue;
    if (!textual) return `'${key}' only applies to text`;
    const v = spec[key];
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) return `'${key}' must be a non-negative integer`;
  }
  if (has('min_length') && has('max_length') && (spec.min_length as number) > (spec.max_length as number)) {
    return "'min_length' must not be greater than 'max_length'";
  }
  let pattern: RegExp | null = null;
  if (has('pattern')) {
    if (!textual) return "'pattern' only applies to text";
    if (typeof spec.pattern !== 'string' || spec.pattern.length > MAX_PATTERN_LENGTH) {
      return `'pattern' must be text of at most ${MAX_PATTERN_LENGTH} characters`;
    }
    const compiled = compilePattern(spec.pattern);
    if (typeof compiled === 'string') return `'pattern' is not a valid regular expression (${compiled})`;
    pattern = compiled;
  }
  let enumValues: unknown[] | undefined;
  if (has('enum')) {
    if (!Array.isArray(spec.enum) || spec.enum.length === 0) return "'enum' must be a non-empty list";
    enumValues = [];
    for (const v of spec.enum) {
      const c = coerceDefinition(type, v);
      if (c === FAIL) return `has an 'enum' value that ${why}`;
      enumValues.push(storable(c, v));
    }
  }
  // Fields in the order the API returns them.
  if (has('default')) {
    if (spec.required === true) return "cannot be both 'required' and have a 'default'";
    let c = coerceDefinition(type, spec.default); // a null default fails here, as it should
    if (c !== FAIL) {
      const check = prepareCheck({ type, required: false, enum: enumValues, min: spec.min as number | undefined,
        max: spec.max as number | undefined, min_length: spec.min_length as number | undefined,
        max_length: spec.max_length as number | undefined, pattern: spec.pattern as string | undefined }, pattern);
      c = applyRules(check, c);
    }
    if (c === FAIL) return `has a 'default' that ${why}`;
    rule.default = storable(c, spec.default);
  }
  if (enumValues) rule.enum = enumValues;
  if (has('min')) rule.min = spec.min as number;
  if (has('max')) rule.max = spec.max as number;
  if (has('min_length')) rule.min_length = spec.min_length as number;
  if (has('max_length')) rule.max_length = spec.max_length as number;
  if (has('pattern')) rule.pattern = spec.pattern as string;
  if (has('description')) rule.description = spec.description as string;
  return rule;
}

/** Rules are stored as JSON, which has no bigint: keep the value as given; the binder converts it again. */
function storable(coerced: unknown, given: unknown): unknown {
  return typeof coerced === 'bigint' ? given : coerced;
}

/** A rule as the API returns it: type (long name or null), required, then only the fields present. */
export function toPublicRule(rule: ParamRule): Record<string, unknown> {
  const out: Record<string, unknown> = { type: rule.type ?? null, required: rule.required };
  if (rule.default !== undefined) out.default = rule.default;
  if (rule.enum !== undefined) out.enum = rule.enum;
  if (rule.min !== undefined) out.min = rule.min;
  if (rule.max !== undefined) out.max = rule.max;
  if (rule.min_length !== undefined) out.min_length = rule.min_length;
  if (rule.max_length !== undefined) out.max_length = rule.max_length;
  if (rule.pattern !== undefined) out.pattern = rule.pattern;
  if (rule.description !== undefined) out.description = rule.description;
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Call time
// ---------------------------------------------------------------------------------------------------

interface Slot {
  name: string;
  /** Index in the placeholders, i.e. in the binder's output. */
  pos: number;
  declared: boolean;
  required: boolean;
  hasDefault: boolean;
  defaultValue: unknown;
  check: Check | null;
}

/**
 * A stored definition read leniently, as the reference does at run time: normalised rules and short
 * forms ("int") both work; anything unusable degrades to an untyped required parameter.
 */
function readRule(spec: unknown): ParamRule {
  const rule = parseRule(spec);
  if (typeof rule !== 'string') return rule;
  if (isPlainObject(spec) && typeof spec.pattern === 'string') {
    // keep a pattern that no longer compiles, so it fails closed below instead of being dropped
    return { type: TYPES.get(String(spec.type).toLowerCase()) ?? null, required: spec.required !== false, pattern: spec.pattern };
  }
  return { type: (typeof spec === 'string' && TYPES.get(spec.toLowerCase())) || null, required: true };
}

/** A pattern that never matches: a stored pattern that no longer compiles fails closed. */
const NEVER = /(?!)/;

/**
 * Compiles the rules for one saved-query version into the per-call binder. `rules` are normally what
 * normalizeParameters returned; stored definitions are also read leniently (see readRule). The binder
 * returns one value per placeholder, in placeholder order; rules for names the SQL does not use are
 * ignored. Throws
 * CallError param_required / param_invalid listing every problem (declared names in rule order first,
 * then undeclared placeholders in SQL order).
 */
export function compileBinder(placeholders: string[], rules: Record<string, ParamRule> | null | undefined): Binder {
  const positions = new Map<string, number>();
  placeholders.forEach((name, pos) => {
    if (!positions.has(name)) positions.set(name, pos);
  });
  const slots: Slot[] = [];
  const definitions: Record<string, unknown> = isPlainObject(rules) ? rules : {};
  for (const name of Object.keys(definitions)) {
    const pos = positions.get(name);
    if (pos === undefined) continue;
    const rule = readRule(definitions[name]);
    const type: ParamType = rule.type;
    let pattern: RegExp | null = null;
    if (typeof rule.pattern === 'string') {
      const compiled = compilePattern(rule.pattern);
      pattern = typeof compiled === 'string' ? NEVER : compiled;
    }
    const hasDefault = rule.default !== undefined && rule.default !== null;
    let defaultValue: unknown = null;
    if (hasDefault) {
      const c = coerceDefinition(type, rule.default);
      defaultValue = c === FAIL ? rule.default : c;
    }
    slots.push({
      name,
      pos,
      declared: true,
      required: rule.required !== false,
      hasDefault,
      defaultValue,
      check: prepareCheck(rule, pattern),
    });
    positions.delete(name);
  }
  for (const [name, pos] of positions) {
    slots.push({ name, pos, declared: false, required: true, hasDefault: false, defaultValue: null, check: null });
  }
  const width = placeholders.length;
  const count = slots.length;

  return function bind(source: ParamSource): unknown[] {
    const out = new Array<unknown>(width);
    const json = source.kind === 'json';
    let errors: Record<string, string> | null = null;
    let onlyMissing = true;
    for (let i = 0; i < count; i++) {
      const slot = slots[i];
      const raw: unknown = source.get(slot.name);
      let value: unknown;
      if (raw === undefined) {
        if (slot.hasDefault) value = slot.defaultValue;
        else if (slot.required) {
          put((errors ??= {}), slot.name, 'is required');
          continue;
        } else value = null;
      } else if (raw === null) {
        if (slot.required && slot.declared) {
          put((errors ??= {}), slot.name, 'must not be null');
          continue;
        }
        value = null;
      } else {
        const check = slot.check;
        if (check === null) {
          // undeclared: passed through as sent, but a JSON object or array can't be bound
          value = json ? coerceJson(null, raw) : raw;
        } else {
          value = json ? coerceJson(check.type, raw) : coerceText(check.type, raw as string);
          if (value !== FAIL) value = applyRules(check, value);
        }
        if (value === FAIL) {
          put((errors ??= {}), slot.name, why);
          onlyMissing = false;
          continue;
        }
      }
      out[slot.pos] = value;
    }
    if (errors !== null) throw invalid(errors, onlyMissing);
    return out;
  };
}

function invalid(errors: Record<string, string>, onlyMissing: boolean): CallError {
  let message = 'Invalid parameters: ';
  let first = true;
  for (const name of Object.keys(errors)) {
    message += (first ? '' : '; ') + name + ' ' + errors[name];
    first = false;
  }
  return new CallError(onlyMissing ? 'param_required' : 'param_invalid', message, { errors });
}
