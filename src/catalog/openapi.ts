// In charge of the OpenAPI 3.1 document for one caller: one typed GET /q/<name> operation per saved
// query it may call (its parameters with their rules, the reserved arguments, the rows' columns, the
// paging headers, the error bodies), and the X-API-Key scheme. Pure: facts in, a plain object out.
import type { ParamRule } from '../call/paramValues.js';
import { FORMATS } from '../call/formats.js';
import { RESERVED } from '../call/request.js';
import { ERRORS } from '../contract/errors.js';
import type { JsonSchema } from './columns.js';
import type { QueryFacts } from './describe.js';

export interface DocumentSettings {
  serverVersion: string;
  maxPageSize: number;
  /** QUERYAPIGATE_QUERY_TIMEOUT in seconds; 0 = none. */
  queryTimeout: number;
}

/** The statuses every operation documents an error body for. */
const ERROR_STATUSES = [400, 401, 403, 404, 429, 500, 502, 503, 504] as const;

/** The error codes answered with each status, from the one error table. */
const CODES_BY_STATUS: Map<number, string[]> = (() => {
  const out = new Map<number, string[]>();
  for (const group of Object.values(ERRORS)) {
    for (const [code, status] of Object.entries(group)) {
      const list = out.get(status) ?? [];
      list.push(code);
      out.set(status, list);
    }
  }
  return out;
})();

export function openApiDocument(queries: QueryFacts[], settings: DocumentSettings): Record<string, unknown> {
  const paths: Record<string, unknown> = {};
  const ids = new Set<string>();
  // Only what a plain GET runs: a query never published answers 404 not_published.
  for (const q of queries) if (q.published) paths[`/q/${encodeURIComponent(q.name)}`] = { get: operation(q, settings, operationId(q.name, ids)) };
  return {
    openapi: '3.1.0',
    info: {
      title: 'QueryAPIGate saved queries',
      version: settings.serverVersion,
      description:
        'The saved queries the API key that asked may call, each as `GET /q/{name}`. Send the key in the `X-API-Key` header. ' +
        'JSON answers are a bare array of row objects, paged by `page` and `page_size`; a page with no rows answers `{"message": "No results returned"}`.',
    },
    paths,
    components: {
      securitySchemes: { ApiKeyAuth: { type: 'apiKey', in: 'header', name: 'X-API-Key' } },
      headers: {
        'X-Page': { description: 'The page answered (1-based)', schema: { type: 'integer', minimum: 1 } },
        'X-Page-Size': { description: 'Rows per page', schema: { type: 'integer', minimum: 1 } },
        'X-Has-More': { description: 'Whether a next page has rows', schema: { type: 'string', enum: ['true', 'false'] } },
        'X-Request-Id': { description: 'The request id, also in error bodies and run history', schema: { type: 'string' } },
      },
      schemas: {
        NoResults: {
          type: 'object',
          description: 'The answer to a page with no rows, and to a write',
          properties: { message: { const: 'No results returned' } },
          required: ['message'],
        },
        Error: {
          type: 'object',
          properties: { error: { type: 'string' }, code: { type: 'string' }, request_id: { type: 'string' } },
          required: ['error', 'code', 'request_id'],
        },
      },
      responses: Object.fromEntries(ERROR_STATUSES.map((s) => [`Error${s}`, errorResponse(s)])),
    },
    security: [{ ApiKeyAuth: [] }],
  };
}

function errorResponse(status: number): Record<string, unknown> {
  const codes = CODES_BY_STATUS.get(status) ?? [];
  return {
    description: `Error: ${codes.join(', ')}`,
    headers: { 'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' } },
    content: {
      'application/json': {
        schema: { allOf: [{ $ref: '#/components/schemas/Error' }, { properties: { code: { enum: codes } } }] },
      },
    },
  };
}

/** A unique operationId from the name: letters, digits and underscores. */
function operationId(name: string, taken: Set<string>): string {
  const base = `q_${name.replace(/[^A-Za-z0-9_]/g, '_')}`;
  let id = base;
  for (let n = 2; taken.has(id); n++) id = `${base}_${n}`;
  taken.add(id);
  return id;
}

function operation(q: QueryFacts, settings: DocumentSettings, id: string): Record<string, unknown> {
  // A parameter named like a request option can't be sent by GET (the option wins): it is left out.
  const parameters = q.parameters.filter((p) => !RESERVED.has(p.name)).map((p) => parameter(p.name, p.rule));
  parameters.push(...reserved(q, settings));
  const row: JsonSchema = { type: 'object' };
  if (q.columns) row.properties = Object.fromEntries(q.columns.map((c) => [c.name, c.dataType ? { ...c.schema, description: withType(c) } : c.schema]));
  const okHeaders: Record<string, unknown> = {
    'X-Page': { $ref: '#/components/headers/X-Page' },
    'X-Page-Size': { $ref: '#/components/headers/X-Page-Size' },
    'X-Has-More': { $ref: '#/components/headers/X-Has-More' },
    'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' },
  };
  if (q.writes) okHeaders['X-Rows-Affected'] = { description: 'Rows the write changed', schema: { type: 'integer' } };
  const notes = [q.description || `Saved query ${q.name}`];
  notes.push(`Version ${q.version} on ${q.connection ? `connection ${q.connection}` : 'the connection named by connection_name'}.`);
  if (q.writes) notes.push(q.canWrite ? 'This statement writes.' : 'This statement writes, which this key may not do: a call answers 403 read_only.');
  if (q.masked?.length) notes.push(`Masked for this key: ${q.masked.map((m) => `${m.column} (${m.action})`).join(', ')}.`);
  if (q.refused) notes.push(`A call is refused now: ${q.refused.code} (${q.refused.message}).`);
  if (q.cacheTtl) notes.push(`Answers are cached for ${q.cacheTtl} s (ETag, If-None-Match).`);
  const op: Record<string, unknown> = {
    operationId: id,
    summary: q.description || q.name,
    description: notes.join('\n\n'),
    parameters,
    responses: {
      200: {
        description: 'One page of rows',
        headers: okHeaders,
        content: {
          'application/json': { schema: { oneOf: [{ type: 'array', items: row }, { $ref: '#/components/schemas/NoResults' }] } },
          'application/x-ndjson': { schema: { type: 'string', description: 'One JSON object per row, one a line' } },
          'text/csv': { schema: { type: 'string', description: 'A header row, then the rows' } },
          'text/tab-separated-values': { schema: { type: 'string', description: 'A header row, then the rows' } },
          'application/xml': { schema: { type: 'string', description: '<data><item><col>v</col>…</item></data>' } },
          'application/x-yaml': { schema: { type: 'string', description: 'A list of mappings, keys in column order' } },
          'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet': {
            schema: { type: 'string', format: 'binary', description: 'One sheet with typed cells' },
          },
          'application/vnd.apache.parquet': { schema: { type: 'string', format: 'binary', description: 'A Parquet file with typed columns' } },
        },
      },
      ...Object.fromEntries(ERROR_STATUSES.map((s) => [String(s), { $ref: `#/components/responses/Error${s}` }])),
    },
  };
  if (q.tags.length) op.tags = q.tags;
  return op;
}

function withType(c: { dataType: string | null; schema: JsonSchema }): string {
  const extra = typeof c.schema.description === 'string' ? `; ${c.schema.description}` : '';
  return `${c.dataType}${extra}`;
}

const JSON_TYPES: Record<string, string> = { integer: 'integer', number: 'number', string: 'string', boolean: 'boolean' };

/** A declared parameter with its rules, or an undeclared one (required text, passed on as given). */
function parameter(name: string, rule: ParamRule | null): Record<string, unknown> {
  const { schema, required } = parameterSchema(rule);
  const p: Record<string, unknown> = { name, in: 'query', required, schema };
  if (rule === null) p.description = 'Not declared: passed to the statement as given';
  else if (rule.description) p.description = rule.description;
  const example = rule && exampleOf(rule);
  if (example !== undefined && example !== null) p.example = example;
  return p;
}

/** A parameter's value as JSON Schema (its type, enum, limits, pattern, default), and whether a call must give it. */
export function parameterSchema(rule: ParamRule | null): { schema: JsonSchema; required: boolean } {
  if (rule === null) return { schema: { type: 'string' }, required: true };
  const schema: JsonSchema = { type: rule.type ? JSON_TYPES[rule.type] : 'string' };
  if (rule.enum !== undefined) schema.enum = rule.enum;
  if (rule.min !== undefined) schema.minimum = rule.min;
  if (rule.max !== undefined) schema.maximum = rule.max;
  if (rule.min_length !== undefined) schema.minLength = rule.min_length;
  if (rule.max_length !== undefined) schema.maxLength = rule.max_length;
  // The gateway matches the whole value; a JSON Schema pattern matches anywhere unless anchored.
  if (rule.pattern !== undefined) schema.pattern = `^(?:${rule.pattern})$`;
  if (rule.default !== undefined && rule.default !== null) schema.default = rule.default;
  return { schema, required: rule.required && rule.default === undefined };
}

/** A value that passes the rules, where one is plain to see (a default, the first enum member). */
function exampleOf(rule: ParamRule): unknown {
  if (rule.default !== undefined && rule.default !== null) return rule.default;
  if (rule.enum?.length) return rule.enum[0];
  if ((rule.type === 'integer' || rule.type === 'number') && (rule.min !== undefined || rule.max !== undefined)) return rule.min ?? rule.max;
  return undefined;
}

function reserved(q: QueryFacts, settings: DocumentSettings): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [
    { name: 'format', in: 'query', description: 'The answer format', schema: { type: 'string', enum: [...FORMATS], default: 'json' } },
    { name: 'page', in: 'query', description: 'The page, 1-based', schema: { type: 'integer', minimum: 1, default: 1 } },
    {
      name: 'page_size',
      in: 'query',
      description: 'Rows per page',
      schema: { type: 'integer', minimum: 1, maximum: settings.maxPageSize, default: Math.min(10, settings.maxPageSize) },
    },
    {
      name: 'version',
      in: 'query',
      description: `A version other than the published one (${q.version}); earlier published versions stay callable`,
      schema: { type: 'integer', minimum: 1 },
    },
    {
      name: 'timeout',
      in: 'query',
      description: 'Seconds; lowers the server limit, never raises it',
      schema: settings.queryTimeout > 0 ? { type: 'number', exclusiveMinimum: 0, maximum: settings.queryTimeout } : { type: 'number', exclusiveMinimum: 0 },
    },
  ];
  // Another connection than the saved one needs a connections grant: documented only where there is one.
  const others = q.connections.filter((c) => c !== q.connection);
  if (q.connection === null || others.length) {
    out.push({
      name: 'connection_name',
      in: 'query',
      required: q.connection === null,
      description: q.connection === null ? 'The connection to run on (the query has no saved one)' : `Run on another connection than ${q.connection}`,
      schema: { type: 'string', enum: q.connections },
    });
  }
  return out;
}
