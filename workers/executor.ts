// The piscina worker entry: builds this thread's CallContext once and serves calls with runCall (the
// default task), ad-hoc statements (the 'adhoc' task), catalog builds ('catalog') and MCP requests ('mcp', 'mcpTools').
// The work lives in src/call, src/catalog and src/mcp; this file only wires it up.
import { workerData } from 'node:worker_threads';
import { createCallContext, type ExecutorData } from '../src/call/context.js';
import { runAdhoc } from '../src/call/adhoc.js';
import { runCall } from '../src/call/runCall.js';
import { buildCatalog, type CatalogDocuments, type CatalogTask } from '../src/catalog/build.js';
import type { Answer, Request } from '../src/contract/exchange.js';
import { type McpTask, type McpToolListing, type McpToolsTask, mcpTools as listMcpTools, serveMcp } from '../src/mcp/server.js';
import { configureLogs, SERVER_LOG_FD } from '../src/log.js';

const data = workerData as ExecutorData;
configureLogs(data.config, SERVER_LOG_FD);
const ctx = createCallContext(data);

export default function execute(req: Request): Promise<Answer> {
  return runCall(ctx, req);
}

export function adhoc(req: Request): Promise<Answer> {
  return runAdhoc(ctx, req);
}

export function catalog(task: CatalogTask): Promise<CatalogDocuments> {
  return buildCatalog(ctx, task);
}

export function mcp(task: McpTask): Promise<Answer> {
  return serveMcp(ctx, task);
}

export function mcpTools(task: McpToolsTask): Promise<McpToolListing> {
  return listMcpTools(ctx, task);
}
