// In charge of building one caller's catalog in an executor: the store's queries and connections read
// through the executor's own reader, what the caller may reach decided as /q/ decides it, each query
// described on the executor's plan and schema caches, and both documents (/catalog, /openapi.json)
// rendered as text for the acceptor to cache. The task and its answer cross the thread as plain data.
import type { Caller } from '../auth/keys.js';
import type { CallContext } from '../call/context.js';
import type { ConnectionRow } from '../store/types.js';
import { describeQuery, type QueryFacts, type Reading, readConnection } from './describe.js';
import { catalogListing } from './listing.js';
import { openApiDocument } from './openapi.js';
import { grantedConnections, reachableQueries } from './reach.js';

/** What the acceptor asks an executor for (piscina task 'catalog'): the caller it identified. */
export interface CatalogTask {
  caller: Caller;
  serverVersion: string;
}

/** Both bodies, built together from one reading of the store. */
export interface CatalogDocuments {
  catalog: string;
  openapi: string;
}

export async function buildCatalog(ctx: CallContext, task: CatalogTask): Promise<CatalogDocuments> {
  const { caller } = task;
  const { facts, namable } = await describeReachable(ctx, caller);
  const { config } = ctx;
  return {
    catalog: JSON.stringify(catalogListing(caller, facts, namable, { allowWrites: config.allowWrites, rateLimit: config.rateLimit })),
    openapi: JSON.stringify(openApiDocument(facts, { serverVersion: task.serverVersion, maxPageSize: config.maxPageSize, queryTimeout: config.queryTimeout })),
  };
}

/** Every saved query the caller reaches, described as a call reads it, and the connections it may name. */
export async function describeReachable(ctx: CallContext, caller: Caller): Promise<{ facts: QueryFacts[]; namable: ConnectionRow[] }> {
  const [queries, connections] = await Promise.all([ctx.store.listQueries(), ctx.store.listConnections()]);
  const namable = grantedConnections(caller, connections);
  const reachable = reachableQueries(caller, queries, namable);
  const byName = new Map(connections.map((c) => [c.name, c]));
  // Each connection is opened and its schema read once per build, whatever the number of queries on it.
  const readings = new Map<string, Promise<Reading | null>>();
  const reading = (name: string) => {
    let r = readings.get(name);
    if (!r) {
      r = readConnection(ctx, byName.get(name), name);
      readings.set(name, r);
    }
    return r;
  };
  const facts = await Promise.all(reachable.map(async (r) => describeQuery(ctx, caller, r, await reading(r.connections[0]))));
  return { facts, namable };
}
