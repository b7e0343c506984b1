// In charge of a saved query's parameter definitions at save time: each name and rule checked, the
// rules put in their long form (what the store keeps), and a rule as the API returns it.
import {
  applyRules,
  coerceDefinition,
  compilePattern,
  FAIL,
  isFiniteNumber,
  isPlainObject,
  prepareCheck,
  put,
  TYPES,
  why,
  type ParamRule,
  type ParamType,
} from './paramValues.js';

export const MAX_PATTERN_LENGTH = 500;
const NAME_RE = /^[A-Za-z_]\w*$/;
const RULE_KEYS = new Set(['type', 'required', 'default', 'enum', 'min', 'max', 'min_length', 'max_length', 'pattern', 'description', 'from_claim']);
const MAX_CLAIM_LENGTH = 200;
const ALLOWED_RULES = [...RULE_KEYS].sort().join(', ');

/** What normalizeParameters finds: the rules in long form, and per bad name what is wrong. */
export interface NormalizedParameters {
  rules: Record<string, ParamRule>;
  /** Per name, the message completing "<name> ..." (the SQL's markers and the declared names alike). */
  errors: Record<string, string>;
  /** Markers of the SQL that no definition declares, in order of first use. */
  undeclared: string[];
  /** Declared names the SQL never uses, in declaration order. */
  unused: string[];
}

/**
 * Checks a saved query's `parameters` map against `placeholders`, the SQL's marker names: every
 * marker must be declared and every declared parameter used. Returns the rules in long form (type
 * names `integer`, `number`, `string`, `boolean` or null) and, per bad name, what is wrong.
 * `input` null/undefined means none declared.
 */
export function normalizeParameters(input: unknown, placeholders: string[]): NormalizedParameters {
  const rules: Record<string, ParamRule> = {};
  const errors: Record<string, string> = {};
  const undeclared: string[] = [];
  const unused: string[] = [];
  const declared = input === null || input === undefined ? {} : input;
  if (!isPlainObject(declared)) {
    errors.parameters = 'must be a JSON object';
    return { rules, errors, undeclared, unused };
  }
  const used = new Set(placeholders);
  for (const name of Object.keys(declared)) {
    if (!NAME_RE.test(name)) {
      put(errors, name, 'is not a valid parameter name (letters, digits and underscores; not starting with a digit)');
      continue;
    }
    const rule = parseRule(declared[name]);
    if (typeof rule === 'string') put(errors, name, rule);
    else if (!used.has(name)) {
      unused.push(name);
      put(errors, name, 'is declared but not used in the SQL');
    } else put(rules, name, rule);
  }
  for (const name of placeholders) {
    if (Object.hasOwn(declared, name)) continue;
    undeclared.push(name);
    put(errors, name, 'is used in the SQL but not declared in "parameters"');
  }
  return { rules, errors, undeclared, unused };
}

/** One definition (a type name or an object of rules) to a rule, or the message completing "<name> ...". */
export function parseRule(spec: unknown): ParamRule | string {
  if (typeof spec === 'string') spec = { type: spec };
  if (!isPlainObject(spec)) return "must be a type name such as 'int' or an object of rules";
  const unknown = Object.keys(spec)
    .filter((k) => !RULE_KEYS.has(k))
    .sort();
  if (unknown.length) return `has unknown rule(s): ${unknown.join(', ')} (allowed: ${ALLOWED_RULES})`;

  let type: ParamType = null;
  if (spec.type !== null && spec.type !== undefined) {
    const long = TYPES.get(String(spec.type).toLowerCase());
    if (long === undefined) return `has unknown type '${String(spec.type)}' (use int, float, str or bool)`;
    type = long;
  }
  const rule: ParamRule = { type, required: true };
  const has = (key: string): boolean => Object.hasOwn(spec, key);

  if (has('required')) {
    if (typeof spec.required !== 'boolean') return "'required' must be true or false";
    rule.required = spec.required;
  } else if (has('default')) {
    rule.required = false;
  }
  if (has('description') && typeof spec.description !== 'string') return "'description' must be text";
  if (has('from_claim')) {
    const claim = spec.from_claim;
    if (typeof claim !== 'string' || !claim || claim.length > MAX_CLAIM_LENGTH) return `'from_claim' must be a claim name of 1-${MAX_CLAIM_LENGTH} characters`;
    // The token always supplies it: a default or an optional value would let a call run without one.
    if (has('default')) return "cannot have both 'from_claim' and a 'default'";
    if (spec.required === false) return "with 'from_claim' is always required";
  }

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
      const check = prepareCheck(
        {
          type,
          required: false,
          enum: enumValues,
          min: spec.min as number | undefined,
          max: spec.max as number | undefined,
          min_length: spec.min_length as number | undefined,
          max_length: spec.max_length as number | undefined,
          pattern: spec.pattern as string | undefined,
        },
        pattern,
      );
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
  if (has('from_claim')) rule.from_claim = spec.from_claim as string;
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
  if (rule.from_claim !== undefined) out.from_claim = rule.from_claim;
  return out;
}
