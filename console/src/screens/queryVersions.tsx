// A query's versions: their status, publish / unpublish / roll back (publishing an older version),
// and a line diff between any two (jsdiff's diffLines: a well-kept diff, not one written here).
import { diffLines } from 'diff';
import { useState } from 'preact/hooks';
import { api, enc } from '../api';
import { Field, FormError } from '../ui';
import type { QueryDetail, Version } from './queryEditor';

const describe = (v: Version) => `${v.sql}\n\n-- connection: ${v.connection_name ?? '(any)'}\n-- parameters: ${JSON.stringify(v.parameters, null, 1)}`;

export function Versions({ query, onChange }: { query: QueryDetail; onChange: (q: QueryDetail) => void }) {
  const [error, setError] = useState('');
  const vs = query.versions;
  const [from, setFrom] = useState(vs.length > 1 ? vs[vs.length - 2].version : vs[0].version);
  const [to, setTo] = useState(vs[vs.length - 1].version);
  const act = async (path: string, body?: unknown) => {
    setError('');
    try {
      onChange(await api.post<QueryDetail>(`/api/v1/queries/${enc(query.name)}/${path}`, body));
    } catch (e) {
      setError((e as Error).message);
    }
  };
  const a = vs.find((v) => v.version === from);
  const b = vs.find((v) => v.version === to);
  const published = query.published_version;
  return (
    <div class="card">
      <FormError error={error} />
      <table>
        <caption class="sr-only">Versions of {query.name}</caption>
        <thead>
          <tr>
            <th scope="col">Version</th>
            <th scope="col">Status</th>
            <th scope="col">Description</th>
            <th scope="col">Created</th>
            <th scope="col">Runs</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {[...vs].reverse().map((v) => (
            <tr key={v.version}>
              <th scope="row">v{v.version}</th>
              <td>
                <span class={`badge ${v.status}`}>{v.status}</span>
              </td>
              <td>{v.description}</td>
              <td>{v.created_at}</td>
              <td>{v.run_count ?? 0}</td>
              <td class="row-actions">
                {v.status === 'published' ? (
                  <button type="button" onClick={() => act('unpublish')}>
                    Unpublish
                  </button>
                ) : (
                  <button type="button" onClick={() => act('publish', { version: v.version })}>
                    {published !== null && v.version < published ? 'Roll back to' : 'Publish'} v{v.version}
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {vs.length > 1 && (
        <section aria-labelledby="diff-title">
          <h2 id="diff-title">Compare two versions</h2>
          <div class="grid">
            {(
              [
                ['From', from, setFrom],
                ['To', to, setTo],
              ] as const
            ).map(([label, val, set]) => (
              <Field label={label} key={label}>
                {(id) => (
                  <select id={id} value={val} onChange={(e) => set(Number((e.target as HTMLSelectElement).value))}>
                    {vs.map((v) => (
                      <option key={v.version} value={v.version}>
                        v{v.version} ({v.status})
                      </option>
                    ))}
                  </select>
                )}
              </Field>
            ))}
          </div>
          {a && b && (
            <pre class="diff">
              {diffLines(describe(a), describe(b)).map((part, i) => (
                <span key={i} class={part.added ? 'added' : part.removed ? 'removed' : ''}>
                  {part.value
                    .replace(/\n$/, '')
                    .split('\n')
                    .map((line) => `${part.added ? '+ ' : part.removed ? '- ' : '  '}${line}\n`)}
                </span>
              ))}
            </pre>
          )}
        </section>
      )}
    </div>
  );
}
