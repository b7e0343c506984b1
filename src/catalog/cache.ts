// In charge of the acceptor's cache of built catalogs: both documents per caller policy, bounded in
// count and size, cleared at once on any store change (the acceptor's own, or one heard from another
// instance) and at most 60 s old otherwise, because the column types come from schemas read at most
// 60 s ago (call/schemaCache.ts) and a table can change without the store hearing of it.
import { LRUCache } from 'lru-cache';
import type { Caller } from '../auth/keys.js';
import type { CatalogDocuments } from './build.js';

const MAX_ENTRIES = 1000;
const MAX_CHARS = 64 * 1024 * 1024;
const MAX_AGE_MS = 60_000;

export class CatalogCache {
  #entries = new LRUCache<string, CatalogDocuments>({
    max: MAX_ENTRIES,
    maxSize: MAX_CHARS,
    sizeCalculation: (d) => d.catalog.length + d.openapi.length + 1,
    ttl: MAX_AGE_MS,
  });
  /** Builds in flight, so callers of one policy that arrive together wait for one build. */
  #building = new Map<string, Promise<CatalogDocuments>>();
  #generation = 0;

  get(slot: string, build: () => Promise<CatalogDocuments>): Promise<CatalogDocuments> {
    const hit = this.#entries.get(slot);
    if (hit) return Promise.resolve(hit);
    const pending = this.#building.get(slot);
    if (pending) return pending;
    const generation = this.#generation;
    const p = build()
      .then((docs) => {
        // A change while it was built means it may be stale: answer with it, don't keep it.
        if (generation === this.#generation) this.#entries.set(slot, docs);
        return docs;
      })
      .finally(() => {
        if (this.#building.get(slot) === p) this.#building.delete(slot);
      });
    this.#building.set(slot, p);
    return p;
  }

  clear(): void {
    this.#generation++;
    this.#entries.clear();
    this.#building.clear();
  }
}

/**
 * The policy a catalog is built for: administrators (admin key, open mode) share one; a key's depends
 * on its name and every grant the catalog shows. Activity, expiry and addresses are checked by
 * identify on every request, so they are not part of it.
 */
export function policySlot(caller: Caller): string {
  if (caller.kind !== 'key') return caller.kind;
  const k = caller.key;
  return JSON.stringify([
    'key',
    k.name,
    k.connections,
    k.queries,
    k.collections,
    k.allow_writes,
    k.allowed_write_ops,
    k.allowed_tables,
    k.mask,
    k.rate_limit,
    k.rate_limits,
  ]);
}
