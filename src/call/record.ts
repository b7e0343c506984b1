// In charge of the record stage: a run, built once when the call ends (success or failure), handed
// to the executor's batch for the recorder thread; never on the call's path to the database. What a
// run is of (a saved query's version, or an ad-hoc statement) is a RunTarget, named before it runs.
import { createHash } from 'node:crypto';
import type { GatewayError } from '../contract/errors.js';
import type { RunRecord } from '../contract/messages.js';
import type { MaskPlan } from '../governance/masking.js';
import type { RunBatcher } from '../recorder/batcher.js';
import type { Target } from './authorize.js';

/** How a call reached the gateway, as history tells it. */
export type Transport = 'rest' | 'mcp';

/** What a run is of, as history names it: a saved version, or (query and version null) ad-hoc SQL. */
export interface RunTarget {
  query: string | null;
  version: number | null;
  connectionName: string;
  executedAt: string;
  transport: Transport;
  /** Ad-hoc runs only: the statement as QUERYAPIGATE_HISTORY_ADHOC_SQL keeps it, and the parameter names. */
  adhoc?: Pick<RunRecord, 'sql' | 'sql_truncated' | 'sql_sha256' | 'params'>;
}

export function savedRun(t: Target, transport: Transport): RunTarget {
  return { query: t.query.name, version: t.version.version, connectionName: t.connectionName, executedAt: t.executedAt, transport };
}

/** The contract keeps at most this much of an ad-hoc statement's text. */
const SQL_KEPT = 4000;

/** An ad-hoc statement as history keeps it: its text (cut at 4,000 characters), its hash, or nothing; names of its parameters, never values. */
export function adhocEntry(sql: string, keep: 'text' | 'hash' | 'none', params: string[]): NonNullable<RunTarget['adhoc']> {
  const entry: NonNullable<RunTarget['adhoc']> = { params: [...params].sort() };
  if (keep === 'text') {
    entry.sql = sql.length > SQL_KEPT ? sql.slice(0, SQL_KEPT) : sql;
    if (sql.length > SQL_KEPT) entry.sql_truncated = true;
  } else if (keep === 'hash') entry.sql_sha256 = createHash('sha256').update(sql).digest('hex');
  return entry;
}

export function record(
  runs: RunBatcher,
  t: RunTarget,
  key: string,
  requestId: string,
  rows: number | null,
  durationMs: number | null,
  serializationMs: number | null,
  masked: MaskPlan['masked'] | null,
  failure: Pick<GatewayError, 'code' | 'message'> | null,
): void {
  const run: RunRecord = {
    query: t.query,
    version: t.version,
    kind: t.query === null ? 'adhoc' : 'saved',
    executed_at: t.executedAt,
    status: failure ? 'error' : 'success',
    connection_name: t.connectionName,
    key_name: key,
    request_id: requestId,
    rows,
    duration_ms: durationMs,
    serialization_ms: serializationMs,
    transport: t.transport,
  };
  if (t.adhoc) Object.assign(run, t.adhoc);
  if (failure) {
    run.error = failure.message;
    run.code = failure.code;
  }
  if (masked) run.masked = masked;
  runs.add(run);
}
