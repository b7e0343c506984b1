// In charge of GET /api/v1/alerts (contract 3.8, experimental): what needs an administrator's eye,
// derived on each request from what the server already keeps, never stored: the configuration
// (open_server), run history (connection_failing, query_errors, query_timeouts, query_slow), the
// keys table (key_expired, key_expiring, key_unused), the audit log (break_glass_used), the
// instances' heartbeats (instances_not_shared, instances_versions_differ), and two counts this
// process keeps in memory (`AlertSignals`): key refusals (key_rate_limited) and runs the recorder
// dropped (history_dropped), api/signals.ts. Nothing here is read on a call's path.
import { keyEndsAt } from '../auth/keys.js';
import { jsonAnswer } from '../contract/exchange.js';
import { localTimestamp, type RecentRun } from '../store/store.js';
import { instanceProblems, liveInstances } from './instances.js';
import { type ApiRouter, type ControlContext, NOTHING_CHANGED } from './routes.js';

export type Severity = 'critical' | 'warning' | 'info';

export interface Alert {
  id: string;
  severity: Severity;
  kind: string;
  title: string;
  detail: string;
  since: string;
  target: { type: 'key' | 'query' | 'connection' | 'settings'; name: string };
}

const DAY_MS = 86_400_000;
/** query_errors, query_timeouts, query_slow: each query's newest runs within 7 days, judged from at least 10. */
const RUNS_JUDGED = 50;
const RUNS_NEEDED = 10;
const RUNS_WINDOW_MS = 7 * DAY_MS;
/**
 * Runs read at most for one check (the newest; 50 per query, so 400 busy queries): each is parsed in
 * the acceptor, so the check stays a few milliseconds of its time however large the store.
 */
const RUNS_READ_MAX = 20_000;
/** connection_failing: judged from the connection's newest run within this window. */
const CONNECTION_WINDOW_MS = DAY_MS;
/** key_expiring: a key valid for at most this long. */
const EXPIRING_MS = 7 * DAY_MS;
/** key_rate_limited: this many refusals of one key within the last hour. */
const REFUSALS_PER_HOUR = 10;
/** history_dropped and break_glass_used: within the last day. */
const RECENT_MS = DAY_MS;

const SEVERITY_ORDER: Record<Severity, number> = { critical: 0, warning: 1, info: 2 };

function alert(severity: Severity, kind: string, target: Alert['target'], title: string, detail: string, since: string): Alert {
  return { id: `${kind}:${target.type}:${target.name}`, severity, kind, title, detail, since, target };
}

/** Every alert that holds now, the most severe first. */
export async function checkAlerts(ctx: ControlContext, now = new Date()): Promise<Alert[]> {
  const t = now.getTime();
  const at = (ms: number) => localTimestamp(new Date(ms));
  const out: Alert[] = [];
  const { config, store } = ctx;

  // open_server: nobody needs a credential to manage the gateway.
  if (!ctx.adminKey && !ctx.jwt && !(await store.anyCredential())) {
    out.push(
      alert(
        'critical',
        'open_server',
        { type: 'settings', name: 'QUERYAPIGATE_API_KEY' },
        'The server is open',
        'No QUERYAPIGATE_API_KEY, no API key and no administrator: every caller is an administrator. Set QUERYAPIGATE_API_KEY (queryapigate init writes one).',
        ctx.signals.startedAt,
      ),
    );
  }

  const runs = await store.recentRuns(at(t - RUNS_WINDOW_MS), RUNS_JUDGED, RUNS_READ_MAX);
  out.push(...connectionAlerts(runs, at(t - CONNECTION_WINDOW_MS), new Set((await store.listConnections()).map((c) => c.name))));
  out.push(...queryAlerts(runs, config.alertErrorRate, config.slowQueryThreshold * 1000));

  // Keys: expired, expiring, unused (active keys only: an inactive one is off on purpose).
  const unusedMs = config.alertKeyUnusedDays * DAY_MS;
  for (const k of await store.listKeys()) {
    if (!k.active) continue;
    const ends = keyEndsAt(k.expires_at);
    if (ends && t >= ends.getTime()) {
      out.push(
        alert(
          'warning',
          'key_expired',
          { type: 'key', name: k.name },
          `Key ${k.name} has expired`,
          `It expired at the end of ${k.expires_at}; calls with it are refused (401).`,
          at(ends.getTime()),
        ),
      );
      continue;
    }
    if (ends && t + EXPIRING_MS >= ends.getTime()) {
      out.push(
        alert(
          'warning',
          'key_expiring',
          { type: 'key', name: k.name },
          `Key ${k.name} expires soon`,
          `It is valid through ${k.expires_at}.`,
          at(ends.getTime() - EXPIRING_MS),
        ),
      );
    }
    const used = k.last_used_at ?? k.created_at;
    if (unusedMs > 0 && localDate(used).getTime() <= t - unusedMs) {
      const days = Math.floor((t - localDate(used).getTime()) / DAY_MS);
      const what = k.last_used_at ? `last used ${days} days ago` : `never used since it was made ${days} days ago`;
      out.push(alert('info', 'key_unused', { type: 'key', name: k.name }, `Key ${k.name} is unused`, `It was ${what}; revoke it if nobody needs it.`, used));
    }
  }

  // key_rate_limited: counted in this process (each instance counts its own refusals).
  for (const r of ctx.signals.refusals.read(t)) {
    if (r.count < REFUSALS_PER_HOUR) continue;
    out.push(
      alert(
        'warning',
        'key_rate_limited',
        { type: 'key', name: r.name },
        `Key ${r.name} is being rate limited`,
        `${r.count} calls were refused (429) in the last hour on this instance; raise its rate_limit or slow the client.`,
        at(r.firstMs),
      ),
    );
  }

  for (const d of ctx.signals.dropped.read(t)) {
    out.push(
      alert(
        'warning',
        'history_dropped',
        { type: 'settings', name: 'QUERYAPIGATE_HISTORY_MAX_PENDING' },
        'Runs were dropped from history',
        `${d.count} runs were not recorded in the last day on this instance (more were waiting than QUERYAPIGATE_HISTORY_MAX_PENDING holds, or the store was slow).`,
        at(d.firstMs),
      ),
    );
  }

  const instances = await liveInstances(ctx);
  // Since the newest of them started (what made the mix).
  const since =
    instances
      .map((i) => i.started_at)
      .sort()
      .at(-1) ?? '';
  for (const p of instanceProblems(instances, store.db.dialect)) {
    const title = p.kind === 'instances_versions_differ' ? 'Instances run different versions' : 'Instances do not share their state';
    out.push(alert('warning', p.kind, { type: 'settings', name: p.setting }, title, p.message, since));
  }

  const glass = await store.audit.timesOf('break_glass_used', at(t - RECENT_MS));
  if (glass.length) {
    out.push(
      alert(
        'warning',
        'break_glass_used',
        { type: 'settings', name: 'QUERYAPIGATE_API_KEY' },
        'The shared admin key was used while a named owner exists',
        `${glass.length} audit entr${glass.length === 1 ? 'y' : 'ies'} break_glass_used in the last day (each covers up to 10 minutes of use by one instance); use an administrator's token instead.`,
        glass[0],
      ),
    );
  }

  return out.sort(
    (a, b) => SEVERITY_ORDER[a.severity] - SEVERITY_ORDER[b.severity] || byCodeUnits(a.kind, b.kind) || byCodeUnits(a.target.name, b.target.name),
  );
}

/** Names in code-unit order: `localeCompare` would load ICU's collation data into the server for good (about 3 MiB). */
function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** connection_failing: a connection whose newest run (within the window) could not connect; since the first failure of that streak. */
function connectionAlerts(runs: RecentRun[], since: string, existing: Set<string>): Alert[] {
  const byConnection = new Map<string, RecentRun[]>();
  for (const r of runs) {
    if (!r.connection || r.executedAt < since || !existing.has(r.connection)) continue;
    const list = byConnection.get(r.connection);
    if (list) list.push(r);
    else byConnection.set(r.connection, [r]);
  }
  const out: Alert[] = [];
  for (const [name, list] of byConnection) {
    // Newest first (recentRuns orders by event id), so the streak is counted from the latest call.
    let streak = 0;
    while (streak < list.length && list[streak].code === 'connection_failed') streak++;
    if (streak === 0) continue;
    out.push(
      alert(
        'critical',
        'connection_failing',
        { type: 'connection', name },
        `Connection ${name} cannot be reached`,
        `The latest ${streak === 1 ? 'call' : `${streak} calls`} could not connect to the database (connection_failed).`,
        list[streak - 1].executedAt,
      ),
    );
  }
  return out;
}

/** query_errors, query_timeouts and query_slow from each query's newest runs. */
function queryAlerts(runs: RecentRun[], errorRate: number, slowMs: number): Alert[] {
  const byQuery = new Map<string, RecentRun[]>();
  for (const r of runs) {
    const list = byQuery.get(r.query);
    if (list) list.push(r);
    else byQuery.set(r.query, [r]);
  }
  const out: Alert[] = [];
  for (const [name, list] of byQuery) {
    const target = { type: 'query', name } as const;
    const oldestOf = (rs: RecentRun[]) => rs[rs.length - 1].executedAt; // newest first
    const failed = list.filter((r) => !r.ok);
    if (errorRate > 0 && list.length >= RUNS_NEEDED && failed.length * 100 >= errorRate * list.length) {
      const codes = [...new Set(failed.map((r) => r.code ?? 'error'))].join(', ');
      const pct = Math.round((failed.length * 100) / list.length);
      out.push(
        alert(
          'warning',
          'query_errors',
          target,
          `Query ${name} fails often`,
          `${failed.length} of its last ${list.length} runs failed (${pct}%): ${codes}.`,
          oldestOf(failed),
        ),
      );
    }
    const timedOut = list.filter((r) => r.code === 'query_timeout');
    if (timedOut.length) {
      out.push(
        alert(
          'warning',
          'query_timeouts',
          target,
          `Query ${name} times out`,
          `${timedOut.length} of its last ${list.length} runs ran out of time (query_timeout).`,
          oldestOf(timedOut),
        ),
      );
    }
    const durations = list.filter((r) => r.ok && r.durationMs !== null);
    if (slowMs > 0 && durations.length >= RUNS_NEEDED) {
      const sorted = durations.map((r) => r.durationMs as number).sort((a, b) => a - b);
      const median = sorted[Math.floor(sorted.length / 2)];
      if (median >= slowMs) {
        const slow = durations.filter((r) => (r.durationMs as number) >= slowMs);
        out.push(
          alert(
            'warning',
            'query_slow',
            target,
            `Query ${name} is slow`,
            `The median of its last ${durations.length} successful runs took ${median} ms, over QUERYAPIGATE_SLOW_QUERY_THRESHOLD (${slowMs / 1000} s).`,
            oldestOf(slow),
          ),
        );
      }
    }
  }
  return out;
}

/** 'YYYY-MM-DD' or 'YYYY-MM-DD HH:MM:SS' as a local time. */
function localDate(s: string): Date {
  const [y, m, d, hh = 0, mm = 0, ss = 0] = s.split(/[- :T]/).map(Number);
  return new Date(y, m - 1, d, hh, mm, ss);
}

export function alertRoutes(r: ApiRouter): void {
  r.add(
    'GET',
    '/api/v1/alerts',
    async (ctx) => {
      await ctx.flushHistory(); // read-your-writes: the runs made so far are judged, as GET /api/v1/history shows them
      const now = new Date();
      return jsonAnswer(200, { items: await checkAlerts(ctx, now), checked_at: localTimestamp(now) });
    },
    NOTHING_CHANGED,
  );
}
