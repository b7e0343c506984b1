// In charge of the execute stage: the statement run on its data source within the call's time
// limit, read-only unless it writes, counted in the query metrics (running, outcome, duration).
import type { StatementCounters } from '../metrics/metrics.js';
import type { ResultSet, RunOptions, Source } from '../sources/types.js';

export async function execute(
  active: { value: number },
  counters: StatementCounters,
  source: Source,
  text: string,
  values: unknown[],
  options: RunOptions,
): Promise<ResultSet> {
  const started = performance.now();
  active.value++;
  let result: ResultSet;
  try {
    result = await source.run(text, values, options);
  } catch (e) {
    counters.error.inc();
    throw e;
  } finally {
    active.value--;
  }
  counters.success.inc();
  counters.duration.observe((performance.now() - started) / 1000);
  return result;
}
