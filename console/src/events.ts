// In charge of the live feed: GET /events read with fetch (EventSource cannot send a header, and the
// key never goes in a URL), parsed by eventsource-parser, reconnected after a drop and resumed from
// the last event id (Last-Event-ID), so no run is missed across a reconnect.
import { createParser } from 'eventsource-parser';
import { session } from './api';

export interface FeedEvent {
  id: number;
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

export type FeedState = 'connecting' | 'live' | 'reconnecting';

/** Follows /events until stopped; `onEvent` gets each run, `onState` the connection's state. */
export function follow(onEvent: (e: FeedEvent) => void, onState: (s: FeedState, detail?: string) => void): () => void {
  let lastId = '';
  let stopped = false;
  let controller: AbortController | null = null;
  let retryMs = 3000;
  const connect = async () => {
    controller = new AbortController();
    onState(lastId ? 'reconnecting' : 'connecting');
    try {
      const headers: Record<string, string> = { 'X-API-Key': session.key(), Accept: 'text/event-stream' };
      if (lastId) headers['Last-Event-ID'] = lastId;
      const res = await fetch('/events', { headers, signal: controller.signal, cache: 'no-store', credentials: 'omit' });
      if (!res.ok || !res.body) {
        const body = await res.json().catch(() => ({}));
        throw new Error(`${res.status} ${body.error ?? res.statusText}`);
      }
      onState('live');
      const parser = createParser({
        onEvent(m) {
          if (m.id) lastId = m.id;
          try {
            onEvent({ id: Number(m.id), ...JSON.parse(m.data) });
          } catch {
            /* not a run */
          }
        },
        onRetry: (ms) => {
          retryMs = ms;
        },
      });
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parser.feed(value);
      }
      if (!stopped) onState('reconnecting', 'The feed closed.');
    } catch (e) {
      if (stopped) return;
      onState('reconnecting', (e as Error).message);
    }
    if (!stopped) setTimeout(connect, retryMs);
  };
  void connect();
  return () => {
    stopped = true;
    controller?.abort();
  };
}
