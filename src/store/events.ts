// In charge of the event log: every recorded run gets a unique, increasing event id and is kept at least the retention, in time-segment tables that are dropped whole when they expire (SQLite and PostgreSQL).
//
// Layout (created on demand by this module, not by a migration):
//   event_segments   the catalog: one row per segment (segment, table_name, first_id, last_id, created_ms, closed_ms).
//                    closed_ms is when the segment's newest event was written (it moves with each append).
//   events_<segment> one table per time segment (segment = floor(now / segmentS)), with
//                    (id PK, executed_at, query, key_name, status, payload, last_id, body, lines). A row is a page:
//                    the events id..last_id of one append (at most PAGE; 2,000 before stop 55), one line each in
//                    lines (pageLine: the RunRecord's fields by position, as COPY's text writes them, a line that
//                    shares the line before's fields but for its own four holding those only); executed_at is its
//                    first event's, status 'page', payload '{}' (so an instance of an earlier release reading the log
//                    during a rolling upgrade sees each page as one event, not a failed read). Releases before stop 64
//                    wrote every line whole, in body (before stop 57 executed_at, query, key_name, status and the rest
//                    as JSON): they read a page in lines as one event too, and this release reads theirs.
//                    One row a page, not a row an event: a PostgreSQL store spent 3.1 µs of CPU a call of the seeds'
//                    lookup on a row an event by COPY, 1.3 on a page (bench/results/levers-2026-12-05-pages).
//                    Rows of one event each (body NULL: written by a release before pages) are read as they are;
//                    their tables get last_id and body on this release's first append to them.
//   event_ids        where ids come from: a sequence on PostgreSQL; on SQLite a one-row counter table, read and
//                    advanced inside each append's write transaction. Both outlive every segment, and both start
//                    above MAX(run_history.event_id) so event ids continue the history row ids (contract §4.3, §7).
//
// Ordering guarantees:
//   SQLite: ids are allocated under the database write lock, so id order is commit order for the whole store,
//     and segments never overlap in ids (the segment number never goes back, store-wide).
//   PostgreSQL: ids are unique store-wide. An append reserves its ids as one range under an advisory lock it holds
//     until it commits, so appends from every instance become visible in id order. An instance of a release before
//     this one (nextval a row, no lock) can still commit a smaller id after a larger one, by at most one batch; a
//     reader tailing with `after` can then miss it unless it re-reads a look-back (as the reference events server
//     does, 1,000 ids). Reads run in one REPEATABLE READ snapshot, so one read never shows a hole that the same
//     snapshot could fill.
// Retention: a segment is dropped (DROP TABLE) only when its newest event was written more than retentionS ago,
//   measured with `now` of the expiring process, so every event stays at least retentionS (given clocks that agree).
import { setImmediate as nextTurn } from 'node:timers/promises';
import { copyField, fromCopyField, type SqlDb } from './sql.js';
import type { EventRow, RunRecord } from '../contract/messages.js';
import { extraJson, hasExtra, hasOwnExtra } from '../contract/runs.js';

export interface EventReadOptions {
  /** Events with an id above this one (default 0: from the oldest kept). */
  after?: number;
  limit: number;
  query?: string;
  key?: string;
  status?: 'success' | 'error';
  /** 'YYYY-MM-DD HH:MM:SS', compared with executed_at: since inclusive, until exclusive. */
  since?: string;
  until?: string;
}

export interface EventLogOptions {
  retentionS: number;
  /** Length of one segment; default max(60, retentionS / 6). */
  segmentS?: number;
  /** Clock in epoch ms (tests move it). Default Date.now. */
  now?: () => number;
}

interface SegmentInfo {
  segment: number;
  table_name: string;
  first_id: number | null;
  last_id: number | null;
  closed_ms: number;
}

/**
 * Events a page holds at most, and the text after which it is closed sooner (long payloads): an append of more writes
 * several pages. Each buffer made from a page (the driver's message, SQLite's record) should stay near glibc's mmap
 * threshold (128 KiB): pages of 2,000 whole lines (about 460 KiB) were mapped and unmapped, page faults and all, at
 * every append: the event log alone cost 3.6 µs of CPU a run on SQLite against 2.3, and 6.3 on PostgreSQL (client and
 * server) against 4.4, at 2,000 runs a batch (bench/results/recorder-2026-12-05-page500). Pages were 500 from then
 * until stop 64; with short lines (pageLine) a page of 1,000 of the seeds' lookup is about 35 KiB, and PAGE_TEXT
 * still closes one of long lines at 128 KiB.
 */
const PAGE = 1000;
const PAGE_TEXT = 128 << 10;
/** Events a page row holds at most, with those of stop 54's release (2,000 a page): how far below `after` a read looks. */
const LARGEST_PAGE = 2000;
/** How many page rows a read asks for at a time, at most: first one, then twice as many each time (16,000 events). */
const PAGES_A_READ = 32;
/** Advisory lock keys (PostgreSQL): creating the event tables, expiring segments, and appending. */
const LOCK_CREATE = 20261201;
const LOCK_EXPIRE = 20261202;
const LOCK_APPEND = 20261203;

/** A row's text: a page's lines, as this release writes them or as releases before stop 64 did (body). */
const TEXT = 'COALESCE(lines, body)';
const COLUMNS = `id, executed_at, query, key_name, status, payload, last_id, ${TEXT} AS body`;
/** A page row's columns as an append writes them (query and key_name NULL; body NULL, see `lines` above). */
const PAGE_COLUMNS = 'id, executed_at, status, payload, last_id, lines';
/**
 * PostgreSQL's append, one statement for `pages` pages of `table`, so one round trip and a transaction of its own: the
 * append lock, then `n` ids from the sequence as one range (nextval, then setval to its end: the lock makes the two one
 * step for every instance taking it), the segment's catalog row, then the pages (each as its first and last id's offset
 * in the range, its first run's second and its text). Each MATERIALIZED step reads the one before, so they run in this
 * order. Answers the range's first id and the pages written: none when a row already holds an id of the range (only an
 * instance of a release before the append lock, a row an event and nextval each, can have taken one); the append then
 * takes another range. Until stop 59 this was three round trips for a page (the range with BEGIN, the page, COMMIT)
 * and one more a page; what one costs is in ARCHITECTURE.md ("Recording never sits on the call's path").
 */
function appendPg(table: string, pages: number): string {
  const rows = Array.from({ length: pages }, () => '(?::bigint, ?::text, ?::bigint, ?::text)').join(', ');
  return `WITH l AS MATERIALIZED (SELECT pg_advisory_xact_lock(?), set_config('synchronous_commit', 'off', true)),
  r AS MATERIALIZED (SELECT setval('event_ids', nextval('event_ids') + ?::bigint - 1) AS hi FROM l),
  b AS MATERIALIZED (SELECT hi - ?::bigint + 1 AS lo, hi FROM r),
  cat AS (UPDATE event_segments SET first_id = CASE WHEN first_id IS NULL OR first_id > b.lo THEN b.lo ELSE first_id END,
      last_id = CASE WHEN last_id IS NULL OR last_id < b.hi THEN b.hi ELSE last_id END, closed_ms = GREATEST(closed_ms, ?::bigint)
    FROM b WHERE segment = ?::bigint),
  p (first, executed_at, last, lines) AS (VALUES ${rows}),
  ins AS (INSERT INTO ${table} (${PAGE_COLUMNS})
    SELECT b.lo + p.first, p.executed_at, 'page', '{}', b.lo + p.last, p.lines FROM b, p
    WHERE NOT EXISTS (SELECT 1 FROM ${table} WHERE id BETWEEN b.lo AND b.hi) RETURNING 1)
  SELECT lo, (SELECT count(*) FROM ins) AS written FROM b`;
}
const SEGMENT_TABLE = (segment: number) => `events_${segment}`;
/** A segment table's name: events_<segment>. */
export const SEGMENT_TABLE_NAME = /^events_\d+$/;

/** CREATE TABLE IF NOT EXISTS for one segment table (also used to restore a store's copy). */
export function segmentTableSql(dialect: SqlDb['dialect'], table: string): string {
  if (dialect === 'sqlite') {
    return `CREATE TABLE IF NOT EXISTS ${table} (id INTEGER PRIMARY KEY, executed_at TEXT NOT NULL, query TEXT,
      key_name TEXT, status TEXT NOT NULL, payload TEXT NOT NULL, last_id INTEGER, body TEXT, lines TEXT)`;
  }
  // Insert-only and dropped whole: no autovacuum work for them.
  return `CREATE TABLE IF NOT EXISTS ${table} (id BIGINT PRIMARY KEY, executed_at TEXT NOT NULL, query TEXT COLLATE "C",
    key_name TEXT COLLATE "C", status TEXT NOT NULL, payload TEXT NOT NULL, last_id BIGINT, body TEXT, lines TEXT) WITH (autovacuum_enabled = false)`;
}

export class EventLog {
  readonly #db: SqlDb;
  readonly #retentionMs: number;
  readonly #segmentMs: number;
  readonly #now: () => number;
  /** PostgreSQL: appends one after another, so this instance's ids commit in increasing order. */
  #chain: Promise<unknown> = Promise.resolve();
  /** The newest segment this instance wrote to: the segment number never goes back (clock steps). */
  #segment = -Infinity;
  /** Segments whose table this instance knows to exist, with the page columns. */
  #ready = new Set<number>();

  private constructor(db: SqlDb, opts: EventLogOptions) {
    if (!(opts.retentionS > 0)) throw new Error('EventLog: retentionS must be positive');
    this.#db = db;
    this.#retentionMs = opts.retentionS * 1000;
    this.#segmentMs = (opts.segmentS ?? Math.max(60, opts.retentionS / 6)) * 1000;
    if (!(this.#segmentMs > 0)) throw new Error('EventLog: segmentS must be positive');
    this.#now = opts.now ?? Date.now;
  }

  /** Opens the event log on a store, creating its catalog and id source when missing. */
  static async open(db: SqlDb, opts: EventLogOptions): Promise<EventLog> {
    const log = new EventLog(db, opts);
    if (db.dialect === 'sqlite') await log.#initSqlite();
    else await log.#initPg();
    return log;
  }

  // ── setup ─────────────────────────────────────────────────────────────────────────────────
  async #initSqlite(): Promise<void> {
    const have = async () =>
      (await this.#db.all<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('event_segments', 'event_ids')")).length === 2;
    if (await have()) return; // a read-only connection can open an existing log
    await this.#db.tx(async (t) => {
      await t.run(`CREATE TABLE IF NOT EXISTS event_segments (segment INTEGER PRIMARY KEY, table_name TEXT NOT NULL,
        first_id INTEGER, last_id INTEGER, created_ms INTEGER NOT NULL, closed_ms INTEGER NOT NULL)`);
      await t.run('CREATE TABLE IF NOT EXISTS event_ids (id INTEGER PRIMARY KEY CHECK (id = 1), last_id INTEGER NOT NULL)');
      const history = await t.all("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'run_history'");
      const [seed] = await t.all<{ n: number | null }>(
        `SELECT max(COALESCE((SELECT max(last_id) FROM event_segments), 0)${history.length ? ', COALESCE((SELECT max(event_id) FROM run_history), 0)' : ''}) AS n`,
      );
      await t.run('INSERT OR IGNORE INTO event_ids (id, last_id) VALUES (1, ?)', [Number(seed.n ?? 0)]);
    });
  }

  async #initPg(): Promise<void> {
    const have = async (t: SqlDb) => {
      const [r] = await t.all<{ s: string | null; q: string | null }>("SELECT to_regclass('event_segments')::text AS s, to_regclass('event_ids')::text AS q");
      return r.s !== null && r.q !== null;
    };
    if (await have(this.#db)) return;
    await this.#db.tx(async (t) => {
      await t.all('SELECT pg_advisory_xact_lock(?)', [LOCK_CREATE]);
      if (await have(t)) return;
      await t.run(`CREATE TABLE IF NOT EXISTS event_segments (segment BIGINT PRIMARY KEY, table_name TEXT NOT NULL,
        first_id BIGINT, last_id BIGINT, created_ms BIGINT NOT NULL, closed_ms BIGINT NOT NULL)`);
      const [r] = await t.all<{ h: string | null }>("SELECT to_regclass('run_history')::text AS h");
      let seed = 0;
      if (r.h !== null) seed = Number((await t.all<{ n: number | null }>('SELECT max(event_id) AS n FROM run_history'))[0].n ?? 0);
      const [c] = await t.all<{ n: number | null }>('SELECT max(last_id) AS n FROM event_segments');
      seed = Math.max(seed, Number(c.n ?? 0));
      // CACHE 1 (the default): a per-connection cache would hand out ids out of order within one instance.
      await t.run(`CREATE SEQUENCE IF NOT EXISTS event_ids AS BIGINT START WITH ${Math.floor(seed) + 1} MINVALUE 1`);
    });
  }

  /** The segment for a write now: never below the last one this instance used. */
  #segmentNow(now: number): number {
    const s = Math.floor(now / this.#segmentMs);
    if (s > this.#segment) this.#segment = s;
    return this.#segment;
  }

  // ── append ────────────────────────────────────────────────────────────────────────────────
  /** appendRuns, returning the rows with their ids (copies: the runs given are not changed). */
  async append(runs: RunRecord[]): Promise<EventRow[]> {
    return eventRows(runs, await this.appendRuns(runs));
  }

  /**
   * Assigns ids (unique, strictly increasing, also across several instances sharing one PostgreSQL store) and writes
   * the batch in one transaction; resolves to the first id: run i's is first + i (ids follow the runs' order).
   */
  appendRuns(runs: RunRecord[]): Promise<number> {
    if (!runs.length) return Promise.resolve(0);
    if (this.#db.dialect === 'sqlite') return this.#appendSqlite(runs);
    const next = this.#chain.then(() => this.#appendPg(runs));
    this.#chain = next.catch(() => undefined);
    return next;
  }

  #appendSqlite(runs: RunRecord[]): Promise<number> {
    return this.#db.tx(async (t) => {
      const now = this.#now();
      const [state] = await t.all<{ last_id: number; seg: number | null }>(
        'SELECT (SELECT last_id FROM event_ids WHERE id = 1) AS last_id, (SELECT max(segment) FROM event_segments) AS seg',
      );
      // Store-wide, the segment never goes back: segments then never overlap in ids.
      const newest = state.seg === null ? -Infinity : Number(state.seg);
      const segment = Math.max(this.#segmentNow(now), newest);
      const table = SEGMENT_TABLE(segment);
      if (segment !== newest) {
        await t.run(segmentTableSql('sqlite', table));
        await t.run('INSERT OR IGNORE INTO event_segments (segment, table_name, first_id, last_id, created_ms, closed_ms) VALUES (?, ?, NULL, NULL, ?, ?)', [
          segment,
          table,
          now,
          now,
        ]);
      } else if (!this.#ready.has(segment)) await addPageColumns(t, table);
      this.#remember(segment);
      const first = Number(state.last_id) + 1;
      await insertPages(t, table, first, runs);
      const last = first + runs.length - 1;
      await t.run(
        `UPDATE event_segments SET first_id = COALESCE(first_id, ?), last_id = ?,
        closed_ms = CASE WHEN closed_ms > ? THEN closed_ms ELSE ? END WHERE segment = ?`,
        [first, last, now, now, segment],
      );
      await t.run('UPDATE event_ids SET last_id = ? WHERE id = 1', [last]);
      return first;
    });
  }

  async #appendPg(runs: RunRecord[]): Promise<number> {
    const now = this.#now();
    const segment = this.#segmentNow(now);
    for (let attempt = 0; ; attempt++) {
      await this.#ensurePgSegment(segment, now);
      try {
        return await this.#appendOncePg(segment, now, runs);
      } catch (e) {
        const code = (e as { code?: string }).code;
        // The segment's table was dropped under us (only with clocks far apart): make it again, once.
        if (code === '42P01' && attempt === 0) this.#ready.delete(segment);
        // Ids taken inside the range by an instance of an earlier release (nextval a row, without the lock): the range again.
        else if (code !== '23505' || attempt >= 3) throw e;
      }
    }
  }

  /**
   * One try of the append, as one statement (appendPg); returns the first id. A page is made a turn of the event loop, as the
   * pages of one INSERT each were: on the acceptor's thread a backlog's slice of 5,000 runs made at once would hold its
   * calls for milliseconds.
   */
  async #appendOncePg(segment: number, now: number, runs: RunRecord[]): Promise<number> {
    const n = runs.length;
    const params: unknown[] = [LOCK_APPEND, n, n, now, segment];
    let pages = 0;
    for (const p of pagesOf(runs)) {
      params.push(p.at, runs[p.at].executed_at, p.end - 1, p.lines);
      pages++;
      if (p.end < n) await nextTurn();
    }
    const [r] = await this.#db.all<{ lo: number; written: number }>(appendPg(SEGMENT_TABLE(segment), pages), params);
    if (Number(r.written) !== pages) throw Object.assign(new Error(`event ids from ${r.lo} are taken`), { code: '23505' });
    return Number(r.lo);
  }

  #remember(segment: number): void {
    if (this.#ready.size > 64) this.#ready.clear();
    this.#ready.add(segment);
  }

  async #ensurePgSegment(segment: number, now: number): Promise<void> {
    if (this.#ready.has(segment)) return;
    const table = SEGMENT_TABLE(segment);
    await this.#db.tx(async (t) => {
      await t.all('SELECT pg_advisory_xact_lock(?)', [LOCK_CREATE]);
      await t.run(segmentTableSql('postgres', table));
      await addPageColumns(t, table);
      await t.run(
        `INSERT INTO event_segments (segment, table_name, first_id, last_id, created_ms, closed_ms)
        VALUES (?, ?, NULL, NULL, ?, ?) ON CONFLICT (segment) DO NOTHING`,
        [segment, table, now, now],
      );
    });
    this.#remember(segment);
  }

  // ── read ──────────────────────────────────────────────────────────────────────────────────
  /** Events with id > after, oldest first, at most limit, optionally filtered. */
  async read(opts: EventReadOptions): Promise<EventRow[]> {
    const limit = Math.max(0, Math.floor(opts.limit));
    if (!limit) return [];
    if (this.#db.dialect === 'sqlite') return this.#readFrom(this.#db, opts, limit);
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#db.tx(async (t) => {
          await t.run('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
          return this.#readFrom(t, opts, limit);
        });
      } catch (e) {
        // A segment listed in the snapshot was dropped meanwhile: read again with a fresh catalog.
        if ((e as { code?: string }).code !== '42P01' || attempt >= 3) throw e;
      }
    }
  }

  /**
   * Walks the segments that hold ids above `after`, lowest first_id first, and merges: a later segment is read
   * only while it may still hold one of the `limit` smallest ids (segments from several PostgreSQL instances can
   * overlap in ids; on SQLite they never do, so this is normally one or two queries).
   */
  async #readFrom(db: SqlDb, opts: EventReadOptions, limit: number): Promise<EventRow[]> {
    const after = opts.after ?? 0;
    const segments = await db.all<SegmentInfo>(
      'SELECT segment, table_name, first_id, last_id, closed_ms FROM event_segments WHERE last_id > ? ORDER BY first_id, segment',
      [after],
    );
    let rows: RawEvent[] = [];
    for (const s of segments) {
      const bound = rows.length >= limit ? Number(rows[limit - 1].id) : null;
      if (bound !== null && Number(s.first_id) >= bound) break;
      let got: RawEvent[];
      try {
        got = await readSegment(db, s.table_name, after, bound, opts, limit);
      } catch (e) {
        if (db.dialect === 'sqlite' && /no such table/.test((e as Error).message)) continue; // expired meanwhile
        throw e;
      }
      if (!got.length) continue;
      if (rows.length) {
        rows = rows.concat(got);
        rows.sort((a, b) => Number(a.id) - Number(b.id));
        if (rows.length > limit) rows.length = limit;
      } else rows = got;
    }
    return rows.map(toEvent);
  }

  // ── retention ─────────────────────────────────────────────────────────────────────────────
  /** Drops every segment whose newest event is older than the retention (whole tables). Returns how many were dropped. */
  async expire(): Promise<number> {
    const cutoff = () => this.#now() - this.#retentionMs;
    const due = await this.#db.all<{ segment: number }>('SELECT segment FROM event_segments WHERE closed_ms < ? ORDER BY segment', [cutoff()]);
    let dropped = 0;
    for (const { segment } of due) {
      // One transaction per segment, so a writer waits for one DROP at most.
      const gone = await this.#db.tx(async (t) => {
        const table = SEGMENT_TABLE(segment);
        if (t.dialect === 'postgres') {
          await t.all('SELECT pg_advisory_xact_lock(?)', [LOCK_EXPIRE]);
          // The table first (waits for appenders in flight, the order they lock in), then a fresh look at the catalog.
          const [r] = await t.all<{ t: string | null }>('SELECT to_regclass(?)::text AS t', [table]);
          if (r.t !== null) await t.run(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
        }
        const rows = await t.all<{ closed_ms: number; table_name: string }>('SELECT closed_ms, table_name FROM event_segments WHERE segment = ?', [segment]);
        if (!rows.length || !(Number(rows[0].closed_ms) < cutoff())) return false;
        await t.run(`DROP TABLE IF EXISTS ${rows[0].table_name}`);
        await t.run('DELETE FROM event_segments WHERE segment = ?', [segment]);
        return true;
      });
      if (gone) {
        dropped++;
        this.#ready.delete(segment);
      }
    }
    return dropped;
  }

  /** The newest id written (0 when none). */
  async lastId(): Promise<number> {
    if (this.#db.dialect === 'sqlite') {
      const [r] = await this.#db.all<{ n: number | null }>(
        'SELECT max(COALESCE((SELECT last_id FROM event_ids WHERE id = 1), 0), COALESCE((SELECT max(last_id) FROM event_segments), 0)) AS n',
      );
      return Number(r.n ?? 0);
    }
    // The newest committed id; when every segment has expired, the sequence's position (no event is above it).
    const [r] = await this.#db.all<{ n: number | null }>(
      `SELECT COALESCE((SELECT max(last_id) FROM event_segments),
                       (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM event_ids), 0) AS n`,
    );
    return Number(r.n ?? 0);
  }
}

/**
 * The first `limit` events of a segment's table with ids above `after` (and below `bound`, when given) that pass the
 * read's filters, in id order: page rows one, then up to PAGES_A_READ at a time (a tail read needs one), decoded and
 * filtered here; rows of one event filtered by the statement. A page holds at most LARGEST_PAGE ids, so none that
 * starts LARGEST_PAGE below `after` can hold one above it.
 */
async function readSegment(db: SqlDb, table: string, after: number, bound: number | null, f: EventReadOptions, limit: number): Promise<RawEvent[]> {
  const c = [f.query ?? null, f.key ?? null, f.status ?? null, f.since ?? null, f.until ?? null];
  // A page holds a line that passes only if it holds the filters' fields as a line writes them: the server skips the
  // others without sending them (a read that matches little decoded every page here, 3-8 times slower than filtering
  // rows of one event had been: bench/results/recorder-2026-12-05-pages).
  const n = [c[0], c[1], c[2]].map((v) => (v === null ? null : `\t${copyField(v)}\t`));
  const holds = db.dialect === 'sqlite' ? `instr(${TEXT}, ?) > 0` : `strpos(${TEXT}, ?) > 0`;
  const out: RawEvent[] = [];
  for (let from = after, take = 1; ; take = Math.min(PAGES_A_READ, take * 2)) {
    const rows = await db.all<SegmentRow>(
      `SELECT ${COLUMNS} FROM ${table}
        WHERE id > CAST(? AS BIGINT) AND COALESCE(last_id, id) > CAST(? AS BIGINT) AND (CAST(? AS BIGINT) IS NULL OR id < ?)
          AND (${TEXT} IS NOT NULL OR ((CAST(? AS TEXT) IS NULL OR query = ?) AND (CAST(? AS TEXT) IS NULL OR key_name = ?)
            AND (CAST(? AS TEXT) IS NULL OR status = ?) AND (CAST(? AS TEXT) IS NULL OR executed_at >= ?)
            AND (CAST(? AS TEXT) IS NULL OR executed_at < ?)))
          AND (${TEXT} IS NULL OR ((CAST(? AS TEXT) IS NULL OR ${holds}) AND (CAST(? AS TEXT) IS NULL OR ${holds})
            AND (CAST(? AS TEXT) IS NULL OR ${holds})))
        ORDER BY id LIMIT ?`,
      [from - LARGEST_PAGE, from, bound, bound, c[0], c[0], c[1], c[1], c[2], c[2], c[3], c[3], c[4], c[4], n[0], n[0], n[1], n[1], n[2], n[2], take],
    );
    for (const r of rows) {
      if (r.body === null) out.push(r);
      else for (const e of pageEvents(r)) if (e.id > from && (bound === null || e.id < bound) && passes(e, f)) out.push(e);
      if (out.length >= limit) {
        out.length = limit;
        return out;
      }
    }
    if (rows.length < take) return out;
    const last = rows[rows.length - 1];
    from = Number(last.last_id ?? last.id);
  }
}

interface RawEvent {
  id: number;
  executed_at: string;
  query: string | null;
  key_name: string | null;
  status: 'success' | 'error';
  /** The rest: payloadJson's JSON (a row of one event, a line before stop 57), or a line's fields read (restOf). */
  payload: string | Record<string, unknown>;
}

/** A segment table's row: one event (written before pages: body NULL), or a page of events id..last_id. */
interface SegmentRow extends RawEvent {
  last_id: number | null;
  body: string | null;
}

/** The runs as pages of at most PAGE events and about PAGE_TEXT characters: each its runs (`at` to before `end`) and its text. */
function* pagesOf(runs: RunRecord[]): Generator<{ at: number; end: number; lines: string }> {
  for (let at = 0; at < runs.length; ) {
    let lines = pageLine(runs[at], true);
    let end = at + 1;
    for (; end < runs.length && end - at < PAGE && lines.length < PAGE_TEXT; end++) lines += `\n${pageLine(runs[end], false)}`;
    yield { at, end, lines };
    at = end;
  }
}

/**
 * SQLite: the runs as pages, ids from `first` on, one INSERT each. A page whose ids a row already holds is refused as
 * the key refuses a page that starts on one (23505; the append then takes another range).
 */
async function insertPages(t: SqlDb, table: string, first: number, runs: RunRecord[]): Promise<void> {
  for (const { at, end, lines } of pagesOf(runs)) {
    const lo = first + at;
    const hi = first + end - 1;
    const written = await t.run(
      `INSERT INTO ${table} (${PAGE_COLUMNS}) SELECT CAST(? AS BIGINT), ?, 'page', '{}', CAST(? AS BIGINT), ?
        WHERE NOT EXISTS (SELECT 1 FROM ${table} WHERE id BETWEEN CAST(? AS BIGINT) AND CAST(? AS BIGINT))`,
      [lo, runs[at].executed_at, hi, lines, lo, hi],
    );
    if (written !== 1) throw Object.assign(new Error(`event ids ${lo}-${hi} are taken`), { code: '23505' });
  }
}

/**
 * A run's line in a page: executed_at, query, key_name and status, then the optional fields (error, code, masked, an
 * ad-hoc run's sql and params) as JSON ('{}' for none), then the others in RunRecord's order; each text as COPY's text
 * writes a field (copyField), each number as JS writes it, null as \N. Positions, not a JSON object a run: the
 * lookup's line is about 105 characters, not 211, and no JSON is made for a run history does not keep. Releases before
 * stop 57 wrote the first four and then the rest as JSON (payloadJson): a line of five fields is read as that.
 *
 * A line not `first` in its page whose run has the same fields as the line before's, but for the request id, rows and
 * the two durations, is those four only (`shared.same`): the lookup's line about 35 characters, not 105. The bytes
 * had cost the thread that writes them (making the text, the driver's copy, the write to the socket), and the store's
 * server reads, checks and compresses them: the executor's part of recording 2.68 → 2.08 µs a run at the medians on
 * a PostgreSQL store (bench/results/recorder-2026-12-06-stop64-short). A page still holds
 * each run's query, key and status whole at least once, so the readers' `strpos` finds every page that may hold a
 * filter's event.
 */
function pageLine(r: RunRecord, first: boolean): string {
  shared.same = true;
  if (r !== shared.run) shareFields(r);
  const own = `${copyField(r.request_id)}\t${lineNumber(r.rows)}\t${lineNumber(r.duration_ms)}\t${lineNumber(r.serialization_ms)}`;
  return first || !shared.same ? `${shared.head}${own}${shared.tail}` : own;
}

/**
 * The fields a page's runs mostly have in common, as the last run's line wrote them: up to the request id (its second,
 * query, key, status, version, kind, connection, optional fields), and the transport after the numbers. Made again
 * only when a run differs in one of them; copyField's tests and the joins of those fields had been about half the cost
 * of making a line. A run's optional fields are its own (an error's message, an ad-hoc run's text), but for a mask list
 * alone: the runs of a governed plan and key all hold the same array, so they share its JSON too. Made for
 * each such run, it had cost a governed lookup's recording about 1 µs of CPU a run (.probe, a CPU profile of the
 * gateway inline on each key).
 */
const shared = { run: null as RunRecord | null, head: '', tail: '', same: false };
function shareFields(r: RunRecord): void {
  const s = shared.run;
  const own = hasOwnExtra(r);
  const extra = own || r.masked !== undefined;
  if (
    own ||
    s === null ||
    r.executed_at !== s.executed_at ||
    r.query !== s.query ||
    r.key_name !== s.key_name ||
    r.status !== s.status ||
    r.version !== s.version ||
    r.kind !== s.kind ||
    r.connection_name !== s.connection_name ||
    r.transport !== s.transport ||
    r.masked !== s.masked
  ) {
    shared.same = false;
    shared.head = `${copyField(r.executed_at)}\t${copyField(r.query)}\t${copyField(r.key_name)}\t${copyField(r.status)}\t${extra ? extraJson(r) : '{}'}\t${lineNumber(r.version)}\t${copyField(r.kind)}\t${copyField(r.connection_name)}\t`;
    shared.tail = `\t${copyField(r.transport)}`;
  }
  shared.run = own ? null : r;
}

/** A number in a line: as JSON would give it back (null, NaN and the infinities as null). */
const lineNumber = (n: number | null): string => (n !== null && Number.isFinite(n) ? `${n}` : '\\N');
const numberOf = (s: string): number | null => (s === '\\N' ? null : Number(s));

/** A line's fields after the four with columns, as payloadJson's JSON gives them back (the same keys, in its order). */
function restOf(f: string[]): Record<string, unknown> {
  const rest: Record<string, unknown> = {
    version: numberOf(f[5]),
    kind: fromCopyField(f[6]),
    connection_name: fromCopyField(f[7]),
    request_id: fromCopyField(f[8]),
    rows: numberOf(f[9]),
    duration_ms: numberOf(f[10]),
    serialization_ms: numberOf(f[11]),
    transport: fromCopyField(f[12]),
  };
  return f[4] === '{}' ? rest : Object.assign(rest, JSON.parse(f[4]));
}

/** The events of a page row, ids from its id on, in order. */
function pageEvents(row: SegmentRow): RawEvent[] {
  const lines = row.body!.split('\n');
  const first = Number(row.id);
  const out = new Array<RawEvent>(lines.length);
  let whole: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    let f = lines[i].split('\t');
    // A short line: the line before's fields, but for its own four (pageLine).
    if (f.length === 4) f = [...whole.slice(0, 8), ...f, whole[12]];
    else whole = f;
    out[i] = {
      id: first + i,
      executed_at: fromCopyField(f[0])!,
      query: fromCopyField(f[1]),
      key_name: fromCopyField(f[2]),
      status: fromCopyField(f[3]) as RawEvent['status'],
      payload: f.length === 5 ? f[4] : restOf(f),
    };
  }
  return out;
}

/** Whether an event passes a read's filters (on a page's events; rows of one event are filtered by the query). */
function passes(e: RawEvent, f: EventReadOptions): boolean {
  return (
    (f.query === undefined || e.query === f.query) &&
    (f.key === undefined || e.key_name === f.key) &&
    (f.status === undefined || e.status === f.status) &&
    (f.since === undefined || e.executed_at >= f.since) &&
    (f.until === undefined || e.executed_at < f.until)
  );
}

/** The columns of a segment table that tables made by earlier releases may lack: before pages, and before stop 64. */
const PAGE_ADDED = [
  ['last_id', 'BIGINT'],
  ['body', 'TEXT'],
  ['lines', 'TEXT'],
] as const;

/**
 * A segment table made before pages, or before `lines`, gets the columns, on this release's first append to it
 * (PostgreSQL: under LOCK_CREATE; SQLite's BIGINT is its INTEGER). PostgreSQL compresses a page's lines with lz4 where
 * the server has it (PostgreSQL 14 and later, built with it): a lookup's page of 52 KB (whole lines, before stop 64) was
 * stored in about 17, and the server's CPU for an append went 2.00 → 1.31 µs a run
 * (bench/results/eventappend-2026-12-06-lz4, lower in every round). Elsewhere the lines are kept uncompressed
 * (STORAGE EXTERNAL): pglz cost the server more than writing it whole (bench/results/levers-2026-12-05-event-log-pages).
 */
async function addPageColumns(t: SqlDb, table: string): Promise<void> {
  const missing = (have: string[]) => PAGE_ADDED.filter(([name]) => !have.includes(name));
  if (t.dialect === 'sqlite') {
    const have = await t.all<{ name: string }>(`SELECT name FROM pragma_table_info('${table}')`);
    for (const [name, type] of missing(have.map((c) => c.name))) await t.run(`ALTER TABLE ${table} ADD COLUMN ${name} ${type}`);
    return;
  }
  const [{ lz4 }] = await t.all<{ lz4: boolean }>(
    "SELECT EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)) AS lz4",
  );
  // attcompression is PostgreSQL 14's, as lz4 is.
  const have = await t.all<{ name: string; s: string; c: string }>(
    `SELECT attname AS name, attstorage AS s, ${lz4 ? 'attcompression::text' : "''"} AS c FROM pg_attribute
      WHERE attrelid = to_regclass(?) AND attnum > 0 AND NOT attisdropped`,
    [table],
  );
  const add = missing(have.map((c) => c.name));
  if (add.length) await t.run(`ALTER TABLE ${table} ${add.map(([name, type]) => `ADD COLUMN ${name} ${type}`).join(', ')}`);
  const lines = have.find((c) => c.name === 'lines');
  if (lz4) {
    if (lines?.s !== 'x' || lines?.c !== 'l')
      await t.run(`ALTER TABLE ${table} ALTER COLUMN lines SET STORAGE EXTENDED, ALTER COLUMN lines SET COMPRESSION lz4`);
  } else if (lines?.s !== 'e') await t.run(`ALTER TABLE ${table} ALTER COLUMN lines SET STORAGE EXTERNAL`);
}

/**
 * A run's fields that have no column of their own, as JSON: its history entry (store.ts), and the payload of an event
 * written as a row of its own (before pages) or as a page line before stop 57. Never holds a raw newline.
 */
export function payloadJson(run: RunRecord & { id?: number }): string {
  if (hasExtra(run)) {
    const { id, executed_at, query, key_name, status, ...rest } = run;
    return JSON.stringify(rest);
  }
  // Nearly every run has only the fixed fields: written one by one, in the order unpackRuns gives them (so the text is
  // the one JSON.stringify makes of the rest), about two thirds of the rest's copy and its JSON.stringify
  // (`node dist/bench/payloadJson.js`; most of either is writing the durations' decimals).
  return `{"version":${jsonNumber(run.version)},"kind":${run.kind === 'adhoc' ? '"adhoc"' : '"saved"'},"connection_name":${jsonText(run.connection_name)},"request_id":${JSON.stringify(run.request_id)},"rows":${jsonNumber(run.rows)},"duration_ms":${jsonNumber(run.duration_ms)},"serialization_ms":${jsonNumber(run.serialization_ms)},"transport":${transportJson(run.transport)}}`;
}

/**
 * Transports are a handful of names: each one's JSON is made once (a name beyond the first 16 each time), and `kind`
 * is written as a constant. A small gain at most: in three pairs of runs of `node dist/bench/payloadJson.js --rounds 8
 * [--from <the build before>]` (the median of each's last five rounds) 1.34 / 1.36 / 0.85 → 1.10 / 1.00 / 0.76 µs a run
 * with the bench's first runs, 0.88 / 0.85 / 1.01 → 0.72 / 1.08 / 1.08 with its runs since bb188ae: within the noise.
 */
const TRANSPORTS = new Map<string, string>();
function transportJson(t: string): string {
  let json = TRANSPORTS.get(t);
  if (json === undefined) {
    json = JSON.stringify(t);
    if (TRANSPORTS.size < 16) TRANSPORTS.set(t, json);
  }
  return json;
}

/** A number as JSON.stringify writes it (null, NaN and the infinities as null). */
const jsonNumber = (n: number | null): string => (n !== null && Number.isFinite(n) ? `${n}` : 'null');
const jsonText = (s: string | null): string => (s === null ? 'null' : JSON.stringify(s));

/**
 * The runs as events, with ids from `first` on in their order (as appendRuns gives them): copies, the runs themselves
 * left alone (the recorder also writes them to history). `Object.assign({ id }, run)` costs a fraction of
 * `{ ...run, id }` on V8.
 */
export function eventRows(runs: RunRecord[], first: number): EventRow[] {
  const out = new Array<EventRow>(runs.length);
  for (let i = 0; i < runs.length; i++) out[i] = Object.assign({ id: first + i }, runs[i]);
  return out;
}

function toEvent(r: RawEvent): EventRow {
  return runOf(r.id, r.query, r.executed_at, r.status, r.key_name, r.payload);
}

/**
 * A run read back from its columns and its payload (payloadJson, or a page line's fields read by restOf), the event
 * log's rows and the history rings' alike. A payload that holds the column fields too (history entries written before it held only
 * the rest) agrees with them.
 */
export function runOf(
  id: number | string,
  query: string | null,
  executed_at: string,
  status: 'success' | 'error',
  key_name: string | null,
  payload: string | Record<string, unknown>,
): EventRow {
  return { id: Number(id), query, executed_at, status, key_name, ...(typeof payload === 'string' ? JSON.parse(payload) : payload) };
}
