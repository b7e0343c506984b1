// In charge of the errors every data source gives, worded once: time limit, unreachable database,
// a write refused by a read-only session, any other failure, and passwords kept out of details.
import { GatewayError } from '../contract/errors.js';

export function timeoutError(ms: number): GatewayError {
  const seconds = ms / 1000;
  return new GatewayError('query_timeout', `The query exceeded the time limit of ${seconds} seconds and was cancelled`, { timeout: seconds });
}

export function connectionFailed(detail: string): GatewayError {
  return new GatewayError('connection_failed', 'Could not connect to the database', { detail });
}

/** A write the database refused because the session is read-only. */
export function readOnlyRefused(detail: string): GatewayError {
  return new GatewayError('read_only', 'The database refused a write: the statement ran in a read-only session', { detail });
}

/** A connection already running its most exports at once. */
export function tooManyStreams(max: number): GatewayError {
  return new GatewayError('unavailable', 'Too many exports are running on this connection; try again later', {
    detail: `at most ${max} streams at once`,
  });
}

/** A limit in whole ms (0 = none); fractions round up so a tiny limit never becomes "none". */
export function toMs(timeoutMs: number): number {
  return timeoutMs > 0 ? Math.max(1, Math.ceil(timeoutMs)) : 0;
}

/**
 * A bound value the database could not read as the type it gave that parameter (PostgreSQL infers
 * `$1` in `id > $1` as integer, so 0.5 fails there): the caller's value, so a 400, keyed by the
 * parameter's position (`$1`) until the call stage names it.
 */
export function parameterRejected(position: number, type: string, detail: string): GatewayError {
  return new GatewayError('param_invalid', `Invalid parameters: $${position} is not a valid ${type} (the type the database reads it as)`, {
    errors: { [`$${position}`]: `is not a valid ${type} (the type the database reads it as)` },
    detail,
  });
}

/**
 * A statement the call bound values to, refused for a pattern or a row count the database could not use (a LIKE pattern
 * ending in its escape character, a regular expression that does not compile, a negative LIMIT): errors of an operand a
 * caller supplies, so a 400 the caller can act on rather than a 500 that looks like an outage. Other data exceptions
 * (a division by zero, a cast of a table's text) may as well come from the data and stay query_failed. The database's
 * words stay in `detail`, for those who may see it.
 */
export function valueRejected(detail: string): GatewayError {
  return new GatewayError('value_rejected', 'The database could not use a value of this call as a pattern or a row count: check the parameters', { detail });
}

export function queryFailed(detail: string): GatewayError {
  return new GatewayError('query_failed', 'An error occurred while executing the SQL query', { detail });
}

export function redact(message: string, password: string): string {
  return password && message.includes(password) ? message.split(password).join('***') : message;
}
