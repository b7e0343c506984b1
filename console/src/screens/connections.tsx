// Connections: the list, a form to create or edit one (its password is never shown back: the API
// gives only a mask), a test of it, and a browser of its schema (tables, columns, types).
import { useState } from 'preact/hooks';
import { api, enc, fieldErrors } from '../api';
import { Field, FormError, Page, TextField, useLoad } from '../ui';

export interface Connection {
  name: string;
  db: string;
  active: boolean;
  host: string | null;
  port: number | null;
  database: string | null;
  user: string | null;
  password?: string | null;
}

interface Probe {
  reachable: boolean;
  dialect: string;
  version: string;
  read_only: boolean;
  elapsed_ms: number;
}

interface Schema {
  tables: { schema: string; name: string; type: string; columns: { name: string; type: string; nullable: boolean; primary_key: boolean }[] }[];
  truncated: boolean;
}

/** How a password is read from the server's environment instead of stored (the API keeps such a reference as written). */
const REFERENCE = `$${'{'}NAME} reads it from the server's environment.`;

const EMPTY = { name: '', db: 'postgres', host: '127.0.0.1', port: '', user: '', password: '', database: '', active: true };
type Draft = typeof EMPTY;

export function Connections(_: { route: string[] }) {
  const conns = useLoad(() => api.get<{ items: Connection[] }>('/api/v1/connections'));
  const [editing, setEditing] = useState<{ original: string | null; draft: Draft } | null>(null);
  const [opened, setOpened] = useState<string | null>(null);
  const [error, setError] = useState('');
  const remove = async (name: string) => {
    // The API asks why (the reason is kept with the change); cancelling the question deletes nothing.
    const reason = prompt(`Delete the connection ${name}? Its saved queries can no longer run. Why is it deleted?`);
    if (reason === null) return;
    setError('');
    try {
      await api.del(`/api/v1/connections/${enc(name)}`, { reason });
      if (opened === name) setOpened(null);
      conns.reload();
    } catch (e) {
      setError((e as Error).message); // the API's reason, in words (e.g. queries still use it)
    }
  };
  const edit = async (name: string) => {
    const c = await api.get<Connection>(`/api/v1/connections/${enc(name)}`);
    // The stored password stays unless a new one is typed: the field starts empty.
    setEditing({
      original: name,
      draft: {
        name: c.name,
        db: c.db,
        host: c.host ?? '',
        port: c.port ? String(c.port) : '',
        user: c.user ?? '',
        password: '',
        database: c.database ?? '',
        active: c.active,
      },
    });
  };
  return (
    <Page
      title="Connections"
      actions={
        <button type="button" onClick={() => setEditing({ original: null, draft: { ...EMPTY } })}>
          New connection
        </button>
      }
    >
      <FormError error={error} />
      {editing && (
        <ConnectionForm
          {...editing}
          onDone={(name) => {
            setEditing(null);
            conns.reload();
            if (name) setOpened(name);
          }}
        />
      )}
      <FormError error={conns.error} />
      <table>
        <caption class="sr-only">Connections</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Type</th>
            <th scope="col">Server</th>
            <th scope="col">Database</th>
            <th scope="col">Active</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {conns.data?.items.map((c) => (
            <tr key={c.name}>
              <th scope="row">{c.name}</th>
              <td>{c.db}</td>
              <td>{c.host ? `${c.host}${c.port ? `:${c.port}` : ''}` : '-'}</td>
              <td>{c.database ?? '-'}</td>
              <td>{c.active ? 'yes' : 'no'}</td>
              <td class="row-actions">
                <button type="button" onClick={() => setOpened(opened === c.name ? null : c.name)} aria-expanded={opened === c.name}>
                  Test and browse <span class="sr-only">{c.name}</span>
                </button>
                <button type="button" onClick={() => edit(c.name)}>
                  Edit <span class="sr-only">{c.name}</span>
                </button>
                <button type="button" class="danger" onClick={() => remove(c.name)}>
                  Delete <span class="sr-only">{c.name}</span>
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {conns.data?.items.length === 0 && <p>No connection yet: add one to save queries against it.</p>}
      {opened && <ConnectionDetail key={opened} name={opened} />}
    </Page>
  );
}

function ConnectionForm({ original, draft: start, onDone }: { original: string | null; draft: Draft; onDone: (saved: string | null) => void }) {
  const [d, setD] = useState(start);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const set = (k: keyof Draft) => (v: string | boolean) => setD({ ...d, [k]: v });
  const file = d.db === 'sqlite';
  const save = async (e: Event) => {
    e.preventDefault();
    const body: Record<string, unknown> = {
      db: d.db,
      active: d.active,
      host: file ? null : d.host || null,
      port: file || !d.port ? null : Number(d.port),
      user: file ? null : d.user || null,
      database: d.database || null,
    };
    if (d.password) body.password = d.password;
    try {
      if (original === null) await api.post('/api/v1/connections', { name: d.name, ...body });
      else await api.patch(`/api/v1/connections/${enc(original)}`, body);
      onDone(original ?? d.name);
    } catch (err) {
      setErrors(fieldErrors(err));
    }
  };
  return (
    <form class="card" onSubmit={save} aria-label={original ? `Edit connection ${original}` : 'New connection'}>
      <h2>{original ? `Edit ${original}` : 'New connection'}</h2>
      <div class="grid">
        {original === null && <TextField label="Name" value={d.name} onInput={set('name')} error={errors.name} />}
        <Field label="Type" error={errors.db}>
          {(id, described) => (
            <select id={id} aria-describedby={described} value={d.db} onChange={(e) => set('db')((e.target as HTMLSelectElement).value)}>
              <option value="postgres">PostgreSQL</option>
              <option value="mysql">MySQL / MariaDB</option>
              <option value="sqlite">SQLite</option>
            </select>
          )}
        </Field>
        {!file && <TextField label="Host" value={d.host} onInput={set('host')} error={errors.host} />}
        {!file && <TextField label="Port" value={d.port} onInput={set('port')} error={errors.port} placeholder="default" />}
        <TextField label={file ? 'File path' : 'Database'} value={d.database} onInput={set('database')} error={errors.database} />
        {!file && <TextField label="User" value={d.user} onInput={set('user')} error={errors.user} />}
        {!file && (
          <TextField
            label="Password"
            type="password"
            autocomplete="new-password"
            value={d.password}
            onInput={set('password')}
            error={errors.password}
            hint={`${original ? 'Leave empty to keep the stored one. ' : ''}${REFERENCE}`}
          />
        )}
        <Field label="Active" error={errors.active}>
          {(id) => <input id={id} type="checkbox" checked={d.active} onChange={(e) => set('active')((e.target as HTMLInputElement).checked)} />}
        </Field>
      </div>
      <FormError error={errors['']} />
      <div class="actions">
        <button type="submit">Save connection</button>
        <button type="button" class="secondary" onClick={() => onDone(null)}>
          Cancel
        </button>
      </div>
    </form>
  );
}

function ConnectionDetail({ name }: { name: string }) {
  const [probe, setProbe] = useState<Probe | null>(null);
  const [probeError, setProbeError] = useState('');
  const [testing, setTesting] = useState(false);
  const schema = useLoad(() => api.get<Schema>(`/api/v1/connections/${enc(name)}/schema`), [name]);
  const [filter, setFilter] = useState('');
  const test = async () => {
    setTesting(true);
    setProbe(null);
    setProbeError('');
    try {
      setProbe(await api.post<Probe>(`/api/v1/connections/${enc(name)}/test`));
    } catch (e) {
      setProbeError((e as Error).message);
    } finally {
      setTesting(false);
    }
  };
  const tables = (schema.data?.tables ?? []).filter((t) => !filter || `${t.schema}.${t.name}`.toLowerCase().includes(filter.toLowerCase()));
  return (
    <section class="card" aria-labelledby="conn-detail">
      <h2 id="conn-detail">{name}</h2>
      <div class="actions">
        <button type="button" onClick={test} disabled={testing}>
          Test connection
        </button>
        <output aria-live="polite" class="probe">
          {testing && 'Testing...'}
          {probe && `Reachable: ${probe.dialect} ${probe.version}, ${probe.read_only ? 'read-only sessions' : 'sessions may write'} (${probe.elapsed_ms} ms)`}
        </output>
      </div>
      <FormError error={probeError} />
      <h3>Schema</h3>
      <FormError error={schema.error} />
      <TextField label="Filter tables" value={filter} onInput={setFilter} />
      {schema.data && !tables.length && <p>No table.</p>}
      <div class="schema">
        {tables.map((t) => (
          <details key={`${t.schema}.${t.name}`}>
            <summary>
              {t.schema}.{t.name}{' '}
              <small>
                ({t.type}, {t.columns.length} columns)
              </small>
            </summary>
            <table class="compact">
              <caption class="sr-only">
                Columns of {t.schema}.{t.name}
              </caption>
              <thead>
                <tr>
                  <th scope="col">Column</th>
                  <th scope="col">Type</th>
                  <th scope="col">Nullable</th>
                  <th scope="col">Key</th>
                </tr>
              </thead>
              <tbody>
                {t.columns.map((c) => (
                  <tr key={c.name}>
                    <td>{c.name}</td>
                    <td>{c.type}</td>
                    <td>{c.nullable ? 'yes' : 'no'}</td>
                    <td>{c.primary_key ? 'primary' : ''}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </details>
        ))}
      </div>
      {schema.data?.truncated && <p>The schema is larger than what is shown.</p>}
    </section>
  );
}
