// In charge of checking management API bodies once, at the edge: JSON object shape, unknown
// fields (400 unknown_field) and field values (400 invalid_body), with valibot. Every problem is
// told in words a user reads, field first ("description is required", "name must be text").
import * as v from 'valibot';
import { parseJsonObject } from '../call/request.js';
import { GatewayError } from '../contract/errors.js';

export function readJson(body: Uint8Array | null, required = true): Record<string, unknown> {
  const value = parseJsonObject(body);
  if (value) return value;
  if (required) throw new GatewayError('invalid_body', 'Request body must be a JSON object');
  return {};
}

type Schema = v.ObjectSchema<v.ObjectEntries, undefined>;

/** One problem with a body: the field (a path such as `mask[0].action`; '' for the body) and what is wrong with it. */
export interface BodyProblem {
  field: string;
  /** Completes the field's name: "is required", "must be text". */
  problem: string;
}

/** Checks the body against an object schema whose entries name every field the route takes. */
export function parseBody<S extends Schema>(schema: S, body: Record<string, unknown>): v.InferOutput<S> {
  const unknown = unknownFields(schema, body);
  if (unknown.length) {
    throw new GatewayError('unknown_field', `Unknown field${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')}`);
  }
  const parsed = v.safeParse(schema, body);
  if (parsed.success) return parsed.output;
  const problems = bodyProblems(parsed.issues);
  throw new GatewayError('invalid_body', sentence(problems), { errors: Object.fromEntries(problems.map((p) => [p.field, p.problem])) });
}

export function unknownFields(schema: Schema, body: Record<string, unknown>): string[] {
  return Object.keys(body).filter((k) => !(k in schema.entries));
}

/** valibot's issues as problems, one per field (the first issue of each), in the body's order. */
export function bodyProblems(issues: readonly v.BaseIssue<unknown>[]): BodyProblem[] {
  const seen = new Map<string, string>();
  for (const issue of issues) {
    const field = fieldOf(issue);
    if (!seen.has(field)) seen.set(field, problemOf(issue));
  }
  return [...seen].map(([field, problem]) => ({ field, problem }));
}

/** "description is required; name must be text". */
export function sentence(problems: BodyProblem[]): string {
  return problems.map((p) => (p.field ? `${p.field} ${p.problem}` : p.problem)).join('; ');
}

function fieldOf(issue: v.BaseIssue<unknown>): string {
  let out = '';
  for (const step of issue.path ?? []) {
    const key = step.key;
    out += typeof key === 'number' ? `[${key}]` : out ? `.${String(key)}` : String(key);
  }
  return out;
}

/**
 * The schemas' own messages ("must be text") are kept; valibot's defaults ("Invalid type: Expected
 * string but received 3", "Invalid key: Expected "description" but received undefined") are put in
 * the same words.
 */
function problemOf(issue: v.BaseIssue<unknown>): string {
  // A JSON body has no undefined values: undefined is a field that is not there.
  if (issue.received === 'undefined') return 'is required';
  if (!issue.message.startsWith('Invalid ')) return issue.message;
  const req = issue.requirement as unknown;
  const things = Array.isArray(issue.input) ? 'items' : 'characters';
  switch (issue.type) {
    case 'string':
      return 'must be text';
    case 'number':
      return 'must be a number';
    case 'boolean':
      return 'must be true or false';
    case 'array':
      return 'must be a list';
    case 'object':
    case 'record':
    case 'strict_object':
      return 'must be an object';
    case 'integer':
      return 'must be a whole number';
    case 'min_value':
      return `must be at least ${String(req)}`;
    case 'max_value':
      return `must be at most ${String(req)}`;
    case 'min_length':
      return req === 1 ? 'must not be empty' : `must be at least ${String(req)} ${things} long`;
    case 'max_length':
      return `must be at most ${String(req)} ${things} long`;
    case 'literal':
    case 'picklist':
      return `must be ${issue.expected}`;
    default:
      return `has a wrong value (expected ${issue.expected ?? issue.type})`;
  }
}

export const NAME = /^[\w .-]{1,100}$/;
export const name = v.pipe(v.string('must be text'), v.regex(NAME, 'must be 1-100 letters, digits, spaces, ".", "_" or "-"'));
export const optionalText = v.optional(v.nullable(v.string('must be text')));
/** A collection's name (the contract's): 1-63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit. */
export const COLLECTION = /^[a-z0-9][a-z0-9._-]{0,62}$/;
export const collectionName = v.pipe(
  v.string('must be text'),
  v.regex(COLLECTION, 'must be 1-63 lower-case letters, digits, ".", "_" or "-", starting with a letter or digit'),
);
export const RATE_LIMIT = /^[1-9]\d*\/(second|minute|hour|day)s?$/;

export function checkName(value: string): string {
  if (!NAME.test(value) || value.startsWith('.')) throw new GatewayError('invalid_name', `Invalid name '${value}'`);
  return value;
}
