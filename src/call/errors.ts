// In charge of the contract's error codes: each code's HTTP status, defined once, and the one error
// class every stage throws. Imports nothing from the rest of the project.

export const ERROR_STATUS = {
  invalid_request: 400,
  invalid_body: 400,
  unknown_field: 400,
  invalid_name: 400,
  invalid_paging: 400,
  invalid_format: 400,
  invalid_timeout: 400,
  invalid_stream: 400,
  invalid_filter: 400,
  sql_required: 400,
  connection_required: 400,
  multiple_statements: 400,
  param_required: 400,
  param_invalid: 400,
  reason_required: 400,
  unsupported_database: 400,
  connection_misconfigured: 400,
  unauthorized: 401,
  admin_only: 403,
  forbidden: 403,
  connection_forbidden: 403,
  connection_inactive: 403,
  read_only: 403,
  write_op_not_allowed: 403,
  table_not_allowed: 403,
  table_check_failed: 403,
  mask_unresolvable: 403,
  not_found: 404,
  query_not_found: 404,
  version_not_found: 404,
  not_published: 404,
  connection_not_found: 404,
  key_not_found: 404,
  method_not_allowed: 405,
  query_exists: 409,
  connection_exists: 409,
  key_exists: 409,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  internal_error: 500,
  query_failed: 500,
  connection_failed: 502,
  unavailable: 503,
  too_many_streams: 503,
  query_timeout: 504,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** Optional fields an error body may carry besides error, code and request_id. */
export interface ErrorExtras {
  /** Output columns that cannot be traced (mask_unresolvable). */
  column?: string;
  errors?: Record<string, string>;
  detail?: string;
  timeout?: number;
  retry_after?: number;
}

/** The one error type stages throw; `runCall` and the HTTP layer turn it into a body. */
export class CallError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly extras: ErrorExtras | undefined;
  constructor(code: ErrorCode, message: string, extras?: ErrorExtras) {
    super(message);
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.extras = extras;
  }
}

/** The error body: {"error", "code", ...extras, "request_id"}. */
export function errorBody(code: ErrorCode, message: string, requestId: string, extras?: ErrorExtras): string {
  const body: Record<string, unknown> = { error: message, code };
  if (extras) Object.assign(body, extras);
  body.request_id = requestId;
  return JSON.stringify(body);
}

/** An error as an answer: the code's own status, the error body, and a header list of its own (callers add to it). */
export function errorAnswer(code: ErrorCode, message: string, requestId: string, extras?: ErrorExtras): { status: number; headers: string[]; body: string } {
  return { status: ERROR_STATUS[code], headers: ['Content-Type', 'application/json'], body: errorBody(code, message, requestId, extras) };
}
