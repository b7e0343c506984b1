// Settings: every QUERYAPIGATE_* setting the server runs with and where it came from, by group
// (GET /api/v1/settings; secrets come only as "configured").
import { useState } from 'preact/hooks';
import { api } from '../api';
import { FormError, Page, TextField, useLoad } from '../ui';

interface Row {
  label: string;
  description: string;
  env: string;
  type: string;
  default: string | null;
  value: unknown;
  source: 'env' | 'default';
}
interface Group {
  id: string;
  title?: string;
  label?: string;
  rows: Row[];
}

export function Settings(_: { route: string[] }) {
  const settings = useLoad(() => api.get<{ items: Group[] }>('/api/v1/settings'));
  const [filter, setFilter] = useState('');
  const match = (r: Row) => !filter || `${r.env} ${r.label} ${r.description}`.toLowerCase().includes(filter.toLowerCase());
  return (
    <Page title="Settings">
      <p>What this server runs with. Settings are read from the environment at start; a secret shows only as "configured".</p>
      <div class="search">
        <TextField label="Filter settings" value={filter} onInput={setFilter} />
      </div>
      <FormError error={settings.error} />
      {settings.data?.items.map((g) => {
        const rows = g.rows.filter(match);
        if (!rows.length) return null;
        const title = g.title ?? g.label ?? g.id;
        return (
          <section key={g.id} aria-labelledby={`group-${g.id}`}>
            <h2 id={`group-${g.id}`}>{title}</h2>
            <table>
              <thead>
                <tr>
                  <th scope="col">Setting</th>
                  <th scope="col">Value</th>
                  <th scope="col">Source</th>
                  <th scope="col">Default</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((r) => (
                  <tr key={r.env}>
                    <th scope="row">
                      <code>{r.env}</code>
                      <br />
                      <small>{r.description}</small>
                    </th>
                    <td>{r.value === null ? <em>unset</em> : typeof r.value === 'object' ? JSON.stringify(r.value) : String(r.value)}</td>
                    <td>{r.source === 'env' ? 'environment' : 'default'}</td>
                    <td>{r.default ?? <em>unset</em>}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </section>
        );
      })}
    </Page>
  );
}
