// The piscina worker entry: builds this thread's CallContext once and serves calls with runCall (the
// default task), ad-hoc statements (the 'adhoc' task), catalog builds ('catalog'), MCP requests ('mcp', 'mcpTools'),
// and, in one executor, the recorder ('record', with a PostgreSQL store).
// The work lives in src/call, src/catalog and src/mcp; this file only wires it up.
import { workerData } from 'node:worker_threads';
import { createCallContext, type ExecutorData } from '../src/call/context.js';
import { runAdhoc } from '../src/call/adhoc.js';
import { batchTask, listenForBatches, type RunOne } from '../src/call/answerBatches.js';
import { runCall } from '../src/call/runCall.js';
import { buildCatalog, type CatalogDocuments, type CatalogTask } from '../src/catalog/build.js';
import type { AnswerBatch, CallBatch } from '../src/contract/crossing.js';
import type { Answer, Request } from '../src/contract/exchange.js';
import type { McpTask, McpToolListing, McpToolsTask } from '../src/mcp/server.js';
import { configureLogs, SERVER_LOG_FD } from '../src/log.js';
import type { RecordTask } from '../src/recorder/host.js';

const data = workerData as ExecutorData;
configureLogs(data.config, SERVER_LOG_FD);
const ctx = createCallContext(data);

export default function execute(req: Request): Promise<Answer> {
  return runCall(ctx, req);
}

export function adhoc(req: Request): Promise<Answer> {
  return runAdhoc(ctx, req);
}

/** /q/ and /execute_sql calls as the acceptor hands them over: a batch, each answered on its own. */
const runOne: RunOne = (task, req) => (task === 'adhoc' ? runAdhoc(ctx, req) : runCall(ctx, req));
/** A batch sent as a piscina task (before the acceptor has heard this executor listen): its answers are the result. */
export const batch: (calls: CallBatch) => Promise<AnswerBatch> = batchTask(runOne);
listenForBatches(runOne, data.answers);

export function catalog(task: CatalogTask): Promise<CatalogDocuments> {
  return buildCatalog(ctx, task);
}

// MCP's module (and the SDK) is loaded on the first MCP request: about 14 MB of RSS otherwise held by every executor.
const mcpModule = () => import('../src/mcp/server.js');

export async function mcp(task: McpTask): Promise<Answer> {
  return (await mcpModule()).serveMcp(ctx, task);
}

export async function mcpTools(task: McpToolsTask): Promise<McpToolListing> {
  return (await mcpModule()).mcpTools(ctx, task);
}

/** Holds the recorder until the acceptor stops it; its module is loaded only in the executor given this task. */
export async function record(task: RecordTask): Promise<void> {
  const { hostRecorder } = await import('../src/recorder/host.js');
  return hostRecorder(task.port, task.data, 'executor');
}
