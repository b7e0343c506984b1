// In charge of the instances table (GET /api/v1/instances): each process's heartbeat row, the rows
// seen within a window, and the removal of rows long gone. Times are epoch ms by the writer's clock.
import type { SqlDb } from './sql.js';

export type InstanceRole = 'serve' | 'mcp' | 'events';

export interface InstanceRow {
  id: string;
  host: string;
  pid: number;
  role: InstanceRole;
  version: string;
  /** True when its rate limits are counted in Redis (shared), false when in its own memory. */
  shared_limits: boolean;
  /** YYYY-MM-DD HH:MM:SS, local time of the process. */
  started_at: string;
  last_seen_ms: number;
}

interface InstanceRecord {
  id: string;
  host: string;
  pid: number | string;
  role: string;
  version: string;
  shared_limits: number | string;
  started_at: string;
  last_seen_ms: number | string;
}

/** A row not seen for this long is removed by any instance's heartbeat. */
const FORGET_MS = 24 * 3600_000;

export class InstanceStore {
  constructor(private readonly db: SqlDb) {}

  /** Writes this process's row as seen at `row.last_seen_ms`; rows unseen for a day go. */
  async beat(row: InstanceRow): Promise<void> {
    await this.db.run(
      `INSERT INTO instances (id, host, pid, role, version, shared_limits, started_at, last_seen_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET last_seen_ms = excluded.last_seen_ms, version = excluded.version, shared_limits = excluded.shared_limits`,
      [row.id, row.host, row.pid, row.role, row.version, row.shared_limits ? 1 : 0, row.started_at, row.last_seen_ms],
    );
    await this.db.run('DELETE FROM instances WHERE last_seen_ms < ?', [row.last_seen_ms - FORGET_MS]);
  }

  /** Rows seen at or after `sinceMs`, the longest running first. */
  async seenSince(sinceMs: number): Promise<InstanceRow[]> {
    const rows = await this.db.all<InstanceRecord>('SELECT * FROM instances WHERE last_seen_ms >= ? ORDER BY started_at, id', [sinceMs]);
    return rows.map((r) => ({
      id: r.id,
      host: r.host,
      pid: Number(r.pid),
      role: r.role as InstanceRole,
      version: r.version,
      shared_limits: Number(r.shared_limits) === 1,
      started_at: r.started_at,
      last_seen_ms: Number(r.last_seen_ms),
    }));
  }

  /** A stopping process's row goes at once (one that dies drops out after the window instead). */
  async remove(id: string): Promise<void> {
    await this.db.run('DELETE FROM instances WHERE id = ?', [id]);
  }
}
