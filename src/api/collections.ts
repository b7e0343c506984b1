// In charge of /api/v1/collections: the collections saved queries are in (a query's `collection`),
// the keys and roles granted them, renaming and merging them so that nobody loses access partway,
// and a collection as a Postman Collection v2.1 document. A collection exists while a query is in it.
import * as v from 'valibot';
import { GatewayError } from '../contract/errors.js';
import { jsonAnswer } from '../contract/exchange.js';
import { localTimestamp } from '../store/store.js';
import type { QueryRow } from '../store/types.js';
import type { ApiRouter, ControlContext } from './routes.js';
import { collectionName, parseBody, readJson } from './validate.js';

const renameSchema = v.object({ name: collectionName, merge: v.optional(v.boolean('must be true or false')) });

const POSTMAN_SCHEMA = 'https://schema.getpostman.com/json/collection/v2.1.0/collection.json';

async function mustExist(ctx: ControlContext, name: string): Promise<QueryRow[]> {
  const queries = (await ctx.store.listQueries()).filter((q) => q.collection === name);
  if (!queries.length) {
    const names = await ctx.store.collectionNames();
    throw new GatewayError('collection_not_found', `Collection '${name}' not found${names.length ? `; the collections are ${names.join(', ')}` : ''}`);
  }
  return queries;
}

export function collectionRoutes(r: ApiRouter): void {
  r.add('GET', '/api/v1/collections', async (ctx) => {
    const [queries, keys, roles] = await Promise.all([ctx.store.listQueries(), ctx.store.listKeys(), ctx.store.listRoles()]);
    const byName = new Map<string, { name: string; queries: string[]; keys: string[]; roles: string[] }>();
    const uncollected: string[] = [];
    for (const q of queries) {
      if (q.collection === null) {
        uncollected.push(q.name);
        continue;
      }
      let c = byName.get(q.collection);
      if (!c) {
        c = { name: q.collection, queries: [], keys: [], roles: [] };
        byName.set(q.collection, c);
      }
      c.queries.push(q.name);
    }
    for (const k of keys) for (const n of k.collections ?? []) byName.get(n)?.keys.push(k.name);
    for (const role of roles) for (const n of role.collections ?? []) byName.get(n)?.roles.push(role.name);
    const items = [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
    return jsonAnswer(200, { items, uncollected });
  });

  /**
   * Rename (or merge into an existing collection with "merge": true), in three steps each announced
   * to every executor before the next: every key and role holding the old name is granted the new
   * one too, then the queries move, then the old name is taken away. At every point a key reaches
   * each query it reached before (through either name).
   */
  r.add('PATCH', '/api/v1/collections/:name', async (ctx, req, [from]) => {
    const b = parseBody(renameSchema, readJson(req.body));
    await mustExist(ctx, from);
    const to = b.name;
    if (to === from) return jsonAnswer(200, { name: to, moved: { queries: 0, keys: 0, roles: 0 } });
    if ((await ctx.store.collectionNames()).includes(to) && !b.merge) {
      throw new GatewayError('collection_exists', `Collection '${to}' already exists; send "merge": true to move the queries of '${from}' into it`);
    }
    const granted = await ctx.store.regrantCollection(from, to, 'add', localTimestamp());
    ctx.publishChange({ kind: 'metadata' });
    const queries = await ctx.store.moveCollection(from, to, localTimestamp());
    ctx.publishChange({ kind: 'metadata' });
    await ctx.store.regrantCollection(from, to, 'remove', localTimestamp());
    return jsonAnswer(200, { name: to, moved: { queries, keys: granted.keys, roles: granted.roles } });
  });

  r.add('GET', '/api/v1/collections/:name/postman', async (ctx, _req, [name]) => {
    const queries = await mustExist(ctx, name);
    const baseUrl = `http://${ctx.config.host}:${ctx.config.port}`;
    const doc = {
      info: { name, description: `Saved queries of the collection '${name}' (QueryAPIGate)`, schema: POSTMAN_SCHEMA },
      auth: {
        type: 'apikey',
        apikey: [
          { key: 'key', value: 'X-API-Key', type: 'string' },
          { key: 'value', value: '{{apiKey}}', type: 'string' },
          { key: 'in', value: 'header', type: 'string' },
        ],
      },
      variable: [
        { key: 'baseUrl', value: baseUrl, type: 'string' },
        { key: 'apiKey', value: '', type: 'string' },
      ],
      item: queries.flatMap((q) => postmanItem(q)),
    };
    const file = name.replace(/[^a-z0-9._-]/g, '_');
    return jsonAnswer(200, doc, ['Content-Disposition', `attachment; filename="${file}.postman_collection.json"`]);
  });
}

/** One request per published query: GET /q/<name> with its parameters (those from a sign-in token left out). */
function postmanItem(q: QueryRow): object[] {
  const version = q.versions.find((x) => x.version === q.published_version);
  if (!version) return [];
  const query = Object.entries(version.parameters ?? {})
    .filter(([, rule]) => !(rule && typeof rule === 'object' && 'from_claim' in rule))
    .map(([key, rule]) => {
      const r = (rule ?? {}) as { description?: unknown; default?: unknown; required?: unknown };
      return {
        key,
        value: r.default === undefined || r.default === null ? '' : String(r.default),
        ...(typeof r.description === 'string' ? { description: r.description } : {}),
        ...(r.required === false ? { disabled: true } : {}),
      };
    });
  const path = ['q', encodeURIComponent(q.name)];
  const search = query.filter((p) => !p.disabled).map((p) => `${encodeURIComponent(p.key)}=${encodeURIComponent(p.value)}`);
  return [
    {
      name: q.name,
      request: {
        method: 'GET',
        header: [],
        description: version.description,
        url: { raw: `{{baseUrl}}/${path.join('/')}${search.length ? `?${search.join('&')}` : ''}`, host: ['{{baseUrl}}'], path, query },
      },
    },
  ];
}
