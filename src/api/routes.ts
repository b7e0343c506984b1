// In charge of the management API's routing and its one rule: administrators only (the admin key,
// or open mode while no admin key and no scoped key exist). Compiled once, before listen.
import { identify, type KeyLookup } from '../auth/identify.js';
import type { JwtAuth } from '../auth/jwt.js';
import type { Config } from '../config.js';
import { GatewayError } from '../contract/errors.js';
import type { Answer, Request } from '../contract/exchange.js';
import type { ChangeMessage } from '../contract/messages.js';
import type { EventLog } from '../store/events.js';
import type { Store } from '../store/store.js';

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
}

export type ApiHandler = (ctx: ControlContext, req: Request, params: string[]) => Promise<Answer> | Answer;

/** What a successful write tells the executors; by default that metadata changed (every cache cleared). */
export type ChangeOf = (params: string[]) => ChangeMessage;
const METADATA_CHANGED: ChangeOf = () => ({ kind: 'metadata' });
/** A route's change for a POST that saves nothing (a validation): no executor has anything to forget. */
export const NOTHING_CHANGED = null;

interface Route {
  method: string;
  parts: string[];
  handler: ApiHandler;
  /** null: the route saves nothing. */
  change: ChangeOf | null;
}

export class ApiRouter {
  #routes: Route[] = [];
  #locked = false;

  add(method: string, pattern: string, handler: ApiHandler, change: ChangeOf | typeof NOTHING_CHANGED = METADATA_CHANGED): this {
    if (this.#locked) throw new Error(`route ${method} ${pattern} added after the router was locked`);
    this.#routes.push({ method, parts: pattern.split('/').filter(Boolean), handler, change });
    return this;
  }

  lock(): this {
    this.#locked = true;
    return this;
  }

  /**
   * The handler and its path parameters, the change a success publishes (`saves` false: none); 405
   * when the path exists for other methods; null when none.
   */
  match(method: string, url: string): { handler: ApiHandler; params: string[]; change: ChangeOf; saves: boolean } | 'method_not_allowed' | null {
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
      if (r.method === method) return { handler: r.handler, params, change: r.change ?? METADATA_CHANGED, saves: r.change !== null };
      pathMatched = true;
    }
    return pathMatched ? 'method_not_allowed' : null;
  }
}

/** 401 without a valid credential, 403 admin_only for a scoped key. */
export async function requireAdmin(ctx: ControlContext, req: Request): Promise<void> {
  const who = await identify(ctx.keys, ctx.adminKey, req.apiKey, req.ip, ctx.jwt ?? null, req.authorization);
  if (who && who.kind !== 'key') return;
  if (who) throw new GatewayError('admin_only', 'Only an administrator may do this');
  throw new GatewayError('unauthorized', 'Unauthorized');
}
