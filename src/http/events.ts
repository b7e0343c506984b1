// In charge of GET /events: a server-sent-events feed of runs. Each stream sees the runs its caller
// may see (the admin key all, a scoped key its own), resumes after Last-Event-ID from the event log,
// gets a keep-alive comment every 15 s, and is dropped when it reads too slowly rather than buffered
// without bound. The number of streams is capped (QUERYAPIGATE_EVENTS_MAX_STREAMS).
import type { EventRow } from '../contract/messages.js';
import type { StreamOut, StreamStart } from './respond.js';
import { logger } from '../log.js';

const KEEPALIVE_MS = 15_000;
/** A stream whose socket holds more than this unsent is a slow reader and is closed. */
const MAX_BUFFERED = 1 << 20;
const REPLAY_PAGE = 1000;

interface Subscriber {
  out: StreamOut;
  /** null: every run; else only runs by this key. */
  key: string | null;
  /** The newest event id sent. */
  lastId: number;
  /** Live events held back while a replay reads the log; null once live. */
  pending: EventRow[] | null;
}

export function eventPayload(e: EventRow): string {
  const { id, query, version, connection_name, kind: _kind, ...entry } = e;
  const payload =
    query === null ? { type: 'adhoc_execution', connection_name, entry } : { type: 'execution', filename: query, version, connection_name, entry };
  return `id: ${id}\ndata: ${JSON.stringify(payload)}\n\n`;
}

export class EventHub {
  #subs = new Set<Subscriber>();
  #timer: NodeJS.Timeout;
  dropped = 0;

  /** `onFollowers` is told the number of streams whenever it changes (the recorder hands over events only while there are any). */
  constructor(
    readonly read: (after: number, limit: number) => Promise<EventRow[]>,
    readonly onFollowers: (streams: number) => void = () => undefined,
  ) {
    this.#timer = setInterval(() => {
      for (const s of this.#subs) this.#send(s, ': keepalive\n\n');
    }, KEEPALIVE_MS);
    this.#timer.unref();
  }

  get size(): number {
    return this.#subs.size;
  }

  /** Live events from the recorder, in id order. */
  publish(rows: EventRow[]): void {
    for (const s of this.#subs) {
      if (s.pending) {
        for (const e of rows) s.pending.push(e);
        if (s.pending.length > 100_000) this.#drop(s);
        continue;
      }
      this.#deliver(s, rows);
    }
  }

  /** A new stream: replays what came after `after` (when given), then joins the live feed. */
  open(key: string | null, after: number | null): StreamStart {
    return {
      status: 200,
      headers: ['Content-Type', 'text/event-stream', 'Cache-Control', 'no-cache', 'X-Accel-Buffering', 'no'],
      key: key ?? 'admin',
      start: (out) => {
        const sub: Subscriber = { out, key, lastId: after ?? 0, pending: after === null ? null : [] };
        this.#subs.add(sub);
        this.onFollowers(this.#subs.size);
        out.onClose(() => {
          this.#subs.delete(sub);
          this.onFollowers(this.#subs.size);
        });
        out.write('retry: 3000\n\n');
        if (after !== null) void this.#replay(sub);
      },
    };
  }

  /** Sends what the log holds after the stream's last id, then the live events held meanwhile. */
  async #replay(sub: Subscriber): Promise<void> {
    try {
      for (;;) {
        const rows = await this.read(sub.lastId, REPLAY_PAGE);
        if (!this.#deliver(sub, rows)) return;
        if (rows.length < REPLAY_PAGE) break;
      }
    } catch (e) {
      logger('events').warn(`replay failed: ${(e as Error).message}`);
      sub.out.abort();
      return;
    }
    // Events are published after they are logged, so what was held back is newer or already sent.
    const held = sub.pending ?? [];
    sub.pending = null;
    this.#deliver(sub, held);
  }

  /** Sends the rows this stream may see that are newer than its last id, in order. */
  #deliver(s: Subscriber, rows: EventRow[]): boolean {
    for (const e of rows) {
      if (e.id <= s.lastId) continue;
      s.lastId = e.id;
      if (s.key !== null && e.key_name !== s.key) continue;
      if (!this.#send(s, eventPayload(e))) return false;
    }
    return true;
  }

  #drop(s: Subscriber): void {
    this.dropped++;
    s.out.abort();
  }

  /** Writes to one stream; a reader too far behind is disconnected. */
  #send(s: Subscriber, text: string): boolean {
    if (s.out.closed) return false;
    if (s.out.buffered() > MAX_BUFFERED) {
      this.#drop(s);
      return false;
    }
    s.out.write(text);
    return true;
  }

  close(): void {
    clearInterval(this.#timer);
    for (const s of this.#subs) s.out.end();
  }
}
