// In charge of what a saved query's version must pass when it is saved, and of what
// POST /api/v1/queries/validate reports without saving: its connection exists, its SQL is one
// statement that parses in the connection's dialect, every :marker is a declared parameter and every
// declared parameter is used. Findings are values: a save refuses with the first, /validate lists
// them all. A write is accepted (whether a call may write is decided when it is called).
import { sourceSettings } from '../call/context.js';
import { normalizeParameters } from '../call/paramRules.js';
import type { ParamRule } from '../call/paramValues.js';
import { type ErrorCode, type ErrorExtras, GatewayError } from '../contract/errors.js';
import { closestName, listNames } from '../contract/suggest.js';
import { type Inspection, inspectStatement, type SqlDialect } from '../governance/analysis.js';
import { scanMarkers, splitsIntoMultipleStatements, toPositional } from '../governance/markers.js';
import { openSource } from '../sources/index.js';
import type { Source } from '../sources/types.js';
import type { ConnectionRow } from '../store/types.js';
import type { ControlContext } from './routes.js';

/** One thing a save refuses: the code it answers with, its message, the field at fault, extras. */
export interface Finding {
  code: ErrorCode;
  message: string;
  field: string;
  /** Per parameter, what is wrong. */
  errors?: Record<string, string>;
  /** The database's or the parser's own words about the SQL. */
  detail?: string;
}

/** What the checks found out about a version, whether or not it may be saved. */
export interface VersionCheck {
  findings: Finding[];
  /** The dialect the SQL was read in: its connection's; null without one (then every dialect is tried). */
  dialect: SqlDialect | null;
  /** The SQL's marker names in order of first use, read in that dialect. */
  placeholders: string[];
  /** The declared parameters in their long form, as the store keeps them. */
  rules: Record<string, ParamRule>;
  /** True when the statement writes; accepted, since the call-time policy decides. */
  writes: boolean;
  /** Tables the statement reads or writes; null when the gateway cannot analyse it. */
  tables: string[] | null;
  /**
   * Why the gateway cannot analyse a statement it accepts (its database reads it, or nothing says it
   * does not), or null. Keys with allowed_tables or mask rules are refused such a statement.
   */
  unanalysed: string | null;
}

export interface VersionInput {
  sql: string;
  connection_name: string | null;
  parameters: unknown;
}

const DIALECTS: readonly SqlDialect[] = ['postgres', 'mysql', 'sqlite'];
const DIALECT_NAMES: Record<SqlDialect, string> = { postgres: 'PostgreSQL', mysql: 'MySQL/MariaDB', sqlite: 'SQLite' };
/** How long a save waits for the database to say whether it parses a statement the gateway cannot. */
const ASK_TIMEOUT_MS = 5000;

export async function checkVersion(ctx: ControlContext, input: VersionInput): Promise<VersionCheck> {
  const findings: Finding[] = [];
  const connection = input.connection_name === null ? null : await findConnection(ctx, input.connection_name, findings);
  const dialect = connection ? dialectOf(connection.db) : null;
  const reading = await readStatement(ctx, input.sql, connection, dialect, findings);
  // Markers are read in the connection's dialect (as calls bind them): MySQL 'it\'s :x' holds none.
  const { placeholders } = scanMarkers(input.sql, dialect ?? undefined);
  const declared = normalizeParameters(input.parameters, placeholders);
  if (Object.keys(declared.errors).length) findings.push(parameterFinding(declared, placeholders));
  return { findings, dialect, placeholders, rules: declared.rules, ...reading };
}

/** The error a save answers with: the first finding. */
export function refusal(f: Finding): GatewayError {
  const extras: ErrorExtras = {};
  if (f.errors) extras.errors = f.errors;
  if (f.detail !== undefined) extras.detail = f.detail;
  return new GatewayError(f.code, f.message, extras);
}

export function dialectOf(db: string): SqlDialect | null {
  if (db === 'postgres' || db === 'postgresql') return 'postgres';
  return db === 'mysql' || db === 'sqlite' ? db : null;
}

async function findConnection(ctx: ControlContext, name: string, findings: Finding[]): Promise<ConnectionRow | null> {
  const row = await ctx.store.getConnection(name);
  if (row) return row;
  const names = (await ctx.store.listConnections()).map((c) => c.name);
  const near = closestName(name, names);
  findings.push({
    code: 'connection_not_found',
    field: 'connection_name',
    message: `Connection '${name}' not found${near ? ` (did you mean '${near}'?)` : ''}; the connections are ${listNames(names)}`,
  });
  return null;
}

/**
 * One statement that parses. The gateway's parsers judge first; when they cannot read the text
 * (they also reject valid SQL, such as SQLite's COLLATE NOCASE or PostgreSQL's GROUPING SETS), the
 * connection's database is asked to parse it without running it, and its answer wins. Only when it
 * cannot be asked does a parser's rejection refuse the save.
 */
async function readStatement(
  ctx: ControlContext,
  sql: string,
  connection: ConnectionRow | null,
  dialect: SqlDialect | null,
  findings: Finding[],
): Promise<Pick<VersionCheck, 'writes' | 'tables' | 'unanalysed'>> {
  const text = sql.replace(/[\s;]+$/, '');
  const tried: Array<[SqlDialect, Inspection]> = (dialect ? [dialect] : DIALECTS).map((d) => [d, inspectStatement(text, d)]);
  const [readIn, best] = tried.find(([, i]) => i.analysis) ?? tried[0];
  const scan = best.scan;
  const writes = scan.writeVerbs.length > 0 || scan.selectInto;
  const refuse = (message: string, detail?: string) => {
    findings.push({ code: 'invalid_sql', field: 'sql', message, ...(detail === undefined ? {} : { detail }) });
    return { writes, tables: null, unanalysed: null };
  };

  if (dialect ? scan.statements > 1 : splitsIntoMultipleStatements(text)) {
    findings.push({ code: 'multiple_statements', field: 'sql', message: 'Only one SQL statement is allowed' });
    return { writes, tables: null, unanalysed: null };
  }
  // MySQL runs a /*! ... */ comment, so a statement made of one is not empty.
  if (scan.statements === 0 && !scan.executableComment) return refuse('The SQL holds no statement, only comments or semicolons');
  if (best.analysis) return { writes, tables: best.analysis.tables, unanalysed: null };

  const failure = best.failure ?? 'the statement could not be analysed';
  if (connection && dialect) {
    const said = await askDatabase(ctx, connection, dialect, text);
    if (typeof said === 'string') return refuse(`The SQL is not valid ${DIALECT_NAMES[dialect]}: the database cannot parse it`, said);
    if (said === null) return { writes, tables: null, unanalysed: failure };
  }
  if (tried.every(([, i]) => i.rejectedByParser)) {
    if (!dialect) return refuse(`The SQL parses in none of ${DIALECTS.map((d) => DIALECT_NAMES[d]).join(', ')}`, failure);
    const why = connection?.active ? 'the database could not be asked' : 'the connection is not active, so its database was not asked';
    return refuse(`The SQL is not valid ${DIALECT_NAMES[readIn]}: the gateway's parser cannot read it (${why})`, failure);
  }
  return { writes, tables: null, unanalysed: failure };
}

/**
 * The database's own syntax error, null when it parses the statement, undefined when it cannot be
 * asked (switched off, misconfigured, unreachable, or slower than ASK_TIMEOUT_MS). Nothing is run.
 */
async function askDatabase(ctx: ControlContext, connection: ConnectionRow, dialect: SqlDialect, sql: string): Promise<string | null | undefined> {
  if (!connection.active) return undefined;
  let source: Source;
  try {
    source = openSource(connection, { ...sourceSettings(ctx.config), poolSize: 1 });
  } catch {
    return undefined;
  }
  let timer: NodeJS.Timeout | undefined;
  try {
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), ASK_TIMEOUT_MS);
    });
    return await Promise.race([source.syntaxError(toPositional(sql, dialect).text), late]);
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
    source.close().catch(() => undefined);
  }
}

/** Markers and declarations that do not match, or rules that do not hold: one finding, every name in `errors`. */
function parameterFinding(p: ReturnType<typeof normalizeParameters>, placeholders: string[]): Finding {
  const declared = [...p.unused, ...Object.keys(p.rules)];
  const errors = { ...p.errors };
  const sentences: string[] = [];
  if (p.undeclared.length) {
    for (const name of p.undeclared) {
      const near = closestName(name, p.unused);
      if (near) errors[name] += ` (did you mean the declared '${near}'?)`;
    }
    const markers = p.undeclared.map((n) => `:${n}`).join(', ');
    sentences.push(`The SQL uses ${markers} but "parameters" does not declare ${p.undeclared.length > 1 ? 'them' : 'it'} (declared: ${listNames(declared)})`);
  }
  if (p.unused.length) {
    const names = listNames(p.unused);
    sentences.push(
      `"parameters" declares ${names}, which the SQL does not use (its markers: ${placeholders.length ? placeholders.map((n) => `:${n}`).join(', ') : 'none'})`,
    );
  }
  const others = Object.entries(p.errors).filter(([k]) => !p.undeclared.includes(k) && !p.unused.includes(k));
  if (others.length) sentences.push(`Invalid parameters: ${others.map(([k, m]) => `${k}: ${m}`).join('; ')}`);
  const code = p.undeclared.length ? 'param_undeclared' : p.unused.length ? 'param_unused' : 'invalid_body';
  return { code, field: 'parameters', message: sentences.join('. '), errors };
}
