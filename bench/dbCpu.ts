// CPU seconds the local PostgreSQL server spends for given databases while a load runs: the backends serving each
// (pg_stat_activity), read from /proc/<pid>/stat as the measured run starts and ends. What the gateway asks of its
// data source and of its store (the recorder's event log and history) costs there, not in the gateway's process: on
// a machine of 2 cores that CPU is taken from the callers' calls too. A backend that exits during the run is missed;
// one that starts during it counts from its start. Null when the server is not on this machine.
import { readFileSync } from 'node:fs';
import type { Sql } from 'postgres';
import { processCpuSeconds } from './load.js';

type Sample = Map<number, { db: string; cpu: number }>;

export class BackendCpu {
  #at: Sample = new Map();
  /** CPU seconds per database over the last measured run; null when a backend could not be read here. */
  seconds: Map<string, number> | null = null;

  constructor(
    readonly admin: Sql,
    readonly databases: string[],
  ) {}

  async #sample(): Promise<Sample | null> {
    const rows = await this.admin.unsafe<Array<{ pid: number; db: string }>>('SELECT pid, datname AS db FROM pg_stat_activity WHERE datname = ANY($1)', [
      this.databases,
    ]);
    const out: Sample = new Map();
    for (const r of rows) {
      const pid = Number(r.pid);
      try {
        if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() !== 'postgres') return null; // another machine's backend
        out.set(pid, { db: r.db, cpu: processCpuSeconds(pid) });
      } catch {
        return null; // not this machine's process (or gone): no figure rather than a wrong one
      }
    }
    return out;
  }

  readonly measured = {
    start: async () => {
      this.#at = (await this.#sample()) ?? new Map();
    },
    end: async () => {
      const now = await this.#sample();
      if (!now) {
        this.seconds = null;
        return;
      }
      const by = new Map<string, number>(this.databases.map((d) => [d, 0]));
      for (const [pid, { db, cpu }] of now) by.set(db, (by.get(db) ?? 0) + cpu - (this.#at.get(pid)?.cpu ?? 0));
      this.seconds = by;
    },
  };
}
