// In charge of the record stage: a run, built once when the call ends (success or failure), handed
// to the executor's batch for the recorder thread; never on the call's path to the database.
import type { GatewayError } from '../contract/errors.js';
import type { RunRecord } from '../contract/messages.js';
import type { MaskPlan } from '../governance/masking.js';
import type { RunBatcher } from '../recorder/batcher.js';
import type { Target } from './authorize.js';

export function record(
  runs: RunBatcher,
  t: Target,
  key: string,
  requestId: string,
  rows: number | null,
  durationMs: number | null,
  serializationMs: number | null,
  masked: MaskPlan['masked'] | null,
  failure: Pick<GatewayError, 'code' | 'message'> | null,
): void {
  const run: RunRecord = {
    query: t.query.name,
    version: t.version.version,
    kind: 'saved',
    executed_at: t.executedAt,
    status: failure ? 'error' : 'success',
    connection_name: t.connectionName,
    key_name: key,
    request_id: requestId,
    rows,
    duration_ms: durationMs,
    serialization_ms: serializationMs,
    transport: 'rest',
  };
  if (failure) {
    run.error = failure.message;
    run.code = failure.code;
  }
  if (masked) run.masked = masked;
  runs.add(run);
}
