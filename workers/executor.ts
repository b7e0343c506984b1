// The piscina worker entry: builds this thread's CallContext once and serves calls with runCall (the
// default task) and catalog builds (the 'catalog' task). The work lives in src/call and src/catalog;
// this file only wires it up.
import { workerData } from 'node:worker_threads';
import { createCallContext, type ExecutorData } from '../src/call/context.js';
import { runCall } from '../src/call/runCall.js';
import { buildCatalog, type CatalogDocuments, type CatalogTask } from '../src/catalog/build.js';
import type { Answer, Request } from '../src/contract/exchange.js';
import { configureLogs, SERVER_LOG_FD } from '../src/log.js';

const data = workerData as ExecutorData;
configureLogs(data.config, SERVER_LOG_FD);
const ctx = createCallContext(data);

export default function execute(req: Request): Promise<Answer> {
  return runCall(ctx, req);
}

export function catalog(task: CatalogTask): Promise<CatalogDocuments> {
  return buildCatalog(ctx, task);
}
