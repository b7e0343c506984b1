// In charge of answering one management request once its route is matched, the same way for the
// acceptor and the command line: the caller's access (api/access.ts), If-Match against the object's
// current state (412 precondition_failed), the handler, then the audit entry (a diff, or the whole
// object for a create or a delete) and the ETag of the object as it now is. Also notes each use of
// the shared admin key while a named owner exists (break-glass), and a token's last use.
import type { Caller } from '../auth/keys.js';
import type { AdminIdentity } from '../auth/roles.js';
import { GatewayError } from '../contract/errors.js';
import { type Answer, bodyText, type Request } from '../contract/exchange.js';
import { logger } from '../log.js';
import { localTimestamp } from '../store/store.js';
import { checkAccess } from './access.js';
import { auditSpec, bodyChanges, readResource, writeAudit } from './audited.js';
import type { ControlContext, MatchedRoute } from './routes.js';
import { diff, etagOf, ifMatchHolds, SNAPSHOTS, type Snapshot, snapshotChanges } from './snapshots.js';

/** At most one break_glass_used entry per process in this long (contract 2.1). */
const BREAK_GLASS_EVERY_MS = 10 * 60_000;
/** How long "an active owner exists" is believed (any change to administrators here forgets it). */
const OWNER_CHECK_MS = 30_000;
/** A token's last_used_at (and its administrator's last_seen_at) is written at most this often. */
const TOKEN_TOUCH_MS = 60_000;

interface ProcessState {
  ownerKnown: { at: number; exists: boolean } | null;
  breakGlassAt: number;
  touched: Map<string, number>;
  /** Writes to one object, one at a time in this process, so an If-Match is checked against what the write replaces. */
  writing: Map<string, Promise<unknown>>;
}

const STATES = new WeakMap<object, ProcessState>();
function stateOf(ctx: ControlContext): ProcessState {
  let s = STATES.get(ctx.store);
  if (!s) {
    s = { ownerKnown: null, breakGlassAt: -Infinity, touched: new Map(), writing: new Map() };
    STATES.set(ctx.store, s);
  }
  return s;
}

/** What an administrator's request leaves on any acceptor route (/api/v1, /events): break-glass notes, a token's last use. */
export async function noteAdminUse(ctx: ControlContext, admin: AdminIdentity, req: Request): Promise<void> {
  const state = stateOf(ctx);
  if (admin.via === 'break-glass') await noteBreakGlass(ctx, state, admin, req);
  if (admin.tokenId) touchToken(ctx, state, admin);
}

export async function handleApi(ctx: ControlContext, req: Request, who: Caller | null, route: MatchedRoute): Promise<Answer> {
  const admin = checkAccess(who, route.access, route.params);
  const caller = who as Caller;
  const state = stateOf(ctx);
  await noteAdminUse(ctx, admin, req);
  if (route.method === 'GET' || !route.saves) return withReadTag(ctx, req, route, await route.handler(ctx, req, route.params, caller));

  const spec = auditSpec(route.method, route.pattern);
  const ids = spec.create ? null : spec.ids(route.params, null);
  const slot = spec.resource && ids ? `${spec.resource}:${ids.join('\u0000')}` : null;
  const run = async (): Promise<Answer> => {
    const before = spec.resource && ids ? await SNAPSHOTS[spec.resource](ctx.store, ids) : null;
    const ifMatch = req.headers?.['if-match'];
    if (ifMatch && before && !ifMatchHolds(ifMatch, before)) {
      throw new GatewayError('precondition_failed', 'The object changed since it was read (If-Match is stale); read it again, then retry');
    }
    const answer = await route.handler(ctx, req, route.params, caller);
    if (answer.status >= 400) return answer;
    if (route.pattern.startsWith('/api/v1/administrators')) state.ownerKnown = null;
    let after: Snapshot | null = null;
    let target: string | null = ids?.join('/') ?? null;
    let changes: Record<string, unknown>;
    if (spec.resource) {
      const answered = jsonOf(answer);
      const afterIds = spec.create ? spec.ids(route.params, answered) : (ids as string[]);
      target = afterIds.join('/');
      after = await SNAPSHOTS[spec.resource](ctx.store, afterIds);
      changes = before && after ? diff(before, after) : after ? snapshotChanges(after) : before ? snapshotChanges(before) : {};
    } else {
      target = route.params.join('/') || null;
      changes = bodyChanges(jsonBody(req));
    }
    await writeAudit(ctx, admin, spec.action, target, changes);
    if (after && spec.resource !== 'token') answer.headers = answer.headers.concat('ETag', etagOf(after));
    return answer;
  };
  if (!slot) return run();
  // One write per object at a time here: the next waits for the one before it, whatever its outcome.
  const prior = state.writing.get(slot) ?? Promise.resolve();
  const mine = prior.then(run, run);
  const settled = mine.catch(() => undefined);
  state.writing.set(slot, settled);
  settled.then(() => {
    if (state.writing.get(slot) === settled) state.writing.delete(slot);
  });
  return mine;
}

/** A single object's GET carries its ETag. */
async function withReadTag(ctx: ControlContext, _req: Request, route: MatchedRoute, answer: Answer): Promise<Answer> {
  const resource = readResource(route.method, route.pattern);
  if (!resource || answer.status !== 200) return answer;
  const snap = await SNAPSHOTS[resource](ctx.store, route.params.slice(0, 1));
  return snap ? { ...answer, headers: answer.headers.concat('ETag', etagOf(snap)) } : answer;
}

/**
 * The shared admin key used while an active named owner exists: a warning in the log each time, an
 * audit entry at most every 10 minutes per process.
 */
async function noteBreakGlass(ctx: ControlContext, state: ProcessState, admin: AdminIdentity, req: Request): Promise<void> {
  const now = Date.now();
  if (!state.ownerKnown || now - state.ownerKnown.at > OWNER_CHECK_MS) {
    state.ownerKnown = { at: now, exists: (await ctx.store.admins.activeOwners()) > 0 };
  }
  if (!state.ownerKnown.exists) return;
  logger('audit').warn(
    { request_id: req.requestId, key: 'admin' },
    `the shared admin key (break-glass) was used while a named owner exists: ${req.method} ${req.url}`,
  );
  if (now - state.breakGlassAt < BREAK_GLASS_EVERY_MS) return;
  state.breakGlassAt = now;
  await writeAudit(ctx, admin, 'break_glass_used', null, { request: `${req.method} ${req.url}`, request_id: req.requestId });
}

function touchToken(ctx: ControlContext, state: ProcessState, admin: AdminIdentity): void {
  const id = admin.tokenId as string;
  const now = Date.now();
  if (now - (state.touched.get(id) ?? -Infinity) < TOKEN_TOUCH_MS) return;
  state.touched.set(id, now);
  if (state.touched.size > 10_000) state.touched.clear(); // bounded; a forgotten token is only touched again
  ctx.store.admins
    .touch(id, admin.name as string, localTimestamp())
    .catch((e: Error) => logger('audit').warn(`a token's last use could not be written: ${e.message}`));
}

function jsonOf(a: Answer): Record<string, unknown> | null {
  try {
    const text = bodyText(a);
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}

function jsonBody(req: Request): Record<string, unknown> {
  if (!req.body?.length) return {};
  try {
    const v = JSON.parse(Buffer.from(req.body).toString('utf8'));
    return v && typeof v === 'object' && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}
