// In charge of checking management API bodies once, at the edge: JSON object shape, unknown
// fields (400 unknown_field) and field values (400 invalid_body naming the field), with valibot.
import * as v from 'valibot';
import { CallError } from '../call/errors.js';

const decoder = new TextDecoder();

export function readJson(body: Uint8Array | null, required = true): Record<string, unknown> {
  if (!body || body.length === 0) {
    if (required) throw new CallError('invalid_body', 'Request body must be a JSON object');
    return {};
  }
  let value: unknown;
  try {
    value = JSON.parse(decoder.decode(body));
  } catch {
    throw new CallError('invalid_body', 'Request body is not valid JSON');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new CallError('invalid_body', 'Request body must be a JSON object');
  }
  return value as Record<string, unknown>;
}

/** Checks the body against an object schema whose entries name every field the route takes. */
export function parseBody<S extends v.ObjectSchema<v.ObjectEntries, undefined>>(schema: S, body: Record<string, unknown>): v.InferOutput<S> {
  const unknown = Object.keys(body).filter((k) => !(k in schema.entries));
  if (unknown.length) {
    throw new CallError('unknown_field', `Unknown field${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')}`);
  }
  const parsed = v.safeParse(schema, body);
  if (parsed.success) return parsed.output;
  const issue = parsed.issues[0];
  const path = issue.path?.map((p) => String(p.key)).join('.') ?? '';
  throw new CallError('invalid_body', path ? `${path}: ${issue.message}` : issue.message);
}

export const NAME = /^[\w .-]{1,100}$/;
export const name = v.pipe(v.string('must be text'), v.regex(NAME, 'must be 1-100 letters, digits, spaces, ".", "_" or "-"'));
export const optionalText = v.optional(v.nullable(v.string('must be text')));
export const RATE_LIMIT = /^[1-9]\d*\/(second|minute|hour|day)s?$/;

export function checkName(value: string): string {
  if (!NAME.test(value) || value.startsWith('.')) throw new CallError('invalid_name', `Invalid name '${value}'`);
  return value;
}
