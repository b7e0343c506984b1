// In charge of the audit log's rows on either engine: appending an entry chained to the one before
// it (sha256 over the previous hash and the entry's canonical JSON, RFC 8785), pruning to the newest
// N while keeping the last pruned hash as the chain's anchor, reading with filters, and verifying
// the chain. Appends are serialised (SQLite: BEGIN IMMEDIATE; PostgreSQL: a transaction-scoped
// advisory lock), so instances sharing a store cannot fork the chain. Knows nothing of what is audited.
import { createHash } from 'node:crypto';
// RFC 8785 (JSON Canonicalization Scheme): one byte string per value whatever the key order, so a
// verifier in any language can recompute the hashes; v4 is the last release that runs on Node 20.
import canonicalize from 'canonicalize';
import type { SqlDb } from './sql.js';

export type AuditVia = 'token' | 'break-glass' | 'open' | 'cli' | 'startup';

/** What a change is recorded as: who, how, what was done to what, and the diff (or snapshot). */
export interface AuditInput {
  actor: string | null;
  via: AuditVia;
  action: string;
  target: string | null;
  changes: Record<string, unknown>;
}

export interface AuditEntry extends AuditInput {
  id: number;
  timestamp: string;
}

export interface AuditFilter {
  action?: string;
  actor?: string;
  target?: string;
  /** Text anywhere in the entry. */
  q?: string;
  since?: string;
  until?: string;
  /** Entries with id below this one (the cursor). */
  before?: number;
  limit: number;
}

export type VerifyResult = { ok: true; entries: number; anchor_id: number; head: string } | { ok: false; entries: number; broken_at: number; reason: string };

/** The hash before the first entry ever written. */
export const GENESIS = '0'.repeat(64);
/** pg_advisory_xact_lock's key for appends (any constant no other lock of ours uses). */
const APPEND_LOCK = 20261202;

interface AuditRecord {
  id: number;
  timestamp: string;
  actor: string | null;
  via: string;
  action: string;
  target: string | null;
  entry_json: string;
  prev_hash: string;
  hash: string;
}

/** The hash of an entry chained after `prev`. */
export function chainHash(prev: string, e: AuditEntry): string {
  const text = canonicalize({ id: e.id, timestamp: e.timestamp, actor: e.actor, via: e.via, action: e.action, target: e.target, changes: e.changes });
  return createHash('sha256')
    .update(prev + (text ?? ''), 'utf8')
    .digest('hex');
}

export class AuditStore {
  constructor(private readonly db: SqlDb) {}

  /** Appends one entry after the chain's head and prunes to the newest `keep`; returns the entry. */
  append(input: AuditInput, timestamp: string, keep: number): Promise<AuditEntry> {
    return this.db.tx(async (t) => {
      if (t.dialect === 'postgres') await t.all(`SELECT pg_advisory_xact_lock(${APPEND_LOCK})`);
      const [head] = await t.all<{ id: number; hash: string }>('SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1');
      const [anchor] = await t.all<{ anchor_id: number; anchor_hash: string }>('SELECT anchor_id, anchor_hash FROM audit_chain');
      const prevId = head ? Number(head.id) : Number(anchor.anchor_id);
      const prev = head ? head.hash : anchor.anchor_hash;
      const entry: AuditEntry = { id: prevId + 1, timestamp, ...input };
      await t.run('INSERT INTO audit_log (id, timestamp, actor, via, action, target, entry_json, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)', [
        entry.id,
        timestamp,
        entry.actor,
        entry.via,
        entry.action,
        entry.target,
        JSON.stringify({ changes: entry.changes }),
        prev,
        chainHash(prev, entry),
      ]);
      // Retention: the newest `keep` stay; the last one pruned becomes the anchor the chain starts from.
      const [edge] = await t.all<{ id: number; hash: string }>('SELECT id, hash FROM audit_log ORDER BY id DESC LIMIT 1 OFFSET ?', [keep]);
      if (edge) {
        await t.run('DELETE FROM audit_log WHERE id <= ?', [edge.id]);
        await t.run('UPDATE audit_chain SET anchor_id = ?, anchor_hash = ?', [edge.id, edge.hash]);
      }
      return entry;
    });
  }

  /** Newest first; `total` counts every entry the filters match, `actions` every action present. */
  /** When entries of `action` were written at or after `since` (YYYY-MM-DD HH:MM:SS), oldest first, at most `limit`. */
  async timesOf(action: string, since: string, limit = 1000): Promise<string[]> {
    const rows = await this.db.all<{ timestamp: string }>('SELECT timestamp FROM audit_log WHERE action = ? AND timestamp >= ? ORDER BY id LIMIT ?', [
      action,
      since,
      limit,
    ]);
    return rows.map((r) => r.timestamp);
  }

  async list(f: AuditFilter): Promise<{ items: AuditEntry[]; total: number; actions: string[] }> {
    const where: string[] = [];
    const params: unknown[] = [];
    const add = (clause: string, value: unknown) => {
      where.push(clause);
      params.push(value);
    };
    if (f.action !== undefined) add('action = ?', f.action);
    if (f.actor !== undefined) add('actor = ?', f.actor);
    if (f.target !== undefined) add('target = ?', f.target);
    if (f.since !== undefined) add('timestamp >= ?', f.since);
    if (f.until !== undefined) add('timestamp < ?', f.until);
    if (f.q !== undefined) {
      where.push("(LOWER(entry_json) LIKE ? ESCAPE '\\' OR LOWER(action) LIKE ? ESCAPE '\\' OR LOWER(COALESCE(target, '')) LIKE ? ESCAPE '\\')");
      const like = `%${f.q.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
      params.push(like, like, like);
    }
    const filtered = where.length ? `WHERE ${where.join(' AND ')}` : '';
    const [{ n }] = await this.db.all<{ n: number }>(`SELECT COUNT(*) AS n FROM audit_log ${filtered}`, params);
    const paged = [...where, ...(f.before !== undefined ? ['id < ?'] : [])];
    const rows = await this.db.all<AuditRecord>(`SELECT * FROM audit_log ${paged.length ? `WHERE ${paged.join(' AND ')}` : ''} ORDER BY id DESC LIMIT ?`, [
      ...params,
      ...(f.before !== undefined ? [f.before] : []),
      f.limit,
    ]);
    const actions = await this.db.all<{ action: string }>('SELECT DISTINCT action FROM audit_log ORDER BY action');
    return { items: rows.map(toEntry), total: Number(n), actions: actions.map((a) => a.action) };
  }

  /** Recomputes the chain from its anchor; names the first entry that does not hold. */
  async verify(): Promise<VerifyResult> {
    const [anchor] = await this.db.all<{ anchor_id: number; anchor_hash: string }>('SELECT anchor_id, anchor_hash FROM audit_chain');
    let prevId = Number(anchor.anchor_id);
    let prev = anchor.anchor_hash;
    let entries = 0;
    // In pages, so a long log is never one array of rows.
    for (;;) {
      const rows = await this.db.all<AuditRecord>('SELECT * FROM audit_log WHERE id > ? ORDER BY id LIMIT 1000', [prevId]);
      if (!rows.length) break;
      for (const r of rows) {
        const id = Number(r.id);
        const broken = (reason: string): VerifyResult => ({ ok: false, entries, broken_at: id, reason });
        if (id !== prevId + 1) return broken(`entry ${prevId + 1} is missing (the next one is ${id})`);
        if (r.prev_hash !== prev) return broken('its previous hash is not the hash of the entry before it');
        let entry: AuditEntry;
        try {
          entry = toEntry(r);
        } catch {
          return broken('its stored entry is not JSON');
        }
        if (chainHash(prev, entry) !== r.hash) return broken('its content does not match its hash (edited after it was written)');
        prev = r.hash;
        prevId = id;
        entries++;
      }
    }
    return { ok: true, entries, anchor_id: Number(anchor.anchor_id), head: prev };
  }
}

function toEntry(r: AuditRecord): AuditEntry {
  return {
    id: Number(r.id),
    timestamp: r.timestamp,
    actor: r.actor ?? null,
    via: r.via as AuditVia,
    action: r.action,
    target: r.target ?? null,
    changes: JSON.parse(r.entry_json).changes,
  };
}
