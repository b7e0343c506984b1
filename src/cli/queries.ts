// In charge of `queryapigate queries`: saved queries listed and shown from the store, exported to a
// bundle file and imported from one, through the management API's own handlers (so an import passes
// the checks a POST to /api/v1/queries does, and running servers are told of it).
import { readFileSync, writeFileSync } from 'node:fs';
import { localTimestamp } from '../store/store.js';
import { type Bundle, type BundleQuery, type BundleVersion, buildBundle, formatBundle, readBundle, versionFields, versionIdentity } from './bundle.js';
import { type LocalControl, viewCommand, withLocal } from './local.js';
import { cell, printFields, printJson, printTable } from './print.js';
import { type Command, Failure, type Group, JSON_OUTPUT, UsageError } from './tree.js';

const path = (name: string) => `/api/v1/queries/${encodeURIComponent(name)}`;

const list = viewCommand({
  name: 'list',
  summary: 'List the saved queries',
  usage: '[options]',
  args: { min: 0, max: 0 },
  examples: ['queryapigate queries list', 'queryapigate queries list --json | jq -r ".items[].name"'],
  route: () => '/api/v1/queries',
  text: (out, { items }) =>
    printTable(
      out,
      ['NAME', 'PUBLISHED', 'LATEST', 'CONNECTION', 'DESCRIPTION'],
      // biome-ignore lint/suspicious/noExplicitAny: a summary as GET /api/v1/queries shapes it
      items.map((q: any) => [
        q.name,
        q.published_version === null ? '-' : `v${q.published_version}`,
        `v${q.latest_version}`,
        cell(q.connection_name),
        cell(q.description),
      ]),
      'No saved queries.',
    ),
});

const show = viewCommand({
  name: 'show',
  summary: 'Show one saved query with its versions',
  usage: 'NAME [options]',
  description: ['--json prints what GET /api/v1/queries/NAME answers.'],
  args: { min: 1, max: 1 },
  examples: ['queryapigate queries show example_film_lookup'],
  route: ([name]) => path(name),
  text: (out, { versions, ...summary }) => {
    printFields(out, summary);
    for (const x of versions) {
      out('');
      out(`version ${x.version} (${x.status}), connection ${cell(x.connection_name)}: ${x.description}`);
      for (const [p, rule] of Object.entries(x.parameters)) out(`  :${p} ${JSON.stringify(rule)}`);
      for (const line of x.sql.split('\n')) out(`  | ${line}`);
    }
  },
});

const exportQueries: Command = {
  kind: 'command',
  name: 'export',
  summary: 'Write saved queries, with every version, to a bundle file (YAML or JSON)',
  usage: '[NAMES...] [options]',
  description: [
    'Without names, every saved query. The bundle holds each version (SQL, parameters, connection name,',
    'description, author, tags, cache_ttl, status) and the published version, plus the names of the',
    'connections used; never a connection itself (connections hold passwords).',
  ],
  args: { min: 0, max: Infinity },
  options: {
    out: { type: 'string', value: 'FILE', help: 'where to write (default: stdout)' },
    format: { type: 'string', value: 'yaml|json', help: 'the file format (default: json for a .json file, else yaml)' },
    'skip-examples': { type: 'boolean', help: 'leave the bundled example queries out' },
  },
  examples: ['queryapigate queries export --out queries.yaml', 'queryapigate queries export account orders --out two.json'],
  run: (inv) => {
    const out = inv.values.out as string | undefined;
    const format = (inv.values.format as string | undefined) ?? (out?.endsWith('.json') ? 'json' : 'yaml');
    if (format !== 'yaml' && format !== 'json') throw new UsageError(`--format takes yaml or json: got '${format}'`, 'queryapigate queries export');
    return withLocal(inv.say, async (local) => {
      let names = inv.args;
      if (!names.length) {
        const { items } = await local.call('GET', '/api/v1/queries');
        // biome-ignore lint/suspicious/noExplicitAny: a summary as GET /api/v1/queries shapes it
        names = items.filter((q: any) => !(inv.values['skip-examples'] && q.example)).map((q: any) => q.name);
      }
      const details = [];
      for (const n of names) details.push(await local.call('GET', path(n)));
      const bundle = buildBundle(details, localTimestamp());
      const text = formatBundle(bundle, format);
      if (out) writeFileSync(out, text);
      else process.stdout.write(text);
      const versions = bundle.queries.reduce((n, q) => n + q.versions.length, 0);
      inv.say(`exported ${bundle.queries.length} queries (${versions} versions) to ${out ?? 'stdout'}`);
    });
  },
};

/** What importing one query did, for the report. */
interface Imported {
  name: string;
  action: 'created' | 'updated' | 'unchanged';
  /** Version numbers made in this store. */
  added: number[];
  /** The version this store now publishes, when the import changed it (0: unpublished). */
  published: number | null;
}

const importQueries: Command = {
  kind: 'command',
  name: 'import',
  summary: 'Create saved queries from a bundle file, or add what changed to those that exist',
  usage: 'FILE [options]',
  description: [
    'A query the store lacks is created with every version, statuses and published version as in the',
    'bundle. For a query that exists, a bundle version is added (as a new version) only when no version',
    "of it has the same SQL, connection and parameters; then the bundle's published version is published",
    'if it is not already. Nothing is deleted or unpublished in an existing query. The whole file is',
    'checked before anything is written. Connections are not in bundles: those missing are named.',
  ],
  args: { min: 1, max: 1 },
  options: { json: JSON_OUTPUT },
  examples: ['queryapigate queries import queries.yaml'],
  run: (inv) => {
    let content: string;
    try {
      content = readFileSync(inv.args[0], 'utf8');
    } catch (e) {
      throw new Failure(`cannot read ${inv.args[0]}: ${(e as Error).message}`);
    }
    const bundle = readBundle(inv.args[0], content);
    return withLocal(inv.say, async (local) => {
      // A query is saved only on a connection that exists (a save-time check): say so before writing anything.
      const missing = await missingConnections(local, bundle);
      if (missing.length) {
        throw new Failure(
          `the bundle's queries use connections this store does not have: ${missing.map((c) => `'${c}'`).join(', ')}; create them first`,
          'connection_not_found',
        );
      }
      await checkVersions(local, bundle);
      const done: Imported[] = [];
      for (const q of bundle.queries) done.push(await importQuery(local, q));
      if (inv.values.json) printJson(inv.out, { queries: done });
      else for (const d of done) inv.out(describe(d));
    });
  },
};

async function importQuery(local: LocalControl, q: BundleQuery): Promise<Imported> {
  const existing = await local.call('GET', path(q.name)).catch((e: Failure) => {
    if (e.code === 'query_not_found') return null;
    throw e;
  });
  return existing ? updateQuery(local, q, existing) : createQuery(local, q);
}

const versionBody = (x: BundleVersion, publish: boolean) => ({ ...versionFields(x), publish });

/** A new query: its versions made in order, each one that was ever published published on the way, so
 * statuses come out as in the bundle; then the bundle's published version (or none) set last. */
async function createQuery(local: LocalControl, q: BundleQuery): Promise<Imported> {
  const [first, ...rest] = q.versions;
  let now = await local.call('POST', '/api/v1/queries', { name: q.name, collection: q.collection, ...versionBody(first, first.status !== 'draft') });
  for (const x of rest) now = await local.call('POST', `${path(q.name)}/versions`, versionBody(x, x.status !== 'draft'));
  if (now.published_version !== q.published_version) {
    now =
      q.published_version === null
        ? await local.call('POST', `${path(q.name)}/unpublish`)
        : await local.call('POST', `${path(q.name)}/publish`, { version: q.published_version });
  }
  return { name: q.name, action: 'created', added: q.versions.map((x) => x.version), published: now.published_version ?? 0 };
}

// biome-ignore lint/suspicious/noExplicitAny: GET /api/v1/queries/{name}, as the management API shapes it
async function updateQuery(local: LocalControl, q: BundleQuery, existing: any): Promise<Imported> {
  const have = new Map<string, number>();
  for (const x of existing.versions) if (!have.has(versionIdentity(x))) have.set(versionIdentity(x), x.version);
  const added: number[] = [];
  const here = new Map<number, number>(); // bundle version → this store's version
  let now = existing;
  for (const x of q.versions) {
    const id = versionIdentity(x);
    let n = have.get(id);
    if (n === undefined) {
      now = await local.call('POST', `${path(q.name)}/versions`, versionBody(x, false));
      n = now.latest_version as number;
      have.set(id, n);
      added.push(n);
    }
    here.set(x.version, n);
  }
  let published: number | null = null;
  const wanted = q.published_version === null ? null : here.get(q.published_version)!;
  if (wanted !== null && now.published_version !== wanted) {
    await local.call('POST', `${path(q.name)}/publish`, { version: wanted });
    published = wanted;
  }
  return { name: q.name, action: added.length || published !== null ? 'updated' : 'unchanged', added, published };
}

function describe(d: Imported): string {
  const published = d.published === null ? '' : d.published === 0 ? ', not published' : `, published v${d.published}`;
  if (d.action === 'created') return `created ${d.name}: ${d.added.length} version${d.added.length === 1 ? '' : 's'}${published}`;
  if (d.action === 'unchanged') return `unchanged ${d.name}`;
  return `updated ${d.name}: ${d.added.length ? `added ${d.added.map((n) => `v${n}`).join(', ')}` : 'no new version'}${published}`;
}

/**
 * Every version passes the checks a save makes (POST /api/v1/queries/validate: one statement that
 * parses in its connection's dialect, markers and parameters agreeing) before anything is written,
 * so a bad version late in the file leaves the store as it was.
 */
async function checkVersions(local: LocalControl, bundle: Bundle): Promise<void> {
  for (const q of bundle.queries) {
    for (const x of q.versions) {
      const report = await local.call('POST', '/api/v1/queries/validate', { name: q.name, ...versionFields(x) });
      if (report.valid) continue;
      const [first] = report.errors as Array<{ code: string; message: string }>;
      // The file is at fault, not the command line: exit 1 whatever the code, which the message still names.
      throw new Failure(`query '${q.name}' version ${x.version}: ${first.message} (${first.code})`);
    }
  }
}

async function missingConnections(local: LocalControl, bundle: Bundle): Promise<string[]> {
  const used = new Set(bundle.queries.flatMap((q) => q.versions.map((x) => x.connection_name)).filter((c): c is string => c !== null));
  const missing: string[] = [];
  for (const c of [...used].sort()) if (!(await local.store.getConnection(c))) missing.push(c);
  return missing;
}

export const QUERIES: Group = {
  kind: 'group',
  name: 'queries',
  summary: 'List, show, export and import saved queries in the store',
  description: ['These commands open the store themselves (the same QUERYAPIGATE_* settings as serve, and ./.env); no server is needed.'],
  children: [list, show, exportQueries, importQueries],
  examples: ['queryapigate queries list', 'queryapigate queries export --out queries.yaml', 'queryapigate queries import queries.yaml'],
};
