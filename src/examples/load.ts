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
import { EXAMPLE_CONNECTION, exampleKeys, exampleQueries } from './catalog.js';
import { buildExamplesDb, EXAMPLES_DB_FILE } from './dataset.js';

export interface ExamplesLoaded {
  createdKeys: Array<{ name: string; secret: string; queries: string[] }>;
  createdQueries: number;
}

export async function loadExamples(store: Store, home: string): Promise<ExamplesLoaded> {
  const file = join(home, EXAMPLES_DB_FILE);
  if (!existsSync(file)) buildExamplesDb(file);
  const now = localTimestamp();
  await store.putConnection(
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
    if (created) createdQueries++;
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
    if (created) createdKeys.push({ name: k.name, secret, queries: k.queries });
  }
  return { createdKeys, createdQueries };
}
