// API keys: the list, a form for the whole policy (queries, connections, allowed tables, mask rules,
// allowed IPs, expiry, rate limits, writes), the secret shown once with a copy button, rotation with
// a grace period, and revocation.
import { useState } from 'preact/hooks';
import { api, enc, fieldErrors } from '../api';
import { Field, FormError, list, Page, splitList, TextField, useLoad } from '../ui';

interface Key {
  name: string;
  connections: string[] | '*';
  queries: (string | { name: string; allow_writes: boolean })[] | '*';
  allow_writes: boolean;
  allowed_write_ops: string[] | null;
  allowed_tables: string[] | null;
  mask: { column: string; action: string }[] | null;
  mask_predicates?: 'allow' | 'refuse';
  rate_limit: string | null;
  rate_limits: Record<string, string> | null;
  collections?: string[];
  allowed_ips: string[] | null;
  expires_at: string | null;
  active: boolean;
  expired: boolean;
  last_used_at: string | null;
  previous_secret_valid_until: string | null;
}

interface Draft {
  name: string;
  queries: string;
  /** The granted queries that may write (a per-query write grant). */
  write_queries: string;
  collections: string;
  connections: string;
  allowed_write_ops: string;
  mask_predicates: 'allow' | 'refuse';
  /** "query=100/minute" pairs, comma separated. */
  rate_limits: string;
  allowed_tables: string;
  mask: { column: string; action: string }[];
  allowed_ips: string;
  expires_at: string;
  rate_limit: string;
  allow_writes: boolean;
  active: boolean;
}

const ACTIONS = ['hash', 'mask', 'null', 'drop'];
const grantNames = (q: Key['queries']) => (q === '*' ? '*' : q.map((g) => (typeof g === 'string' ? g : g.name)).join(', '));

const writeGrants = (q: Key['queries']) => (q === '*' ? '' : q.flatMap((g) => (typeof g !== 'string' && g.allow_writes ? [g.name] : [])).join(', '));

const fromKey = (k: Key): Draft => ({
  name: k.name,
  queries: grantNames(k.queries),
  write_queries: writeGrants(k.queries),
  collections: list(k.collections ?? null),
  connections: list(k.connections),
  allowed_write_ops: list(k.allowed_write_ops),
  mask_predicates: k.mask_predicates ?? 'allow',
  rate_limits: Object.entries(k.rate_limits ?? {})
    .map(([q, r]) => `${q}=${r}`)
    .join(', '),
  allowed_tables: list(k.allowed_tables),
  mask: k.mask ?? [],
  allowed_ips: list(k.allowed_ips),
  expires_at: k.expires_at ?? '',
  rate_limit: k.rate_limit ?? '',
  allow_writes: k.allow_writes,
  active: k.active,
});
const EMPTY: Draft = {
  name: '',
  queries: '',
  write_queries: '',
  collections: '',
  connections: '*',
  allowed_write_ops: '',
  mask_predicates: 'allow',
  rate_limits: '',
  allowed_tables: '',
  mask: [],
  allowed_ips: '',
  expires_at: '',
  rate_limit: '',
  allow_writes: false,
  active: true,
};

function policy(d: Draft) {
  const names = (s: string) => (s.trim() === '*' ? '*' : splitList(s));
  const orNull = (s: string) => (splitList(s).length ? splitList(s) : null);
  const writers = new Set(splitList(d.write_queries));
  const queries = names(d.queries);
  // A name is split at its last '=': the rate after it, the query's name (which may hold '=') before.
  const rates = splitList(d.rate_limits).map((pair) => [pair.slice(0, pair.lastIndexOf('=')).trim(), pair.slice(pair.lastIndexOf('=') + 1).trim()]);
  return {
    queries: queries === '*' ? '*' : queries.map((name) => (writers.has(name) ? { name, allow_writes: true } : name)),
    collections: splitList(d.collections),
    connections: names(d.connections),
    allowed_write_ops: orNull(d.allowed_write_ops),
    mask_predicates: d.mask_predicates,
    rate_limits: rates.length ? Object.fromEntries(rates) : null,
    allowed_tables: orNull(d.allowed_tables),
    mask: d.mask.filter((m) => m.column.trim()).length ? d.mask.filter((m) => m.column.trim()) : null,
    allowed_ips: orNull(d.allowed_ips),
    expires_at: d.expires_at || null,
    rate_limit: d.rate_limit.trim() || null,
    allow_writes: d.allow_writes,
    active: d.active,
  };
}

export function Keys(_: { route: string[] }) {
  const keys = useLoad(() => api.get<{ items: Key[] }>('/api/v1/api-keys'));
  const [editing, setEditing] = useState<{ original: string | null; draft: Draft } | null>(null);
  const [secret, setSecret] = useState<{ name: string; secret: string } | null>(null);
  const [error, setError] = useState('');
  const [grace, setGrace] = useState('0');
  const rotate = async (name: string) => {
    setError('');
    try {
      const r = await api.post<{ secret: string }>(`/api/v1/api-keys/${enc(name)}/rotate`, { grace_seconds: Number(grace) || 0 });
      setSecret({ name, secret: r.secret });
      keys.reload();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  const revoke = async (name: string) => {
    if (!confirm(`Revoke the key ${name}? Calls with it are refused at once.`)) return;
    setError('');
    try {
      await api.del(`/api/v1/api-keys/${enc(name)}`);
      keys.reload();
    } catch (e) {
      setError((e as Error).message);
    }
  };
  return (
    <Page
      title="API keys"
      actions={
        <button type="button" onClick={() => setEditing({ original: null, draft: { ...EMPTY } })}>
          New key
        </button>
      }
    >
      {secret && <SecretOnce {...secret} onClose={() => setSecret(null)} />}
      {editing && (
        <KeyForm
          {...editing}
          onDone={(created) => {
            setEditing(null);
            if (created) setSecret(created);
            keys.reload();
          }}
        />
      )}
      <FormError error={keys.error || error} />
      <div class="grid narrow">
        <TextField label="Grace period for rotations (seconds)" value={grace} onInput={setGrace} hint="How long the old secret keeps working." />
      </div>
      <table>
        <caption class="sr-only">API keys</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Queries</th>
            <th scope="col">Connections</th>
            <th scope="col">Masks</th>
            <th scope="col">State</th>
            <th scope="col">Last used</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {keys.data?.items.map((k) => (
            <tr key={k.name}>
              <th scope="row">{k.name}</th>
              <td>{grantNames(k.queries) || 'none'}</td>
              <td>{list(k.connections) || 'none'}</td>
              <td>{k.mask?.map((m) => `${m.column}: ${m.action}`).join(', ') || '-'}</td>
              <td>
                {!k.active ? 'inactive' : k.expired ? 'expired' : 'active'}
                {k.previous_secret_valid_until ? ` (old secret until ${k.previous_secret_valid_until})` : ''}
              </td>
              <td>{k.last_used_at ?? 'never'}</td>
              <td class="row-actions">
                <button type="button" onClick={() => setEditing({ original: k.name, draft: fromKey(k) })}>
                  Edit <span class="sr-only">{k.name}</span>
                </button>
                <button type="button" onClick={() => rotate(k.name)}>
                  Rotate <span class="sr-only">{k.name}</span>
                </button>
                <button type="button" class="danger" onClick={() => revoke(k.name)}>
                  Revoke <span class="sr-only">{k.name}</span>
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {keys.data?.items.length === 0 && <p>No API key yet.</p>}
    </Page>
  );
}

function SecretOnce({ name, secret, onClose }: { name: string; secret: string; onClose: () => void }) {
  const [copied, setCopied] = useState('');
  return (
    <section class="card secret" aria-labelledby="secret-title">
      <h2 id="secret-title">The secret of {name}</h2>
      <p>It is shown this once: copy it now. Only its hash is kept.</p>
      <code class="secret-value">{secret}</code>
      <div class="actions">
        <button
          type="button"
          onClick={() =>
            navigator.clipboard.writeText(secret).then(
              () => setCopied('Copied.'),
              () => setCopied('Copying was refused: select the text instead.'),
            )
          }
        >
          Copy the secret
        </button>
        <button type="button" class="secondary" onClick={onClose}>
          I have kept it
        </button>
        <output aria-live="polite">{copied}</output>
      </div>
    </section>
  );
}

function KeyForm({
  original,
  draft: start,
  onDone,
}: {
  original: string | null;
  draft: Draft;
  onDone: (created: { name: string; secret: string } | null) => void;
}) {
  const [d, setD] = useState(start);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const set = (k: keyof Draft) => (v: unknown) => setD({ ...d, [k]: v });
  const save = async (e: Event) => {
    e.preventDefault();
    try {
      if (original === null) {
        const r = await api.post<{ secret: string }>('/api/v1/api-keys', { name: d.name, ...policy(d) });
        onDone({ name: d.name, secret: r.secret });
      } else {
        await api.patch(`/api/v1/api-keys/${enc(original)}`, policy(d));
        onDone(null);
      }
    } catch (err) {
      setErrors(fieldErrors(err));
    }
  };
  const setMask = (i: number, patch: Partial<{ column: string; action: string }>) => set('mask')(d.mask.map((m, j) => (j === i ? { ...m, ...patch } : m)));
  const maskError = Object.entries(errors)
    .filter(([k]) => k.startsWith('mask'))
    .map(([k, v]) => `${k} ${v}`)
    .join('; ');
  return (
    <form class="card" onSubmit={save} aria-label={original ? `Edit key ${original}` : 'New key'}>
      <h2>{original ? `Edit ${original}` : 'New key'}</h2>
      <div class="grid">
        {original === null && <TextField label="Name" value={d.name} onInput={set('name')} error={errors.name} />}
        <TextField label="Saved queries" value={d.queries} onInput={set('queries')} error={errors.queries} hint="Names, comma separated, or * for all." />
        <TextField
          label="Queries that may write"
          value={d.write_queries}
          onInput={set('write_queries')}
          error={errors.queries}
          hint="Granted queries allowed to write even when the key may not."
        />
        <TextField
          label="Collections"
          value={d.collections}
          onInput={set('collections')}
          error={errors.collections}
          hint="Every query in them, now and later, read-only."
        />
        <TextField label="Connections" value={d.connections} onInput={set('connections')} error={errors.connections} hint="Names, or * for all." />
        <TextField
          label="Allowed tables"
          value={d.allowed_tables}
          onInput={set('allowed_tables')}
          error={errors.allowed_tables}
          hint="Empty: every table. As SQL names (schema.table)."
        />
        <TextField label="Allowed IPs" value={d.allowed_ips} onInput={set('allowed_ips')} error={errors.allowed_ips} hint="Addresses or CIDRs; empty: any." />
        <TextField label="Expires on" type="date" value={d.expires_at} onInput={set('expires_at')} error={errors.expires_at} />
        <TextField label="Rate limit" value={d.rate_limit} onInput={set('rate_limit')} error={errors.rate_limit} placeholder="100/minute" />
        <TextField
          label="Rate limits per query"
          value={d.rate_limits}
          onInput={set('rate_limits')}
          error={errors.rate_limits}
          placeholder="account=10/second"
          hint="query=rate pairs, comma separated."
        />
        <TextField
          label="Write operations"
          value={d.allowed_write_ops}
          onInput={set('allowed_write_ops')}
          error={errors.allowed_write_ops}
          hint="insert, update, delete...; empty: every kind the key may write."
        />
        <Field label="Predicates on masked columns" error={errors.mask_predicates}>
          {(id) => (
            <select id={id} value={d.mask_predicates} onChange={(e) => set('mask_predicates')((e.target as HTMLSelectElement).value)}>
              <option value="allow">allowed</option>
              <option value="refuse">refused (no WHERE, JOIN, GROUP BY, ORDER BY or computing with them)</option>
            </select>
          )}
        </Field>
        <Field label="May write" error={errors.allow_writes}>
          {(id) => <input id={id} type="checkbox" checked={d.allow_writes} onChange={(e) => set('allow_writes')((e.target as HTMLInputElement).checked)} />}
        </Field>
        <Field label="Active" error={errors.active}>
          {(id) => <input id={id} type="checkbox" checked={d.active} onChange={(e) => set('active')((e.target as HTMLInputElement).checked)} />}
        </Field>
      </div>
      <fieldset>
        <legend>Mask rules</legend>
        {d.mask.map((m, i) => (
          <div class="mask-rule" key={i}>
            <input
              aria-label={`Mask rule ${i + 1} column`}
              placeholder="table.column"
              value={m.column}
              onInput={(e) => setMask(i, { column: (e.target as HTMLInputElement).value })}
            />
            <select aria-label={`Mask rule ${i + 1} action`} value={m.action} onChange={(e) => setMask(i, { action: (e.target as HTMLSelectElement).value })}>
              {ACTIONS.map((a) => (
                <option key={a} value={a}>
                  {a}
                </option>
              ))}
            </select>
            <button type="button" class="secondary" onClick={() => set('mask')(d.mask.filter((_, j) => j !== i))}>
              Remove <span class="sr-only">mask rule {i + 1}</span>
            </button>
          </div>
        ))}
        <button type="button" class="secondary" onClick={() => set('mask')([...d.mask, { column: '', action: 'hash' }])}>
          Add a mask rule
        </button>
        {maskError && (
          <p class="error" role="alert">
            {maskError}
          </p>
        )}
      </fieldset>
      <FormError error={errors['']} />
      <div class="actions">
        <button type="submit">{original ? 'Save the key' : 'Create the key'}</button>
        <button type="button" class="secondary" onClick={() => onDone(null)}>
          Cancel
        </button>
      </div>
    </form>
  );
}
