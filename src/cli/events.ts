// In charge of `queryapigate events tail`: a running server's live feed of runs (GET /events) in the
// terminal, one readable line per run or NDJSON. It ends cleanly (exit 0) on Ctrl-C or SIGTERM, and
// with exit 1 and a clear message when the server goes away or stops sending, even its keep-alive.
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { KEY_OPTION, refused, serverTarget, unreachable, URL_OPTION } from './server.js';
import { commandConfig } from './settings.js';
import { type Command, Failure, type Group, JSON_OUTPUT, UsageError } from './tree.js';

/** The server sends a keep-alive every 15 s: this long with nothing at all means it is gone. */
const SILENCE_MS = 45_000;

interface RunEvent {
  type: 'execution' | 'adhoc_execution';
  filename?: string;
  version?: number;
  connection_name: string | null;
  entry: {
    executed_at: string;
    status: string;
    rows: number | null;
    duration_ms: number | null;
    key_name: string | null;
    request_id: string;
    code?: string;
    error?: string;
  };
}

/** One run as a line: when, status, what, where, how many rows, how long, by whom, its request id. */
export function runLine(e: RunEvent): string {
  const r = e.entry;
  const what = e.type === 'execution' ? `${e.filename} v${e.version}` : 'ad-hoc SQL';
  const parts = [
    r.executed_at,
    r.status.padEnd(7),
    what,
    `on ${e.connection_name ?? '-'}`,
    r.rows === null ? '- rows' : `${r.rows} rows`,
    r.duration_ms === null ? '- ms' : `${r.duration_ms} ms`,
    `key ${r.key_name ?? '-'}`,
    `request ${r.request_id}`,
  ];
  if (r.status !== 'success') parts.push(`${r.code ?? 'error'}: ${r.error ?? ''}`.trim());
  return parts.join('  ');
}

const tail: Command = {
  kind: 'command',
  name: 'tail',
  summary: "Follow a running server's runs as they happen (its /events feed)",
  usage: '[options]',
  description: [
    'Talks to a running server (not the store): GET /events, with the key. The admin key sees every run,',
    'a scoped key only its own. One line per run, or --json for one JSON object per line (NDJSON, with the',
    "event's id). Ctrl-C or SIGTERM ends it (exit 0); a server that stops, or sends nothing for 45 s (not",
    'even its 15 s keep-alive), ends it with exit 1. --after ID first replays the runs after that event id.',
  ],
  args: { min: 0, max: 0 },
  options: {
    json: JSON_OUTPUT,
    after: { type: 'string', value: 'ID', help: 'replay the runs after this event id first (from the event log)' },
    url: URL_OPTION,
    key: KEY_OPTION,
  },
  examples: ['queryapigate events tail', 'queryapigate events tail --json --url http://gw:5000 | jq -c .entry'],
  async run(inv) {
    const after = inv.values.after as string | undefined;
    if (after !== undefined && !/^\d+$/.test(after))
      throw new UsageError(`--after takes an event id, a whole number: got '${after}'`, 'queryapigate events tail');
    const config = commandConfig(inv.say);
    const { base, key } = serverTarget(config, inv.values);
    inv.say(`server: ${base} (GET /events, the live feed)${key ? '' : '; no key: neither --key nor QUERYAPIGATE_API_KEY is set'}`);

    const abort = new AbortController();
    let stoppedBy: string | null = null;
    let silent = false;
    const stop = (signal: string) => {
      stoppedBy = signal;
      abort.abort();
    };
    const onInt = () => stop('SIGINT');
    const onTerm = () => stop('SIGTERM');
    process.once('SIGINT', onInt);
    process.once('SIGTERM', onTerm);
    let watchdog: NodeJS.Timeout | undefined;
    const heard = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => {
        silent = true;
        abort.abort();
      }, SILENCE_MS);
    };
    try {
      const headers: Record<string, string> = { Accept: 'text/event-stream' };
      if (key) headers['X-API-Key'] = key;
      if (after !== undefined) headers['Last-Event-ID'] = after;
      heard(); // the wait for the answer is limited too
      let res: Response;
      try {
        res = await fetch(`${base}/events`, { headers, signal: abort.signal });
      } catch (e) {
        if (stoppedBy) return;
        if (silent) throw new Failure(`the server at ${base} did not answer within ${SILENCE_MS / 1000} s`);
        throw unreachable(base, e);
      }
      if (res.status !== 200 || !res.body) throw await refused(res);
      inv.say(`connected; waiting for runs (Ctrl-C stops)`);

      const parser = createParser({
        onEvent(m: EventSourceMessage) {
          let payload: RunEvent;
          try {
            payload = JSON.parse(m.data);
          } catch {
            return; // not a run: nothing of ours to show
          }
          if (inv.values.json) inv.out(JSON.stringify({ id: m.id === undefined ? null : Number(m.id), ...payload }));
          else inv.out(runLine(payload));
        },
      });
      const decoder = new TextDecoder();
      try {
        for await (const chunk of res.body) {
          heard();
          parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }));
        }
      } catch (e) {
        if (stoppedBy) return;
        if (silent) throw new Failure(`the server at ${base} sent nothing for ${SILENCE_MS / 1000} s, not even its keep-alive: it is gone or unreachable`);
        throw new Failure(`lost the server at ${base}: ${(e as Error).message}`);
      }
      if (stoppedBy) return;
      throw new Failure(`the server at ${base} closed the feed (it stopped or restarted)`);
    } finally {
      clearTimeout(watchdog);
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
      if (stoppedBy) inv.say(`stopped (${stoppedBy})`);
    }
  },
};

export const EVENTS: Group = {
  kind: 'group',
  name: 'events',
  summary: "A running server's live feed of runs",
  children: [tail],
  examples: ['queryapigate events tail'],
};
