// The synthetic run the recorder's benches make (bench/recorder.ts, runPacking.ts, payloadJson.ts): 50 queries ×
// 4 versions, 200 keys, one run in 50 failing with a statement timeout. Run `n` is the same in every bench.
import type { RunRecord } from '../src/contract/messages.js';

export function syntheticRun(n: number, executedAt: string): RunRecord {
  const error = n % 50 === 0;
  const r: RunRecord = {
    query: `monthly_revenue_${n % 50}`,
    version: 1 + (n % 4),
    kind: 'saved',
    executed_at: executedAt,
    status: error ? 'error' : 'success',
    connection_name: 'warehouse',
    key_name: `mobile-key-${n % 200}`,
    request_id: n.toString(16).padStart(12, '0'),
    rows: error ? null : n % 500,
    duration_ms: error ? null : n % 300,
    serialization_ms: error ? null : (n % 40) / 10,
    transport: 'rest',
  };
  if (error) Object.assign(r, { error: 'canceling statement due to statement timeout', code: 'query_timeout' });
  return r;
}
