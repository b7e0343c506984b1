// Saved queries: the list with a search (#/queries), and one query (#/queries/<name>, or
// #/queries/~new): its editor, its versions and its run panel.
import { useState } from 'preact/hooks';
import { api, enc } from '../api';
import { FormError, Page, TextField, useLoad } from '../ui';
import { QueryEditor, type QueryDetail } from './queryEditor';
import { RunPanel } from './runPanel';
import { Versions } from './queryVersions';

interface QuerySummary {
  name: string;
  description: string | null;
  connection_name: string | null;
  published_version: number | null;
  latest_version: number | null;
  has_draft: boolean;
}

export const NEW = '~new';

export function Queries({ route }: { route: string[] }) {
  if (route[0]) return <QueryPage key={route[0]} name={route[0] === NEW ? null : route[0]} />;
  return <QueryList />;
}

function QueryList() {
  const [search, setSearch] = useState('');
  const queries = useLoad(() => api.get<{ items: QuerySummary[] }>(`/api/v1/queries${search ? `?search=${enc(search)}` : ''}`), [search]);
  const [error, setError] = useState('');
  const remove = async (name: string) => {
    if (!confirm(`Delete the saved query ${name} and its versions? Calls to it are refused at once.`)) return;
    setError('');
    try {
      await api.del(`/api/v1/queries/${enc(name)}`);
      queries.reload();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  return (
    <Page
      title="Saved queries"
      actions={
        <a class="button" href={`#/queries/${NEW}`}>
          New query
        </a>
      }
    >
      <div class="search">
        <TextField label="Search by name or description" value={search} onInput={setSearch} />
      </div>
      <FormError error={queries.error || error} />
      <table>
        <caption class="sr-only">Saved queries</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Description</th>
            <th scope="col">Connection</th>
            <th scope="col">Published</th>
            <th scope="col">Latest</th>
            <th scope="col">
              <span class="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {queries.data?.items.map((q) => (
            <tr key={q.name}>
              <th scope="row">
                <a href={`#/queries/${enc(q.name)}`}>{q.name}</a>
              </th>
              <td>{q.description}</td>
              <td>{q.connection_name ?? '-'}</td>
              <td>{q.published_version === null ? 'not published' : `v${q.published_version}`}</td>
              <td>
                {q.latest_version === null ? '-' : `v${q.latest_version}`}
                {q.has_draft ? ' (draft)' : ''}
              </td>
              <td class="row-actions">
                <button type="button" class="danger" onClick={() => remove(q.name)}>
                  Delete <span class="sr-only">{q.name}</span>
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {queries.data?.items.length === 0 && <p>{search ? 'No saved query matches.' : 'No saved query yet.'}</p>}
    </Page>
  );
}

function QueryPage({ name }: { name: string | null }) {
  const detail = useLoad(() => (name === null ? Promise.resolve(null) : api.get<QueryDetail>(`/api/v1/queries/${enc(name)}`)), [name]);
  const [tab, setTab] = useState<'edit' | 'versions' | 'run'>('edit');
  const q = detail.data;
  if (name !== null && !q) return <Page title={name}>{detail.error ? <FormError error={detail.error} /> : <p>Loading...</p>}</Page>;
  const tabs = [
    ['edit', name === null ? 'SQL' : 'New version'],
    ['versions', 'Versions'],
    ['run', 'Run'],
  ] as const;
  return (
    <Page title={name ?? 'New query'} actions={<a href="#/queries">All saved queries</a>}>
      {q && (
        <div role="tablist" aria-label="Query" class="tabs">
          {tabs.map(([id, label]) => (
            <button
              type="button"
              role="tab"
              key={id}
              id={`tab-${id}`}
              aria-selected={tab === id}
              aria-controls={`panel-${id}`}
              tabIndex={tab === id ? 0 : -1}
              onClick={() => setTab(id)}
              onKeyDown={(e) => {
                const i = tabs.findIndex((t) => t[0] === tab);
                const next = e.key === 'ArrowRight' ? 1 : e.key === 'ArrowLeft' ? -1 : 0;
                if (!next) return;
                const to = tabs[(i + next + tabs.length) % tabs.length][0];
                setTab(to);
                document.getElementById(`tab-${to}`)?.focus();
              }}
            >
              {label}
            </button>
          ))}
        </div>
      )}
      <div {...(q ? { role: 'tabpanel', id: `panel-${tab}`, 'aria-labelledby': `tab-${tab}` } : {})}>
        {tab === 'edit' && (
          <QueryEditor
            query={q}
            onSaved={(saved) => {
              if (name === null) location.hash = `#/queries/${enc(saved.name)}`;
              else {
                detail.setData(saved);
                setTab('versions');
              }
            }}
          />
        )}
        {tab === 'versions' && q && <Versions query={q} onChange={(d) => detail.setData(d)} />}
        {tab === 'run' && q && <RunPanel query={q} />}
      </div>
    </Page>
  );
}
