// In charge of the errors every data source gives, worded once: time limit, unreachable database,
// a write refused by a read-only session, any other failure, and passwords kept out of details.
import { CallError } from '../call/errors.js';

export function timeoutError(ms: number): CallError {
  const seconds = ms / 1000;
  return new CallError('query_timeout', `The query exceeded the time limit of ${seconds} seconds and was cancelled`, { timeout: seconds });
}

export function connectionFailed(detail: string): CallError {
  return new CallError('connection_failed', 'Could not connect to the database', { detail });
}

export function queryFailed(detail: string): CallError {
  return new CallError('query_failed', 'An error occurred while executing the SQL query', { detail });
}

export function redact(message: string, password: string): string {
  return password && message.includes(password) ? message.split(password).join('***') : message;
}
