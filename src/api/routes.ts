// In charge of the management API's routing: each route with the access it needs (api/access.ts),
// compiled once, before listen; a route the access table does not list stops the lock.
import type { KeyLookup } from '../auth/identify.js';
import type { JwtAuth } from '../auth/jwt.js';
import type { Caller } from '../auth/keys.js';
import type { Config } from '../config.js';
import type { CacheAdmin } from '../call/resultCache.js';
import type { AlertSignals } from './signals.js';
import type { Answer, Request } from '../contract/exchange.js';
import type { ChangeMessage } from '../contract/messages.js';
import type { EventLog } from '../store/events.js';
import type { Store } from '../store/store.js';
import { type RouteAccess, routeAccess } from './access.js';

/** What the control plane needs: the store, and ways to tell executors and the recorder. */
export interface ControlContext {
  config: Config;
  store: Store;
  adminKey: Buffer | null;
  /** Key rows as identification reads them (the acceptor's metadata cache, cleared on every change). */
  keys: KeyLookup;
  /** Signed-in users' tokens (JWT on), so open mode never applies with it; absent or null: JWT off. */
  jwt?: JwtAuth | null;
  /** Tells every executor, here and in other instances, that the store changed. */
  publishChange(m: ChangeMessage): void;
  /** Waits until runs recorded so far are in the store (read-your-writes for history). */
  flushHistory(): Promise<void>;
  /** The event log (every run, kept for QUERYAPIGATE_EVENT_RETENTION), read side. */
  events: EventLog;
  /** The response cache as administrators see it: Redis's entries, or this process's executors'. */
  cache: CacheAdmin;
  /** This process's row in the instances table (its heartbeat); null: a process that does not beat (the command line). */
  instanceId: string | null;
  /** What this process counts for GET /api/v1/alerts (key refusals, dropped runs). */
  signals: AlertSignals;
}

/** `who` is the caller, already checked against the route's access. */
export type ApiHandler = (ctx: ControlContext, req: Request, params: string[], who: Caller) => Promise<Answer> | Answer;

/** What a successful write tells the executors; by default that metadata changed (every cache cleared). */
export type ChangeOf = (params: string[]) => ChangeMessage;
const METADATA_CHANGED: ChangeOf = () => ({ kind: 'metadata' });
/** A route's change for a POST that saves nothing (a validation): no executor has anything to forget. */
export const NOTHING_CHANGED = null;

interface Route {
  method: string;
  pattern: string;
  parts: string[];
  access: RouteAccess;
  handler: ApiHandler;
  /** null: the route saves nothing. */
  change: ChangeOf | null;
}

export class ApiRouter {
  #routes: Route[] = [];
  #locked = false;

  add(method: string, pattern: string, handler: ApiHandler, change: ChangeOf | typeof NOTHING_CHANGED = METADATA_CHANGED): this {
    if (this.#locked) throw new Error(`route ${method} ${pattern} added after the router was locked`);
    const access = routeAccess(method, pattern);
    if (!access) throw new Error(`route ${method} ${pattern} needs its capability in api/access.ts`);
    this.#routes.push({ method, pattern, parts: pattern.split('/').filter(Boolean), access, handler, change });
    return this;
  }

  lock(): this {
    this.#locked = true;
    return this;
  }

  /** Every route as 'METHOD /pattern', in the order added. */
  routes(): string[] {
    return this.#routes.map((r) => `${r.method} ${r.pattern}`);
  }

  /**
   * The handler and its path parameters, the change a success publishes (`saves` false: none); 405
   * when the path exists for other methods; null when none.
   */
  match(method: string, url: string): MatchedRoute | 'method_not_allowed' | null {
    const segs = url.split('/').filter(Boolean);
    let pathMatched = false;
    for (const r of this.#routes) {
      if (r.parts.length !== segs.length) continue;
      const params: string[] = [];
      let ok = true;
      for (let i = 0; i < segs.length && ok; i++) {
        if (r.parts[i][0] === ':') {
          try {
            params.push(decodeURIComponent(segs[i]));
          } catch {
            ok = false;
          }
        } else ok = r.parts[i] === segs[i];
      }
      if (!ok) continue;
      if (r.method === method) {
        return { handler: r.handler, method, pattern: r.pattern, access: r.access, params, change: r.change ?? METADATA_CHANGED, saves: r.change !== null };
      }
      pathMatched = true;
    }
    return pathMatched ? 'method_not_allowed' : null;
  }
}

export interface MatchedRoute {
  handler: ApiHandler;
  method: string;
  pattern: string;
  access: RouteAccess;
  params: string[];
  change: ChangeOf;
  /** false: the route saves nothing (a validation, a probe). */
  saves: boolean;
}
