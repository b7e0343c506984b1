// In charge of checking management API bodies once, at the edge: JSON object shape, unknown
// fields (400 unknown_field) and field values (400 invalid_body naming the field), with valibot.
import * as v from 'valibot';
import { parseJsonObject } from '../call/request.js';
import { GatewayError } from '../contract/errors.js';

export function readJson(body: Uint8Array | null, required = true): Record<string, unknown> {
  const value = parseJsonObject(body);
  if (value) return value;
  if (required) throw new GatewayError('invalid_body', 'Request body must be a JSON object');
  return {};
}

/** Checks the body against an object schema whose entries name every field the route takes. */
export function parseBody<S extends v.ObjectSchema<v.ObjectEntries, undefined>>(schema: S, body: Record<string, unknown>): v.InferOutput<S> {
  const unknown = Object.keys(body).filter((k) => !(k in schema.entries));
  if (unknown.length) {
    throw new GatewayError('unknown_field', `Unknown field${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')}`);
  }
  const parsed = v.safeParse(schema, body);
  if (parsed.success) return parsed.output;
  const issue = parsed.issues[0];
  const path = issue.path?.map((p) => String(p.key)).join('.') ?? '';
  throw new GatewayError('invalid_body', path ? `${path}: ${issue.message}` : issue.message);
}

export const NAME = /^[\w .-]{1,100}$/;
export const name = v.pipe(v.string('must be text'), v.regex(NAME, 'must be 1-100 letters, digits, spaces, ".", "_" or "-"'));
export const optionalText = v.optional(v.nullable(v.string('must be text')));
export const RATE_LIMIT = /^[1-9]\d*\/(second|minute|hour|day)s?$/;

export function checkName(value: string): string {
  if (!NAME.test(value) || value.startsWith('.')) throw new GatewayError('invalid_name', `Invalid name '${value}'`);
  return value;
}
