// In charge of one data source's circuit breaker: once a call could not connect, the database is
// known down and calls fail at once with connection_failed instead of each waiting for a connect,
// except one call per retry interval, which tries (the probe). The first call that reaches the
// database closes it again. Imports only the contract's errors.
import { GatewayError } from '../contract/errors.js';
import { logger } from '../log.js';

/** How often a source known down is tried again; also the longest a return goes unnoticed under load. */
export const RETRY_INTERVAL_MS = 500;

export interface Breaker {
  /** Lets a call through, or throws connection_failed while the database is known down and no probe is due. */
  admit(): void;
  /** A call reached the database (it answered, with rows or with an error of its own). */
  reached(): void;
  /** A call could not connect (refused, timed out, no such host, the server not accepting sessions). */
  unreachable(detail: string): void;
}

/** `name` is the connection's, for the two log lines an outage makes (down, and back). */
export function createBreaker(name: string, intervalMs = RETRY_INTERVAL_MS, now: () => number = performance.now.bind(performance)): Breaker {
  let down = false;
  let nextProbe = 0;
  let detail = '';
  return {
    admit() {
      if (!down) return;
      const t = now();
      if (t >= nextProbe) {
        nextProbe = t + intervalMs; // this call is the probe; the next one is due an interval later
        return;
      }
      throw new GatewayError('connection_failed', 'Could not connect to the database', {
        detail: `${detail} (the database did not answer moments ago; tried again every ${intervalMs} ms)`,
      });
    },
    reached() {
      if (!down) return;
      down = false;
      logger('sources').info(`connection '${name}': the database answers again`);
    },
    unreachable(why) {
      detail = why;
      if (down) return;
      down = true;
      nextProbe = now() + intervalMs;
      logger('sources').warn(`connection '${name}': cannot connect (${why}); calls fail at once, the database is tried every ${intervalMs} ms`);
    },
  };
}
