// History and the live feed: runs with filters (query, key, status, time), one run's detail, and
// the live tail over /events, which resumes where it left off after a reconnect.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import { type FeedEvent, type FeedState, follow } from '../events';
import { FormError, Page, TextField, useLoad } from '../ui';

interface Run {
  query: string | null;
  version: number | null;
  executed_at: string;
  status: string;
  connection_name: string | null;
  key_name: string | null;
  request_id: string;
  rows: number | null;
  duration_ms: number | null;
  transport: string;
  code?: string;
  error?: string;
  masked?: { column: string; action: string }[];
  sql?: string;
}

const FEED_MAX = 200;

export function History(_: { route: string[] }) {
  const [f, setF] = useState({ query: '', key: '', status: '', since: '', until: '' });
  const [applied, setApplied] = useState(f);
  const qs = new URLSearchParams(Object.entries(applied).filter(([, v]) => v)).toString();
  const runs = useLoad(() => api.get<{ items: Run[]; next_cursor: string | null }>(`/api/v1/history?limit=50${qs ? `&${qs}` : ''}`), [qs]);
  const [open, setOpen] = useState<Run | null>(null);
  const set = (k: keyof typeof f) => (v: string) => setF({ ...f, [k]: v });
  return (
    <Page title="History">
      <LiveFeed />
      <form
        class="card"
        aria-label="History filters"
        onSubmit={(e) => {
          e.preventDefault();
          setApplied(f);
        }}
      >
        <div class="grid">
          <TextField label="Query" value={f.query} onInput={set('query')} />
          <TextField label="Key" value={f.key} onInput={set('key')} />
          <label class="field">
            Status
            <select value={f.status} onChange={(e) => set('status')((e.target as HTMLSelectElement).value)}>
              <option value="">any</option>
              <option value="success">success</option>
              <option value="error">error</option>
            </select>
          </label>
          <TextField label="Since" value={f.since} onInput={set('since')} placeholder="YYYY-MM-DD HH:MM:SS" />
          <TextField label="Until" value={f.until} onInput={set('until')} placeholder="YYYY-MM-DD HH:MM:SS" />
        </div>
        <div class="actions">
          <button type="submit">Filter</button>
          <button type="button" class="secondary" onClick={runs.reload}>
            Refresh
          </button>
        </div>
      </form>
      <FormError error={runs.error} />
      <table>
        <caption class="sr-only">Runs, newest first</caption>
        <thead>
          <tr>
            <th scope="col">When</th>
            <th scope="col">Query</th>
            <th scope="col">Key</th>
            <th scope="col">Status</th>
            <th scope="col">Rows</th>
            <th scope="col">ms</th>
            <th scope="col">Detail</th>
          </tr>
        </thead>
        <tbody>
          {runs.data?.items.map((r) => (
            <tr key={r.request_id + r.executed_at}>
              <td>{r.executed_at}</td>
              <td>{r.query ? `${r.query} v${r.version}` : 'ad-hoc'}</td>
              <td>{r.key_name ?? '-'}</td>
              <td>
                <span class={`badge ${r.status}`}>{r.code ?? r.status}</span>
              </td>
              <td>{r.rows ?? '-'}</td>
              <td>{r.duration_ms ?? '-'}</td>
              <td>
                <button type="button" onClick={() => setOpen(r)}>
                  Show <span class="sr-only">run {r.request_id}</span>
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {runs.data?.items.length === 0 && <p>No run matches.</p>}
      {open && (
        <section class="card" aria-labelledby="run-title">
          <h2 id="run-title">Run {open.request_id}</h2>
          <pre>{JSON.stringify(open, null, 2)}</pre>
          <button type="button" class="secondary" onClick={() => setOpen(null)}>
            Close
          </button>
        </section>
      )}
    </Page>
  );
}

/** The newest runs as they happen (GET /events), newest first; used by History and the Overview. */
export function LiveFeed({ onRun, compact = false }: { onRun?: (e: FeedEvent) => void; compact?: boolean }) {
  const [events, setEvents] = useState<FeedEvent[]>([]);
  const [state, setState] = useState<{ s: FeedState; detail?: string }>({ s: 'connecting' });
  useEffect(
    () =>
      follow(
        (e) => {
          onRun?.(e);
          setEvents((old) => [e, ...old].slice(0, FEED_MAX));
        },
        (s, detail) => setState({ s, detail }),
      ),
    [],
  );
  return (
    <section class="card" aria-labelledby="feed-title">
      <h2 id="feed-title">Live feed</h2>
      <p class={`feed-state ${state.s}`} aria-live="polite">
        {state.s === 'live'
          ? 'Live: new runs appear here.'
          : state.s === 'connecting'
            ? 'Connecting...'
            : `Reconnecting${state.detail ? ` (${state.detail})` : ''}...`}
      </p>
      <ol class="feed" aria-label="Runs as they happen">
        {events.slice(0, compact ? 8 : FEED_MAX).map((e) => (
          <li key={e.id} class={e.entry.status}>
            <span>{e.entry.executed_at}</span> <strong>{e.filename ?? 'ad-hoc'}</strong>
            {e.version ? ` v${e.version}` : ''} by {e.entry.key_name ?? '-'}: {e.entry.code ?? e.entry.status}
            {e.entry.rows !== null ? `, ${e.entry.rows} rows` : ''}
            {e.entry.duration_ms !== null ? `, ${e.entry.duration_ms} ms` : ''}
          </li>
        ))}
      </ol>
      {events.length === 0 && state.s === 'live' && <p>No run since this page opened.</p>}
    </section>
  );
}
