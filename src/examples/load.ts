// In charge of installing the bundled example APIs into a store, idempotently: the SQLite dataset
// file, the `examples` connection, the saved queries (published) and one key per collection.
// Never overwrites or removes anything; returns the secrets of keys it created (shown once).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { generateSecret, hashSecret } from '../auth/keys.js';
import { normalizeParameters } from '../call/paramRules.js';
import { scanMarkers } from '../governance/markers.js';
import { localTimestamp, type Store } from '../store/store.js';
import { EXAMPLE_CONNECTION, exampleKeys, exampleQueries, exampleRoles } from './catalog.js';
import { buildExamplesDb, EXAMPLES_DB_FILE } from './dataset.js';

export interface ExamplesLoaded {
  createdKeys: Array<{ name: string; secret: string; queries: string[] }>;
  createdQueries: number;
  /** What this load added, by name (what existed already is not listed). */
  added: { connection: string | null; queries: string[]; roles: string[]; keys: string[] };
}

export async function loadExamples(store: Store, home: string): Promise<ExamplesLoaded> {
  const file = join(home, EXAMPLES_DB_FILE);
  if (!existsSync(file)) buildExamplesDb(file);
  const now = localTimestamp();
  const added: ExamplesLoaded['added'] = { connection: null, queries: [], roles: [], keys: [] };
  const connectionCreated = await store.putConnection(
    {
      name: EXAMPLE_CONNECTION,
      db: 'sqlite',
      active: true,
      host: null,
      port: null,
      database: EXAMPLES_DB_FILE,
      user: null,
      password: null,
      options: null,
      example: true,
      created_at: now,
      updated_at: now,
    },
    true,
  );
  if (connectionCreated) added.connection = EXAMPLE_CONNECTION;

  let createdQueries = 0;
  for (const q of exampleQueries) {
    const { rules, errors } = normalizeParameters(q.parameters, scanMarkers(q.sql, 'sqlite').placeholders);
    if (Object.keys(errors).length) throw new Error(`example ${q.name} has invalid parameters: ${JSON.stringify(errors)}`);
    const created = await store.createQuery(
      { name: q.name, collection: q.collection, example: true },
      {
        uuid: randomUUID(),
        sql: q.sql,
        connection_name: EXAMPLE_CONNECTION,
        parameters: rules,
        description: q.description,
        author: 'examples',
        tags: ['example'],
        cache_ttl: q.cache_ttl ?? null,
      },
      true,
      now,
    );
    if (created) {
      createdQueries++;
      added.queries.push(q.name);
    }
  }

  for (const r of exampleRoles) {
    const made = await store.putRole(
      {
        name: r.name,
        example: true,
        keys_created: 0,
        created_at: now,
        updated_at: now,
        connections: [],
        queries: [],
        collections: [...r.collections].sort(),
        allow_writes: false,
        allowed_write_ops: null,
        allowed_tables: null,
        mask: null,
        rate_limit: r.rate_limit,
        rate_limits: null,
        allowed_ips: null,
      },
      true,
    );
    if (made) added.roles.push(r.name);
  }

  const createdKeys: ExamplesLoaded['createdKeys'] = [];
  for (const k of exampleKeys) {
    const secret = generateSecret();
    const created = await store.putKey(
      {
        name: k.name,
        hash: hashSecret(secret),
        active: true,
        expires_at: null,
        example: true,
        created_at: now,
        updated_at: now,
        last_used_at: null,
        connections: [],
        queries: k.queries,
        allow_writes: false,
        allowed_write_ops: null,
        allowed_tables: null,
        mask: null,
        rate_limit: k.rate_limit,
        rate_limits: null,
        allowed_ips: null,
        previous_until: null,
        via_previous: false,
      },
      true,
    );
    if (created) {
      createdKeys.push({ name: k.name, secret, queries: k.queries });
      added.keys.push(k.name);
    }
  }
  return { createdKeys, createdQueries, added };
}

/** Where the examples stand: which of their objects exist (as examples), and whether that is all or some of them. */
export interface ExamplesState {
  loaded: boolean;
  partial: boolean;
  connection: string | null;
  queries: string[];
  roles: string[];
  keys: string[];
  collections: string[];
  /** Objects of the user's own under an example's name (a load would leave them as they are). */
  conflicts: string[];
}

export async function examplesState(store: Store): Promise<ExamplesState> {
  const [connection, queries, roles, keys] = await Promise.all([
    store.getConnection(EXAMPLE_CONNECTION),
    store.listQueries(),
    store.listRoles(),
    store.listKeys(),
  ]);
  const conflicts: string[] = [];
  const present = <T extends { name: string; example: boolean }>(rows: T[], names: string[], what: string) => {
    const out: T[] = [];
    for (const row of rows) {
      if (!names.includes(row.name)) continue;
      if (row.example) out.push(row);
      else conflicts.push(`${what} '${row.name}'`);
    }
    return out;
  };
  if (connection && !connection.example) conflicts.push(`connection '${EXAMPLE_CONNECTION}'`);
  const q = present(
    queries,
    exampleQueries.map((x) => x.name),
    'query',
  );
  const r = present(
    roles,
    exampleRoles.map((x) => x.name),
    'role',
  );
  const k = present(
    keys,
    exampleKeys.map((x) => x.name),
    'key',
  );
  const hasConnection = Boolean(connection?.example);
  const total = 1 + exampleQueries.length + exampleRoles.length + exampleKeys.length;
  const found = (hasConnection ? 1 : 0) + q.length + r.length + k.length;
  return {
    loaded: found === total,
    partial: found > 0 && found < total,
    connection: hasConnection ? EXAMPLE_CONNECTION : null,
    queries: q.map((x) => x.name),
    roles: r.map((x) => x.name),
    keys: k.map((x) => x.name),
    collections: [...new Set(q.map((x) => x.collection).filter((c): c is string => c !== null))].sort(),
    conflicts,
  };
}

/**
 * Removes what loadExamples installed: only rows marked as examples, never the user's own. The
 * connection stays while a query of the user's still uses it. Returns what was removed, and the
 * user's keys still granted a removed query or collection (their grants now name nothing).
 */
export async function unloadExamples(store: Store): Promise<{
  removed: { connection: string | null; queries: string[]; roles: string[]; keys: string[] };
  keysStillGranted: string[];
  /** The user's queries that keep the example connection in place. */
  connectionKeptFor: string[];
}> {
  const removed = { connection: null as string | null, queries: [] as string[], roles: [] as string[], keys: [] as string[] };
  const collections = new Set<string>();
  for (const q of await store.listQueries()) {
    if (!q.example) continue;
    await store.deleteQuery(q.name);
    removed.queries.push(q.name);
    if (q.collection) collections.add(q.collection);
  }
  for (const r of await store.listRoles()) {
    if (r.example && (await store.deleteRole(r.name))) removed.roles.push(r.name);
  }
  const stillGranted: string[] = [];
  for (const k of await store.listKeys()) {
    if (k.example) {
      if (await store.deleteKey(k.name)) removed.keys.push(k.name);
      continue;
    }
    const byName = k.queries !== '*' && k.queries.some((g) => removed.queries.includes(typeof g === 'string' ? g : g.name));
    const byCollection = (k.collections ?? []).some((c) => collections.has(c));
    if (byName || byCollection) stillGranted.push(k.name);
  }
  const connection = await store.getConnection(EXAMPLE_CONNECTION);
  let kept: string[] = [];
  if (connection?.example) {
    kept = (await store.listQueries()).filter((q) => q.versions.some((v) => v.connection_name === EXAMPLE_CONNECTION)).map((q) => q.name);
    if (!kept.length && (await store.deleteConnection(EXAMPLE_CONNECTION))) removed.connection = EXAMPLE_CONNECTION;
  }
  return { removed, keysStillGranted: stillGranted, connectionKeptFor: kept };
}
