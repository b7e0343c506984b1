// A saved query's editor: name, description, connection, the SQL (CodeMirror in the connection's
// dialect), the parameter editor; checked by POST /api/v1/queries/validate as you type, each problem
// shown by the field it concerns, and saved as the query (new) or its next version.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, enc, fieldErrors } from '../api';
import { Field, FormError, TextField, useLoad } from '../ui';
import type { Connection } from './connections';
import type { DialectName, SqlEditor as Editor } from './sqlEditor';

export interface Rule {
  type: string | null;
  required: boolean;
  default?: unknown;
  enum?: unknown[];
  min?: number;
  max?: number;
  min_length?: number;
  max_length?: number;
  pattern?: string;
  description?: string;
}

export interface Version {
  version: number;
  status: 'published' | 'previous' | 'draft';
  description: string;
  sql: string;
  connection_name: string | null;
  parameters: Record<string, Rule>;
  created_at: string;
  author: string | null;
  run_count?: number;
}

export interface QueryDetail {
  name: string;
  published_version: number | null;
  versions: Version[];
  endpoint: string;
}

interface Validation {
  valid: boolean;
  errors: { code: string; field: string; message: string; parameters?: Record<string, string> }[];
  dialect: DialectName | null;
  placeholders: string[];
  writes: boolean;
  tables: string[] | null;
}

/** A parameter as the editor holds it: text fields, turned into a rule when sent. */
interface ParamRow {
  name: string;
  type: string;
  required: boolean;
  default: string;
  enum: string;
  min: string;
  max: string;
  /** The rule's other parts (description, pattern, lengths), kept as they were. */
  rest: Record<string, unknown>;
}

const TYPE_NAMES: Record<string, string> = { integer: 'int', number: 'float', string: 'str', boolean: 'bool' };

const toRow = (name: string, { type: _t, required: _r, default: _d, enum: _e, min: _min, max: _max, ...rest }: Rule): ParamRow => ({
  name,
  rest,
  type: _t ? TYPE_NAMES[_t] : '',
  required: _r,
  default: _d === undefined ? '' : JSON.stringify(_d),
  enum: _e ? _e.map((x) => JSON.stringify(x)).join(', ') : '',
  min: _min === undefined ? '' : String(_min),
  max: _max === undefined ? '' : String(_max),
});

/** Text as JSON when it reads as JSON (42, true, "x"), else as the text itself. */
const value = (s: string): unknown => {
  try {
    return JSON.parse(s);
  } catch {
    return s;
  }
};

function toRules(rows: ParamRow[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const p of rows) {
    if (!p.name.trim()) continue;
    const rule: Record<string, unknown> = { ...p.rest, required: p.required };
    if (p.type) rule.type = p.type;
    if (p.default.trim()) rule.default = value(p.default.trim());
    if (p.enum.trim()) rule.enum = p.enum.split(',').map((x) => value(x.trim()));
    if (p.min.trim()) rule.min = value(p.min.trim());
    if (p.max.trim()) rule.max = value(p.max.trim());
    out[p.name.trim()] = rule;
  }
  return out;
}

export function QueryEditor({ query, onSaved }: { query: QueryDetail | null; onSaved: (q: QueryDetail) => void }) {
  const last = query?.versions[query.versions.length - 1];
  const connections = useLoad(() => api.get<{ items: Connection[] }>('/api/v1/connections'));
  const [name, setName] = useState('');
  const [description, setDescription] = useState(last?.description ?? '');
  const [connection, setConnection] = useState(last?.connection_name ?? '');
  const [sql, setSql] = useState(last?.sql ?? '');
  const [params, setParams] = useState<ParamRow[]>(() => Object.entries(last?.parameters ?? {}).map(([n, r]) => toRow(n, r)));
  const [publish, setPublish] = useState(true);
  const [checked, setChecked] = useState<Validation | null>(null);
  const [saveErrors, setSaveErrors] = useState<Record<string, string>>({});
  const [saving, setSaving] = useState(false);
  // The first connection is picked for a new query once the list is there.
  useEffect(() => {
    if (!query && !connection && connections.data?.items.length) setConnection(connections.data.items[0].name);
  }, [connections.data]);
  const dialectOf = (c: string): DialectName => {
    const db = connections.data?.items.find((x) => x.name === c)?.db ?? 'postgres';
    return db === 'mysql' || db === 'sqlite' ? db : 'postgres';
  };
  const body = () => ({
    ...(query ? {} : { name }),
    description,
    sql,
    connection_name: connection || null,
    parameters: toRules(params),
  });
  // Validation as you type: 300 ms after the last change, the newest answer wins.
  const seq = useRef(0);
  useEffect(() => {
    const n = ++seq.current;
    const timer = setTimeout(async () => {
      try {
        const v = await api.post<Validation>('/api/v1/queries/validate', query ? { name: query.name, ...body() } : body());
        if (n === seq.current) setChecked(v);
      } catch {
        /* a failed check is shown when saving */
      }
    }, 300);
    return () => clearTimeout(timer);
  }, [name, description, connection, sql, params]);
  const problems: Record<string, string> = {};
  const paramProblems: Record<string, string> = {};
  for (const e of checked?.errors ?? []) {
    if (e.parameters) Object.assign(paramProblems, e.parameters);
    // A body problem names its field ("description is required" for "description").
    const field = e.field.split(/[.[]/)[0] || '';
    problems[field] = problems[field] ? `${problems[field]}; ${e.message}` : e.message;
  }
  const errors = { ...problems, ...saveErrors };
  const undeclared = (checked?.placeholders ?? []).filter((p) => !params.some((r) => r.name === p));
  const save = async (e: Event) => {
    e.preventDefault();
    setSaving(true);
    setSaveErrors({});
    try {
      const saved = query
        ? await api.post<QueryDetail>(`/api/v1/queries/${enc(query.name)}/versions`, { ...body(), publish })
        : await api.post<QueryDetail>('/api/v1/queries', { ...body(), publish });
      onSaved(saved);
    } catch (err) {
      setSaveErrors(fieldErrors(err));
    } finally {
      setSaving(false);
    }
  };
  const setParam = (i: number, patch: Partial<ParamRow>) => setParams(params.map((p, j) => (j === i ? { ...p, ...patch } : p)));
  return (
    <form class="card" onSubmit={save} aria-label={query ? `New version of ${query.name}` : 'New saved query'}>
      <div class="grid">
        {!query && <TextField label="Name" value={name} onInput={setName} error={errors.name} hint="The endpoint is /q/<name>." />}
        <TextField label="Description" value={description} onInput={setDescription} error={errors.description} />
        <Field label="Connection" error={errors.connection_name}>
          {(id, described) => (
            <select id={id} aria-describedby={described} value={connection} onChange={(e) => setConnection((e.target as HTMLSelectElement).value)}>
              <option value="">(named by each call)</option>
              {connections.data?.items.map((c) => (
                <option key={c.name} value={c.name}>
                  {c.name} ({c.db})
                </option>
              ))}
            </select>
          )}
        </Field>
      </div>
      <SqlField text={sql} dialect={dialectOf(connection)} onChange={setSql} error={errors.sql} />
      <fieldset>
        <legend>Parameters</legend>
        {params.length > 0 && (
          <div class="scroll">
            <table class="compact params">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Type</th>
                  <th scope="col">Required</th>
                  <th scope="col">Default</th>
                  <th scope="col">Allowed values</th>
                  <th scope="col">Min</th>
                  <th scope="col">Max</th>
                  <th scope="col">
                    <span class="sr-only">Remove</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {params.map((p, i) => (
                  <>
                    <tr key={i}>
                      <td>
                        <input
                          aria-label={`Parameter ${i + 1} name`}
                          value={p.name}
                          onInput={(e) => setParam(i, { name: (e.target as HTMLInputElement).value })}
                        />
                      </td>
                      <td>
                        <select
                          aria-label={`${p.name || `Parameter ${i + 1}`} type`}
                          value={p.type}
                          onChange={(e) => setParam(i, { type: (e.target as HTMLSelectElement).value })}
                        >
                          <option value="">any</option>
                          <option value="int">int</option>
                          <option value="float">float</option>
                          <option value="str">str</option>
                          <option value="bool">bool</option>
                        </select>
                      </td>
                      <td>
                        <input
                          type="checkbox"
                          aria-label={`${p.name || `Parameter ${i + 1}`} required`}
                          checked={p.required}
                          onChange={(e) => setParam(i, { required: (e.target as HTMLInputElement).checked })}
                        />
                      </td>
                      {(['default', 'enum', 'min', 'max'] as const).map((k) => (
                        <td key={k}>
                          <input
                            aria-label={`${p.name || `Parameter ${i + 1}`} ${k === 'enum' ? 'allowed values' : k}`}
                            value={p[k]}
                            onInput={(e) => setParam(i, { [k]: (e.target as HTMLInputElement).value })}
                          />
                        </td>
                      ))}
                      <td>
                        <button type="button" class="secondary" onClick={() => setParams(params.filter((_, j) => j !== i))}>
                          Remove <span class="sr-only">{p.name}</span>
                        </button>
                      </td>
                    </tr>
                    {paramProblems[p.name] && (
                      <tr key={`${i}-err`}>
                        <td colSpan={8} class="error" role="alert">
                          {p.name} {paramProblems[p.name]}
                        </td>
                      </tr>
                    )}
                  </>
                ))}
              </tbody>
            </table>
          </div>
        )}
        <div class="actions">
          <button
            type="button"
            class="secondary"
            onClick={() => setParams([...params, { name: '', type: 'str', required: true, default: '', enum: '', min: '', max: '', rest: {} }])}
          >
            Add a parameter
          </button>
          {undeclared.length > 0 && (
            <button
              type="button"
              class="secondary"
              onClick={() =>
                setParams([...params, ...undeclared.map((n) => ({ name: n, type: 'str', required: true, default: '', enum: '', min: '', max: '', rest: {} }))])
              }
            >
              Declare {undeclared.map((n) => `:${n}`).join(', ')}
            </button>
          )}
        </div>
        {errors.parameters && (
          <p class="error" role="alert">
            {errors.parameters}
          </p>
        )}
      </fieldset>
      <p class="check" aria-live="polite">
        {checked &&
          (checked.valid
            ? `Checks pass: ${checked.writes ? 'writes' : 'reads'} ${checked.tables?.length ? checked.tables.join(', ') : 'no table'}.`
            : `${checked.errors.length} problem${checked.errors.length > 1 ? 's' : ''} to fix before saving.`)}
      </p>
      <label class="inline">
        <input type="checkbox" checked={publish} onChange={(e) => setPublish((e.target as HTMLInputElement).checked)} /> Publish it
      </label>
      <FormError error={saveErrors['']} />
      <div class="actions">
        <button type="submit" disabled={saving}>
          {query ? 'Save a new version' : 'Save the query'}
        </button>
      </div>
    </form>
  );
}

/** The SQL field: CodeMirror once it is loaded (a plain text area until then). */
function SqlField({ text, dialect, onChange, error }: { text: string; dialect: DialectName; onChange: (s: string) => void; error?: string }) {
  const host = useRef<HTMLDivElement>(null);
  const editor = useRef<Editor | null>(null);
  const [ready, setReady] = useState(false);
  useEffect(() => {
    let gone = false;
    import('./sqlEditor').then(({ mountEditor }) => {
      if (gone || !host.current) return;
      editor.current = mountEditor(host.current, text, dialect, 'SQL', onChange);
      setReady(true);
    });
    return () => {
      gone = true;
      editor.current?.destroy();
    };
  }, []);
  useEffect(() => editor.current?.setDialect(dialect), [dialect]);
  return (
    <div class={`field${error ? ' invalid' : ''}`}>
      <span id="sql-label" class="label">
        SQL ({dialect === 'postgres' ? 'PostgreSQL' : dialect === 'mysql' ? 'MySQL' : 'SQLite'}; parameters as :name)
      </span>
      <div ref={host} class="sql-editor" aria-describedby={error ? 'sql-err' : undefined} data-ready={ready} />
      {error && (
        <span id="sql-err" class="error" role="alert">
          {error}
        </span>
      )}
    </div>
  );
}
