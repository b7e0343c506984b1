// In charge of the query bundle: saved queries with every version, its parameters and status, and
// the connection names they use, as one YAML or JSON document. Builds it from the management API's
// views, reads and checks a file once (shape here, the SQL and parameter rules with the same
// functions the API saves with), and tells whether two versions are the same (SQL, connection,
// parameters). Connections themselves are not in it: they hold passwords.
import * as v from 'valibot';
import { checkName } from '../api/validate.js';
// YAML through `yaml` (eemeli/yaml): a well-kept, dependency-free YAML 1.2 parser and writer whose
// block literals keep multi-line SQL readable and exact; JSON files are YAML too, so one reader serves both.
// Loaded on first use, as for yaml answers (every command's module is loaded by `serve` too: cli/commands.ts).
import { yamlLibrary as yaml } from '../call/formats/yaml.js';
import { normalizeParameters, toPublicRule } from '../call/paramRules.js';
import type { GatewayError } from '../contract/errors.js';
import { scanMarkers } from '../governance/markers.js';
import { Failure } from './tree.js';

export const BUNDLE_FORMAT = 'queryapigate-queries/1';

const text = v.string('must be text');
const versionSchema = v.object({
  version: v.pipe(v.number('must be a number'), v.integer('must be a whole number'), v.minValue(1)),
  status: v.picklist(['published', 'previous', 'draft'], 'must be published, previous or draft'),
  description: v.pipe(text, v.minLength(1, 'is required')),
  author: v.optional(v.nullable(text), null),
  tags: v.optional(v.array(text, 'must be a list of text'), []),
  sql: v.pipe(text, v.trim(), v.minLength(1, 'is required')),
  connection_name: v.optional(v.nullable(text), null),
  parameters: v.optional(v.nullable(v.record(v.string(), v.unknown(), 'must be a mapping')), {}),
  cache_ttl: v.optional(v.nullable(v.pipe(v.number('must be a number'), v.integer('must be a whole number'), v.minValue(0))), null),
});
const querySchema = v.object({
  name: text,
  collection: v.optional(v.nullable(text), null),
  published_version: v.optional(v.nullable(v.pipe(v.number('must be a number'), v.integer('must be a whole number'))), null),
  versions: v.pipe(v.array(versionSchema, 'must be a list'), v.minLength(1, 'must hold at least one version')),
});
const bundleSchema = v.object({
  format: v.literal(BUNDLE_FORMAT, `must be '${BUNDLE_FORMAT}'`),
  exported_at: v.optional(v.nullable(text)),
  connections: v.optional(v.array(text, 'must be a list of names'), []),
  queries: v.array(querySchema, 'must be a list'),
});

export type Bundle = v.InferOutput<typeof bundleSchema>;
export type BundleQuery = Bundle['queries'][number];
export type BundleVersion = BundleQuery['versions'][number];

// biome-ignore lint/suspicious/noExplicitAny: GET /api/v1/queries/{name}, as the management API shapes it
type QueryDetail = any;

/** What a version is saved with: the fields a bundle keeps and a POST of a version takes. */
export function versionFields(x: Omit<BundleVersion, 'version' | 'status'>): Omit<BundleVersion, 'version' | 'status'> {
  const { description, author, tags, sql, connection_name, parameters, cache_ttl } = x;
  return { description, author, tags, sql, connection_name, parameters, cache_ttl };
}

/** The bundle of these queries (their GET /api/v1/queries/{name} views), in the order given. */
export function buildBundle(details: QueryDetail[], at: string): Bundle {
  const queries: BundleQuery[] = details.map((q) => ({
    name: q.name,
    collection: q.collection,
    published_version: q.published_version,
    versions: q.versions.map((x: QueryDetail) => ({ version: x.version, status: x.status, ...versionFields(x) })),
  }));
  const connections = [...new Set(queries.flatMap((q) => q.versions.map((x) => x.connection_name)).filter((c): c is string => c !== null))].sort();
  return { format: BUNDLE_FORMAT, exported_at: at, connections, queries };
}

export function formatBundle(bundle: Bundle, format: 'yaml' | 'json'): string {
  if (format === 'json') return `${JSON.stringify(bundle, null, 2)}\n`;
  // Literal blocks only: a folded block would be read back the same, but is harder to read as SQL.
  return yaml().stringify(bundle, { blockQuote: 'literal', lineWidth: 0 });
}

/** Reads and checks a bundle file's text; every problem is a Failure naming where it is. */
export function readBundle(source: string, content: string): Bundle {
  let value: unknown;
  try {
    value = yaml().parse(content, { uniqueKeys: true });
  } catch (e) {
    throw new Failure(`${source}: not YAML or JSON: ${(e as Error).message.split('\n')[0]}`);
  }
  const parsed = v.safeParse(bundleSchema, value);
  if (!parsed.success) {
    const issue = parsed.issues[0];
    const where = issue.path?.map((p) => (typeof p.key === 'number' ? `[${p.key}]` : `.${String(p.key)}`)).join('') ?? '';
    throw new Failure(`${source}: ${where ? `${where.replace(/^\./, '')}: ` : ''}${issue.message}`);
  }
  const bundle = parsed.output;
  const seen = new Set<string>();
  for (const q of bundle.queries) {
    const at = `${source}: query '${q.name}'`;
    try {
      checkName(q.name);
    } catch (e) {
      throw new Failure(`${at}: ${(e as GatewayError).message}`);
    }
    if (seen.has(q.name)) throw new Failure(`${at} appears twice`);
    seen.add(q.name);
    q.versions.forEach((x, i) => {
      if (x.version !== i + 1) throw new Failure(`${at}: versions must be numbered 1, 2, 3, ... in order (found ${x.version} at place ${i + 1})`);
    });
    if (q.published_version !== null && !q.versions.some((x) => x.version === q.published_version)) {
      throw new Failure(`${at}: published_version ${q.published_version} is not one of its versions`);
    }
  }
  return bundle;
}

/** What makes a version itself: its SQL, its connection and its parameter rules (in their long form). */
export function versionIdentity(x: { sql: string; connection_name: string | null; parameters: Record<string, unknown> | null }): string {
  const sql = x.sql.trim();
  const { rules } = normalizeParameters(x.parameters ?? {}, scanMarkers(sql).placeholders);
  const params = Object.keys(rules)
    .sort()
    .map((k) => [k, toPublicRule(rules[k])]);
  return JSON.stringify([sql, x.connection_name ?? null, params]);
}
