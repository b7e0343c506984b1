// In charge of the administrators' rows and their tokens' rows on either engine: only a token's
// SHA-256 is stored, found by one indexed read. Rows are validated by the API layer before they get here.
import type { SqlDb } from './sql.js';

export type AdminRole = 'owner' | 'admin' | 'developer' | 'auditor';

export interface AdminRow {
  name: string;
  role: AdminRole;
  email: string | null;
  active: boolean;
  created_at: string;
  created_by: string | null;
  updated_at: string;
  last_seen_at: string | null;
}

export interface AdminTokenRow {
  /** 'tok_' + 12 hex. */
  id: string;
  admin_name: string;
  hash: string;
  label: string | null;
  /** YYYY-MM-DD, valid through the end of that day; null: never expires. */
  expires_at: string | null;
  created_at: string;
  last_used_at: string | null;
}

interface AdminRecord {
  name: string;
  role: string;
  active: number;
  created_at: string;
  updated_at: string;
  details_json: string;
}

interface TokenRecord {
  id: string;
  admin_name: string;
  hash: string;
  expires_at: string | null;
  created_at: string;
  details_json: string;
}

const bool = (v: unknown) => v === 1 || v === true || v === '1';

export class AdminStore {
  constructor(private readonly db: SqlDb) {}

  async list(): Promise<AdminRow[]> {
    return (await this.db.all<AdminRecord>('SELECT * FROM administrators ORDER BY name')).map(toAdmin);
  }

  async get(name: string): Promise<AdminRow | null> {
    const rows = await this.db.all<AdminRecord>('SELECT * FROM administrators WHERE name = ?', [name]);
    return rows.length ? toAdmin(rows[0]) : null;
  }

  /** Creates (false when the name is taken) or replaces the administrator's row. */
  async put(a: AdminRow, isNew: boolean): Promise<boolean> {
    const details = JSON.stringify({ email: a.email, created_by: a.created_by, last_seen_at: a.last_seen_at });
    if (isNew) {
      return (
        (await this.db.run(
          `INSERT INTO administrators (name, role, active, created_at, updated_at, details_json) VALUES (?, ?, ?, ?, ?, ?)
           ON CONFLICT (name) DO NOTHING`,
          [a.name, a.role, a.active ? 1 : 0, a.created_at, a.updated_at, details],
        )) === 1
      );
    }
    return (
      (await this.db.run('UPDATE administrators SET role = ?, active = ?, updated_at = ?, details_json = ? WHERE name = ?', [
        a.role,
        a.active ? 1 : 0,
        a.updated_at,
        details,
        a.name,
      ])) === 1
    );
  }

  /** Deletes the administrator and every token of theirs. */
  async delete(name: string): Promise<boolean> {
    return this.db.tx(async (t) => {
      await t.run('DELETE FROM admin_tokens WHERE admin_name = ?', [name]);
      return (await t.run('DELETE FROM administrators WHERE name = ?', [name])) === 1;
    });
  }

  async count(): Promise<number> {
    const [{ n }] = await this.db.all<{ n: number }>('SELECT COUNT(*) AS n FROM administrators');
    return Number(n);
  }

  async activeOwners(): Promise<number> {
    const [{ n }] = await this.db.all<{ n: number }>("SELECT COUNT(*) AS n FROM administrators WHERE role = 'owner' AND active = 1");
    return Number(n);
  }

  // ── tokens ────────────────────────────────────────────────────────────────────────────────
  async tokens(admin: string): Promise<AdminTokenRow[]> {
    return (await this.db.all<TokenRecord>('SELECT * FROM admin_tokens WHERE admin_name = ? ORDER BY created_at, id', [admin])).map(toToken);
  }

  async tokenCounts(): Promise<Map<string, number>> {
    const rows = await this.db.all<{ admin_name: string; n: number }>('SELECT admin_name, COUNT(*) AS n FROM admin_tokens GROUP BY admin_name');
    return new Map(rows.map((r) => [r.admin_name, Number(r.n)]));
  }

  async token(admin: string, id: string): Promise<AdminTokenRow | null> {
    const rows = await this.db.all<TokenRecord>('SELECT * FROM admin_tokens WHERE admin_name = ? AND id = ?', [admin, id]);
    return rows.length ? toToken(rows[0]) : null;
  }

  /** The token whose secret hashes to `hash`, with its administrator's row: one indexed read. */
  async byHash(hash: string): Promise<{ token: AdminTokenRow; admin: AdminRow } | null> {
    const rows = await this.db.all<TokenRecord & { a_role: string; a_active: number; a_created_at: string; a_updated_at: string; a_details: string }>(
      `SELECT t.*, a.role AS a_role, a.active AS a_active, a.created_at AS a_created_at, a.updated_at AS a_updated_at, a.details_json AS a_details
         FROM admin_tokens t JOIN administrators a ON a.name = t.admin_name WHERE t.hash = ?`,
      [hash],
    );
    if (!rows.length) return null;
    const r = rows[0];
    return {
      token: toToken(r),
      admin: toAdmin({
        name: r.admin_name,
        role: r.a_role,
        active: r.a_active,
        created_at: r.a_created_at,
        updated_at: r.a_updated_at,
        details_json: r.a_details,
      }),
    };
  }

  async addToken(t: AdminTokenRow): Promise<void> {
    await this.db.run('INSERT INTO admin_tokens (id, admin_name, hash, expires_at, created_at, details_json) VALUES (?, ?, ?, ?, ?, ?)', [
      t.id,
      t.admin_name,
      t.hash,
      t.expires_at,
      t.created_at,
      JSON.stringify({ label: t.label, last_used_at: t.last_used_at }),
    ]);
  }

  async deleteToken(admin: string, id: string): Promise<boolean> {
    return (await this.db.run('DELETE FROM admin_tokens WHERE admin_name = ? AND id = ?', [admin, id])) === 1;
  }

  /** Records a token's use (the caller throttles): the token's last_used_at and its administrator's last_seen_at. */
  async touch(tokenId: string, adminName: string, at: string): Promise<void> {
    await this.db.tx(async (t) => {
      const [row] = await t.all<{ details_json: string }>('SELECT details_json FROM admin_tokens WHERE id = ?', [tokenId]);
      if (row)
        await t.run('UPDATE admin_tokens SET details_json = ? WHERE id = ?', [JSON.stringify({ ...JSON.parse(row.details_json), last_used_at: at }), tokenId]);
      const [adm] = await t.all<{ details_json: string }>('SELECT details_json FROM administrators WHERE name = ?', [adminName]);
      if (adm) {
        await t.run('UPDATE administrators SET details_json = ? WHERE name = ?', [
          JSON.stringify({ ...JSON.parse(adm.details_json), last_seen_at: at }),
          adminName,
        ]);
      }
    });
  }
}

function toAdmin(r: AdminRecord): AdminRow {
  const d = JSON.parse(r.details_json);
  return {
    name: r.name,
    role: r.role as AdminRole,
    email: d.email ?? null,
    active: bool(r.active),
    created_at: r.created_at,
    created_by: d.created_by ?? null,
    updated_at: r.updated_at,
    last_seen_at: d.last_seen_at ?? null,
  };
}

function toToken(r: TokenRecord): AdminTokenRow {
  const d = JSON.parse(r.details_json);
  return {
    id: r.id,
    admin_name: r.admin_name,
    hash: r.hash,
    label: d.label ?? null,
    expires_at: r.expires_at ?? null,
    created_at: r.created_at,
    last_used_at: d.last_used_at ?? null,
  };
}
