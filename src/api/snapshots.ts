// In charge of what a management object "is" for the audit log and for ETags: a snapshot of its
// fields (without what merely using it changes: last_used_at, last_seen_at, updated_at, expired) and,
// apart, a fingerprint of each secret (a password's or secret's SHA-256), so a changed secret shows
// in a diff as "changed" and in the ETag, but never as its value or its hash.
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import type { Store } from '../store/store.js';
import { keyView } from './apiKeys.js';
import { connectionSummary } from './connections.js';

export interface Snapshot {
  fields: Record<string, unknown>;
  /** Secret name -> a fingerprint (null: no secret set). Never written anywhere as it is. */
  secrets: Record<string, string | null>;
}

export type Resource = 'connection' | 'query' | 'key' | 'administrator' | 'token';

/** What a snapshot or a diff shows for a secret. */
export const SECRET_SHOWN = '********';

const sha = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

function without(view: Record<string, unknown>, ...names: string[]): Record<string, unknown> {
  const out = { ...view };
  for (const n of names) delete out[n];
  return out;
}

/** Reads each resource's snapshot by its ids (a token's are [administrator, token id]); null when it does not exist. */
export const SNAPSHOTS: Record<Resource, (store: Store, ids: string[]) => Promise<Snapshot | null>> = {
  async connection(store, [name]) {
    const c = await store.getConnection(name);
    if (!c) return null;
    return {
      fields: { ...without(connectionSummary(c), 'updated_at'), options: c.options ?? {} },
      secrets: { password: c.password === null ? null : sha(c.password) },
    };
  },
  async query(store, [name]) {
    const q = await store.getQuery(name);
    if (!q) return null;
    const fields: Record<string, unknown> = {
      name: q.name,
      collection: q.collection,
      example: q.example,
      published_version: q.published_version,
      created_at: q.created_at,
    };
    // One field per version, so a new version or a changed cache_ttl is one entry of the diff.
    for (const v of q.versions) {
      fields[`version_${v.version}`] = {
        sql: v.sql,
        connection_name: v.connection_name,
        parameters: v.parameters,
        description: v.description,
        author: v.author,
        tags: v.tags,
        cache_ttl: v.cache_ttl,
        created_at: v.created_at,
      };
    }
    return { fields, secrets: {} };
  },
  async key(store, [name]) {
    const k = await store.getKey(name);
    if (!k) return null;
    return { fields: without(keyView(k), 'expired', 'last_used_at', 'previous_secret_valid_until'), secrets: { secret: sha(k.hash) } };
  },
  async administrator(store, [name]) {
    const a = await store.admins.get(name);
    if (!a) return null;
    return { fields: { name: a.name, role: a.role, email: a.email, active: a.active, created_at: a.created_at, created_by: a.created_by }, secrets: {} };
  },
  async token(store, [admin, id]) {
    const t = await store.admins.token(admin, id);
    if (!t) return null;
    return { fields: { id: t.id, admin: t.admin_name, label: t.label, expires_at: t.expires_at, created_at: t.created_at }, secrets: { secret: sha(t.hash) } };
  },
};

/** A strong ETag of the object's state: its fields and its secrets' fingerprints. */
export function etagOf(s: Snapshot): string {
  return `"${sha(canonicalize({ fields: s.fields, secrets: s.secrets }) ?? '').slice(0, 32)}"`;
}

/** Whether an If-Match header names this state ('*' matches anything that exists). */
export function ifMatchHolds(header: string, current: Snapshot): boolean {
  const tag = etagOf(current);
  return header.split(',').some((t) => {
    const given = t.trim().replace(/^W\//, '');
    return given === '*' || given === tag;
  });
}

/** The whole object as the audit log records a create or a delete: secrets shown as '********'. */
export function snapshotChanges(s: Snapshot): Record<string, unknown> {
  const out: Record<string, unknown> = { ...s.fields };
  for (const [name, fp] of Object.entries(s.secrets)) out[name] = fp === null ? null : SECRET_SHOWN;
  return out;
}

/** An update as the audit log records it: {"field": {"from", "to"}} per changed field; a changed secret is "changed". */
export function diff(before: Snapshot, after: Snapshot): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const names = new Set([...Object.keys(before.fields), ...Object.keys(after.fields)]);
  for (const n of names) {
    const from = before.fields[n] ?? null;
    const to = after.fields[n] ?? null;
    if (canonicalize(from) !== canonicalize(to)) out[n] = { from, to };
  }
  for (const n of new Set([...Object.keys(before.secrets), ...Object.keys(after.secrets)])) {
    if ((before.secrets[n] ?? null) !== (after.secrets[n] ?? null)) out[n] = 'changed';
  }
  return out;
}
