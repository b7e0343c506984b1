// In charge of the per-call binder: a version's rules compiled once into a function that coerces,
// checks and orders the caller's values, reporting every problem at once.
import { GatewayError } from '../contract/errors.js';
import { parseRule } from './paramRules.js';
import {
  applyRules,
  coerceDefinition,
  coerceJson,
  coerceText,
  compilePattern,
  FAIL,
  isPlainObject,
  prepareCheck,
  put,
  TYPES,
  why,
  type Check,
  type ParamRule,
  type ParamType,
} from './paramValues.js';

/** Where a call's values come from: query-string text, or a JSON body's already-typed values. */
export type ParamSource = { kind: 'query'; get(name: string): string | undefined } | { kind: 'json'; get(name: string): unknown };

/** Values in placeholder order (one per distinct placeholder), or throws GatewayError. */
export type Binder = (source: ParamSource) => unknown[];

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
 * forms ("int") both work; anything unusable degrades to an untyped required parameter. The catalog
 * reads them through this too, so it shows what the binder enforces.
 */
export function readRule(spec: unknown): ParamRule {
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
 * GatewayError param_required / param_invalid listing every problem (declared names in rule order first,
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
          errors ??= {};
          put(errors, slot.name, 'is required');
          continue;
        } else value = null;
      } else if (raw === null) {
        if (slot.required && slot.declared) {
          errors ??= {};
          put(errors, slot.name, 'must not be null');
          continue;
        }
        value = null;
      } else {
        const check = slot.check;
        if (check === null) {
          // undeclared: passed through as sent, but a JSON object or array (or a NUL) can't be bound
          value = json ? coerceJson(null, raw) : coerceText(null, raw as string);
        } else {
          value = json ? coerceJson(check.type, raw) : coerceText(check.type, raw as string);
          if (value !== FAIL) value = applyRules(check, value);
        }
        if (value === FAIL) {
          errors ??= {};
          put(errors, slot.name, why);
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

function invalid(errors: Record<string, string>, onlyMissing: boolean): GatewayError {
  let message = 'Invalid parameters: ';
  let first = true;
  for (const name of Object.keys(errors)) {
    message += `${first ? '' : '; '}${name} ${errors[name]}`;
    first = false;
  }
  return new GatewayError(onlyMissing ? 'param_required' : 'param_invalid', message, { errors });
}
