// The run panel: a form built from the published version's parameters, the answer as a paged table,
// and the curl command for the same call (with the key as a variable, never its value). "Run as key"
// sends another key's secret instead of the admin key, and reads that key's /catalog to mark the
// columns it gets masked and to say why it would be refused.
import { useState } from 'preact/hooks';
import { type ApiError, call } from '../api';
import { TextField } from '../ui';
import type { QueryDetail } from './queryEditor';

const PAGE_SIZE = 20;
const DONE: Record<string, string> = { hash: 'hashed', mask: 'masked', null: 'nulled', drop: 'dropped' };

interface Catalog {
  queries: { name: string; masked: { column: string; action: string }[] | null; refused: { code: string; message: string } | null }[];
}

export function RunPanel({ query }: { query: QueryDetail }) {
  const version = query.versions.find((v) => v.version === query.published_version);
  const params = Object.entries(version?.parameters ?? {});
  const [values, setValues] = useState<Record<string, string>>(() =>
    Object.fromEntries(params.map(([n, r]) => [n, r.default === undefined ? '' : String(r.default)])),
  );
  const [asKey, setAsKey] = useState('');
  const [page, setPage] = useState(1);
  const [rows, setRows] = useState<Record<string, unknown>[] | null>(null);
  const [more, setMore] = useState(false);
  const [masked, setMasked] = useState<Map<string, string>>(new Map());
  const [refusal, setRefusal] = useState('');
  const [error, setError] = useState<ApiError | null>(null);
  const search = (p: number) => {
    const s = new URLSearchParams();
    for (const [k, v] of Object.entries(values)) if (v !== '') s.set(k, v);
    s.set('page', String(p));
    s.set('page_size', String(PAGE_SIZE));
    return s.toString();
  };
  const path = (p: number) => `${query.endpoint}?${search(p)}`;
  const run = async (p: number) => {
    setError(null);
    setRefusal('');
    const key = asKey.trim() || undefined;
    try {
      if (key) {
        const cat = await call<Catalog>('GET', '/catalog', undefined, key);
        const entry = cat.data.queries.find((q) => q.name === query.name);
        setMasked(new Map((entry?.masked ?? []).map((m) => [m.column, m.action])));
        setRefusal(entry ? (entry.refused?.message ?? '') : 'This key does not reach this query.');
      } else setMasked(new Map());
      const r = await call<Record<string, unknown>[] | { message: string }>('GET', path(p), undefined, key);
      setRows(Array.isArray(r.data) ? r.data : []);
      setMore(r.headers.get('X-Has-More') === 'true');
      setPage(p);
    } catch (e) {
      setRows(null);
      setError(e as ApiError);
    }
  };
  if (!version) return <p class="card">Publish a version to run it.</p>;
  const columns = rows?.length ? Object.keys(rows[0]) : [];
  const curl = `curl -H "X-API-Key: $QUERYAPIGATE_KEY" '${location.origin}${path(page)}'`;
  return (
    <div class="card">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void run(1);
        }}
        aria-label={`Run ${query.name}`}
      >
        <div class="grid">
          {params.map(([n, r]) => (
            <TextField
              key={n}
              label={`${n}${r.required ? ' (required)' : ''}`}
              value={values[n] ?? ''}
              onInput={(v) => setValues({ ...values, [n]: v })}
              hint={[r.type, r.enum ? `one of ${r.enum.join(', ')}` : ''].filter(Boolean).join('; ') || undefined}
              error={error?.code.startsWith('param_') && error.message.includes(n) ? error.message : undefined}
            />
          ))}
          <TextField
            label="Run as key"
            type="password"
            autocomplete="off"
            value={asKey}
            onInput={setAsKey}
            hint="A key's secret, to see what that key gets; empty: the admin key. Never stored."
          />
        </div>
        <div class="actions">
          <button type="submit">Run</button>
        </div>
      </form>
      {refusal && (
        <p class="error" role="alert">
          Refused for this key: {refusal}
        </p>
      )}
      {error && (
        <p class="error" role="alert">
          {error.status ? `${error.status} ${error.code}: ` : ''}
          {error.message}
        </p>
      )}
      <h2>curl</h2>
      <pre class="curl">{curl}</pre>
      {rows && (
        <section aria-labelledby="answer-title">
          <h2 id="answer-title">Answer (page {page})</h2>
          {rows.length === 0 ? (
            <p>No rows.</p>
          ) : (
            <div class="scroll">
              <table class="compact answer">
                <thead>
                  <tr>
                    {columns.map((c) => (
                      <th scope="col" key={c}>
                        {c}
                        {masked.has(c) && <span class="badge masked"> {DONE[masked.get(c)!] ?? masked.get(c)}</span>}
                      </th>
                    ))}
                  </tr>
                </thead>
                <tbody>
                  {rows.map((r, i) => (
                    <tr key={i}>
                      {columns.map((c) => (
                        <td key={c}>{r[c] === null ? <em>null</em> : typeof r[c] === 'object' ? JSON.stringify(r[c]) : String(r[c])}</td>
                      ))}
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
          <div class="actions">
            <button type="button" disabled={page <= 1} onClick={() => run(page - 1)}>
              Previous page
            </button>
            <button type="button" disabled={!more} onClick={() => run(page + 1)}>
              Next page
            </button>
          </div>
        </section>
      )}
    </div>
  );
}
