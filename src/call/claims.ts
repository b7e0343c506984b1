// In charge of parameters bound from the caller's sign-in token (`from_claim`): which parameters a
// version binds so (read once, with its plan), and the values a call takes from the token's claims,
// so a signed-in tenant only ever runs the statement with its own claim's value.
import type { Caller } from '../auth/keys.js';
import { GatewayError } from '../contract/errors.js';
import type { ParamSource } from './binder.js';
import { isPlainObject } from './paramValues.js';

/** A parameter bound from a claim; `text`: its type is string or untyped, so a numeric claim is given as text. */
export interface ClaimParam {
  param: string;
  claim: string;
  text: boolean;
}

/**
 * The `from_claim` parameters of a version's stored rules that its SQL uses. Read from the stored
 * definitions themselves, not through the lenient rule reader, so a rule that no longer parses can
 * never fall back to a value the request sends.
 */
export function claimParams(placeholders: string[], rules: Record<string, unknown> | null | undefined): ClaimParam[] {
  const out: ClaimParam[] = [];
  if (!isPlainObject(rules)) return out;
  for (const param of new Set(placeholders)) {
    const rule = rules[param];
    if (!isPlainObject(rule) || rule.from_claim === undefined) continue;
    const type = typeof rule.type === 'string' ? rule.type.toLowerCase() : null;
    out.push({ param, claim: String(rule.from_claim), text: type === null || type === 'string' || type === 'str' || type === 'text' });
  }
  return out;
}

/**
 * The values the binder reads for a call of a version with `from_claim` parameters: a signed-in
 * user's come from its claims (sending one itself is 400 param_from_claim, a token without it 403
 * claim_missing); an administrator (admin key, open mode) supplies them like any other; a scoped
 * key may not call such a query at all (403 sign_in_required). Only called when `claimed` is not empty.
 */
export function bindClaims(claimed: ClaimParam[], caller: Caller, source: ParamSource): ParamSource {
  if (caller.kind !== 'key') return source;
  const claims = caller.claims;
  if (!claims)
    throw new GatewayError('sign_in_required', 'This query takes values from a sign-in token: call it signed in (Authorization: Bearer), not with an API key');
  const values = new Map<string, unknown>();
  for (const c of claimed) {
    if (source.get(c.param) !== undefined) {
      throw new GatewayError('param_from_claim', `${c.param} comes from your sign-in token and can't be set by the request`);
    }
    const v = Object.hasOwn(claims, c.claim) ? claims[c.claim] : undefined;
    const usable = typeof v === 'string' ? v !== '' : typeof v === 'number' ? Number.isFinite(v) : typeof v === 'boolean';
    if (!usable) throw new GatewayError('claim_missing', `Your sign-in token has no usable '${c.claim}' claim`);
    // Query-string values are text the binder coerces by type; JSON values keep theirs, but a number
    // bound to a text parameter becomes text (the reference's rule).
    values.set(c.param, source.kind === 'query' || c.text ? String(v) : v);
  }
  if (source.kind === 'query') return { kind: 'query', get: (n) => (values.has(n) ? (values.get(n) as string) : source.get(n)) };
  return { kind: 'json', get: (n) => (values.has(n) ? values.get(n) : source.get(n)) };
}
