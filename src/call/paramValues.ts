// In charge of a parameter's value rules, shared by the save-time checks (paramRules.ts: defaults and
// enum members) and the per-call binder (binder.ts): the types, coercion of query-string text and of
// JSON values, and the checks (enum, min/max, lengths, pattern) with the contract's messages.
//
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
  /** The JWT claim the value comes from (never from the request). */
  from_claim?: string;
}

// A Map, so names like 'constructor' are not found on a prototype.
export const TYPES = new Map<string, Exclude<ParamType, null>>([
  ['int', 'integer'],
  ['integer', 'integer'],
  ['float', 'number'],
  ['number', 'number'],
  ['str', 'string'],
  ['string', 'string'],
  ['bool', 'boolean'],
  ['boolean', 'boolean'],
]);

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const TWO_POW_63 = 2 ** 63;
const INT_TEXT = /^[+-]?\d+$/;
const NUMBER_TEXT = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

// Coercion returns FAIL and leaves the message in `why`, so the per-call path allocates nothing for it.
export const FAIL: unique symbol = Symbol('invalid');
export type Coerced = unknown;
export let why = '';

export function fail(message: string): typeof FAIL {
  why = message;
  return FAIL;
}

export function isFiniteNumber(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** Sets an own property even for a name like `__proto__`. */
export function put(target: Record<string, unknown>, key: string, value: unknown): void {
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

/** No database here takes a NUL inside text the same way (PostgreSQL refuses it, others truncate or keep it). */
const NUL_MESSAGE = 'must not contain a NUL character';

function hasNul(s: string): boolean {
  return s.indexOf('\u0000') !== -1;
}

/** Query-string text to the declared type. */
export function coerceText(type: ParamType, text: string): Coerced {
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
          case 'true':
          case '1':
          case 'yes':
            return true;
          case 'false':
          case '0':
          case 'no':
            return false;
        }
      }
      return fail('must be true or false');
    default:
      return hasNul(text) ? fail(NUL_MESSAGE) : text; // string, or untyped: text as sent
  }
}

/** A JSON value, which must already have the declared type. */
export function coerceJson(type: ParamType, v: unknown): Coerced {
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
      return typeof v !== 'string' ? fail('must be text') : hasNul(v) ? fail(NUL_MESSAGE) : v;
    default:
      if (typeof v === 'string') return hasNul(v) ? fail(NUL_MESSAGE) : v;
      return isScalar(v) ? v : fail('must be text, a number or true/false');
  }
}

function isScalar(v: unknown): boolean {
  return typeof v === 'string' || typeof v === 'boolean' || isFiniteNumber(v) || typeof v === 'bigint';
}

/** Definitions (defaults, enum members) as the reference reads them: text is parsed, others must fit. */
export function coerceDefinition(type: ParamType, v: unknown): Coerced {
  return typeof v === 'string' ? coerceText(type, v) : coerceJson(type, v);
}

/** Python's format(x, 'g'): 6 significant digits, exponent form outside 1e-4 .. 1e6. */
export function formatG(x: number): string {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? 'nan' : x > 0 ? 'inf' : '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0' : '0';
  const e = x.toExponential(5);
  const at = e.indexOf('e');
  const exp = Number(e.slice(at + 1));
  if (exp < -4 || exp >= 6) {
    const digits = String(Math.abs(exp));
    return `${stripZeros(e.slice(0, at))}e${exp < 0 ? '-' : '+'}${digits.length < 2 ? `0${digits}` : digits}`;
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
export function compilePattern(pattern: string): RegExp | string {
  try {
    new RegExp(pattern, 'u');
    return new RegExp(`^(?:${pattern})$`, 'u');
  } catch {
    // not valid in Unicode mode (e.g. `\-` outside a class): accept it in legacy mode
  }
  try {
    new RegExp(pattern);
    return new RegExp(`^(?:${pattern})$`);
  } catch (error) {
    return (error as Error).message;
  }
}

/** A rule made ready for checking: regex compiled, enum and messages built once. */
export interface Check {
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

export function prepareCheck(rule: ParamRule, pattern: RegExp | null): Check {
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
    enumMessage: enumList ? `must be one of: ${(rule.enum as unknown[]).map((v) => String(v)).join(', ')}` : '',
    min: isFiniteNumber(rule.min) ? rule.min : undefined,
    max: isFiniteNumber(rule.max) ? rule.max : undefined,
    minMessage: isFiniteNumber(rule.min) ? `must be at least ${formatG(rule.min)}` : '',
    maxMessage: isFiniteNumber(rule.max) ? `must be at most ${formatG(rule.max)}` : '',
    minLength: typeof rule.min_length === 'number' ? rule.min_length : undefined,
    maxLength: typeof rule.max_length === 'number' ? rule.max_length : undefined,
    pattern,
    patternMessage: `must match the pattern ${rule.pattern ?? ''}`,
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
export function applyRules(check: Check, v: unknown): Coerced {
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
