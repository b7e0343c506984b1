// In charge of the execute stage: the statement run on its data source within the call's time
// limit, read-only unless it writes, counted in the query metrics (running, outcome, duration).
import type { Metrics } from '../metrics/metrics.js';
import type { ResultSet, RunOptions, Source } from '../sources/types.js';

/** The metric labels of one connection's statements. */
export interface SourceLabels {
  connection: string;
  dialect: string;
}

export async function execute(
  m: Metrics,
  source: Source,
  text: string,
  values: unknown[],
  options: RunOptions,
  labels: SourceLabels,
  key: string,
): Promise<ResultSet> {
  const started = performance.now();
  m.activeQueries.inc();
  let result: ResultSet;
  try {
    result = await source.run(text, values, options);
  } catch (e) {
    m.queries.inc({ ...labels, status: 'error', key });
    throw e;
  } finally {
    m.activeQueries.dec();
  }
  m.queries.inc({ ...labels, status: 'success', key });
  m.queryDuration.observe(labels, (performance.now() - started) / 1000);
  return result;
}
