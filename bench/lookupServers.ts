// The servers the fixed-rate and delayed-database benches load with the pgbench lookup
// (`GET /q/account?aid=N` on qag_oltp_bench): the hand-written floor (bench/floor.ts, not a product), or
// the gateway on a fresh PostgreSQL store database (its event log empty), reached at a given
// PostgreSQL address (the server itself, or bench/delayproxy in front of it), with its recorder's counters.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type postgres from 'postgres';
import { accountLookup, freshDatabase, spawnListening, startGateway, type Listening } from './gateway.js';

const FLOOR = fileURLToPath(new URL('./floor.js', import.meta.url));
export const BENCH_DB = 'qag_oltp_bench';
/** Random aids as bench/oltp.ts draws them at scale 10: 1 to 999,999, each length equally likely. */
export const AID = '[1-9][0-9]{0,5}';

/** The recorder's counters by outcome, and the lookups the gateway ran (queryapigate_queries_total). */
export type Runs = { recorded: number; dropped: number; failed: number; executed: number };

export interface LookupServer extends Listening {
  /** The URL pattern for the load generators, and the headers to send. */
  pattern: string;
  headers: Record<string, string>;
  /** The gateway's run counters; none for the floor. */
  runs?: () => Promise<Runs>;
}

/**
 * `nodeArgs` and `env` start the server's node with these flags and variables too (a probe, a variant's settings);
 * `main` runs another build of the gateway (its dist/src/main.js).
 */
type Extras = { nodeArgs?: string[]; env?: Record<string, string>; main?: string };
export type LookupSpec = ({ kind: 'floor' } | { kind: 'gateway'; workers: 0 | 1; metadataCacheTtl: number; storeDb: string; admin: postgres.Sql }) & Extras;

/** Starts the server, with the lookup's database (and a gateway's store) at `pg` (postgres://user@host:port). */
export async function startLookupServer(spec: LookupSpec, pg: string): Promise<LookupServer> {
  if (spec.kind === 'floor') {
    const f = await spawnListening([...(spec.nodeArgs ?? []), FLOOR, `${pg}/${BENCH_DB}`, '8'], spec.env);
    return { ...f, pattern: `${f.url}/q/account\\?aid=${AID}`, headers: {} };
  }
  await freshDatabase(spec.admin, spec.storeDb);
  const home = mkdtempSync(join(tmpdir(), 'qag-lookup-'));
  const g = await startGateway(
    {
      QUERYAPIGATE_HOME: home,
      QUERYAPIGATE_DATABASE_URL: `${pg}/${spec.storeDb}`,
      QUERYAPIGATE_WORKERS: String(spec.workers),
      QUERYAPIGATE_METADATA_CACHE_TTL: String(spec.metadataCacheTtl),
      ...spec.env,
    },
    undefined,
    spec.nodeArgs,
    spec.main,
  );
  try {
    const { key } = await accountLookup(g, `${pg}/${BENCH_DB}`);
    return {
      ...g,
      pattern: `${g.url}/q/account\\?aid=${AID}`,
      headers: { 'X-API-Key': key },
      runs: async () => {
        const text = await (await fetch(`${g.url}/metrics`)).text();
        const count = (outcome: string) => Number(new RegExp(`queryapigate_history_runs_total\\{outcome="${outcome}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
        let executed = 0;
        for (const m of text.matchAll(/^queryapigate_queries_total\{[^}]*connection="oltp"[^}]*\} (\d+)$/gm)) executed += Number(m[1]);
        return { recorded: count('recorded'), dropped: count('dropped'), failed: count('failed'), executed };
      },
      async stop() {
        await g.stop();
        rmSync(home, { recursive: true, force: true });
      },
    };
  } catch (e) {
    await g.stop();
    rmSync(home, { recursive: true, force: true });
    throw e;
  }
}

/** One call for aid 7: a setup mistake fails loudly here, not as non-2xx counts under load. */
export async function smokeLookup(s: LookupServer, what: string): Promise<void> {
  const res = await fetch(s.pattern.replace(/\\\?aid=.*$/, '?aid=7'), { headers: s.headers });
  const body = await res.text();
  if (res.status !== 200 || !/"aid"\s*:\s*7\b/.test(body)) throw new Error(`smoke ${what}: ${res.status} ${body.slice(0, 300)}`);
}
