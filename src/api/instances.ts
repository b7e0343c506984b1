// In charge of GET /api/v1/instances (contract 3.8): the processes using this store, seen by their
// heartbeats within the window (three beats, 90 s by default), each with `this` for the one
// answering, and the problems a mix of them makes (instances_not_shared, instances_versions_differ).
// Also the heartbeat itself: one row per process, written at start and every
// QUERYAPIGATE_INSTANCES_HEARTBEAT seconds by a timer of the acceptor, never on a call's path.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Config } from '../config.js';
import { jsonAnswer } from '../contract/exchange.js';
import { packageVersion } from '../contract/version.js';
import { logger } from '../log.js';
import type { InstanceRole, InstanceRow } from '../store/instances.js';
import { localTimestamp, type Store } from '../store/store.js';
import { type ApiRouter, type ControlContext, NOTHING_CHANGED } from './routes.js';

/** Beats an instance may miss before it is no longer listed. */
const MISSED_BEATS = 3;

export interface InstanceProblem {
  kind: 'instances_not_shared' | 'instances_versions_differ';
  message: string;
  /** What to change (the alerts' target); not in the instances answer. */
  setting: string;
}

export interface Heartbeat {
  /** This process's row id. */
  readonly id: string;
  /** Stops beating and removes the row (a process that dies drops out after the window instead). */
  stop(): Promise<void>;
}

/** Writes this process's row now and then every heartbeat; resolves after the first write (or its failure). */
export async function startHeartbeat(store: Store, config: Config, role: InstanceRole): Promise<Heartbeat> {
  const row: InstanceRow = {
    id: randomUUID(),
    host: hostname(),
    pid: process.pid,
    role,
    version: packageVersion(),
    shared_limits: config.redisUrl !== null,
    started_at: localTimestamp(),
    last_seen_ms: Date.now(),
  };
  let failing = false;
  const beat = () =>
    store.instances.beat({ ...row, last_seen_ms: Date.now() }).then(
      () => {
        if (failing) logger('serve').info('the heartbeat is written again (GET /api/v1/instances)');
        failing = false;
      },
      (e: Error) => {
        if (!failing) logger('serve').warn(`the heartbeat could not be written: ${e.message}; other instances may not list this one`);
        failing = true;
      },
    );
  await beat();
  const timer = setInterval(beat, config.instancesHeartbeat * 1000);
  timer.unref();
  return {
    id: row.id,
    async stop() {
      clearInterval(timer);
      await store.instances.remove(row.id).catch(() => undefined);
    },
  };
}

/** How long an instance stays listed after its last heartbeat. */
export function instanceWindowMs(config: Config): number {
  return MISSED_BEATS * config.instancesHeartbeat * 1000;
}

/** The instances seen within the window, oldest first. */
export function liveInstances(ctx: Pick<ControlContext, 'store' | 'config'>): Promise<InstanceRow[]> {
  return ctx.store.instances.seenSince(Date.now() - instanceWindowMs(ctx.config));
}

/** What several instances on one store get wrong together (nothing for one instance). */
export function instanceProblems(items: InstanceRow[], storeKind: 'sqlite' | 'postgres'): InstanceProblem[] {
  if (items.length < 2) return [];
  const problems: InstanceProblem[] = [];
  if (storeKind === 'sqlite') {
    problems.push({
      kind: 'instances_not_shared',
      setting: 'QUERYAPIGATE_DATABASE_URL',
      message: `${items.length} instances use one SQLite store, a file on one host: instances on other hosts cannot share it; set QUERYAPIGATE_DATABASE_URL (PostgreSQL) for several instances`,
    });
  }
  const unshared = items.filter((i) => !i.shared_limits);
  if (unshared.length) {
    problems.push({
      kind: 'instances_not_shared',
      setting: 'QUERYAPIGATE_REDIS_URL',
      message: `rate limits are counted per instance on ${unshared.map((i) => `${i.host}:${i.pid}`).join(', ')} (no QUERYAPIGATE_REDIS_URL), so a limit allows up to ${items.length} times its rate; set QUERYAPIGATE_REDIS_URL on every instance`,
    });
  }
  const versions = new Map<string, number>();
  for (const i of items) versions.set(i.version, (versions.get(i.version) ?? 0) + 1);
  if (versions.size > 1) {
    problems.push({
      kind: 'instances_versions_differ',
      setting: 'version',
      message: `the instances run different versions: ${[...versions].map(([v, n]) => `${v} (${n})`).join(', ')}`,
    });
  }
  return problems;
}

export function instanceRoutes(r: ApiRouter): void {
  r.add(
    'GET',
    '/api/v1/instances',
    async (ctx) => {
      const items = await liveInstances(ctx);
      return jsonAnswer(200, {
        items: items.map((i) => ({
          id: i.id,
          host: i.host,
          pid: i.pid,
          role: i.role,
          version: i.version,
          shared_limits: i.shared_limits,
          started_at: i.started_at,
          last_seen: localTimestamp(new Date(i.last_seen_ms)),
          this: i.id === ctx.instanceId,
        })),
        problems: instanceProblems(items, ctx.store.db.dialect).map(({ kind, message }) => ({ kind, message })),
      });
    },
    NOTHING_CHANGED,
  );
}
