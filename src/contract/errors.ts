// The ground floor's error table: every error code the gateway answers with, grouped by the stage
// that raises it (as PostgREST's Error.hs groups its errors), each with its HTTP status. Stages and
// libraries below the edge raise a GatewayError naming a code; only the edge reads the status.
// Imports nothing from the rest of the project.

export const ERRORS = {
  /** Reading the request: its shape, before anything is looked up. */
  request: {
    invalid_request: 400,
    invalid_body: 400,
    unknown_field: 400,
    invalid_name: 400,
    invalid_paging: 400,
    invalid_format: 400,
    invalid_timeout: 400,
    invalid_stream: 400,
    invalid_filter: 400,
    connection_required: 400,
    sql_required: 400,
    reason_required: 400,
    not_found: 404,
    method_not_allowed: 405,
    payload_too_large: 413,
  },
  /** Identifying the caller and counting its limits. */
  identify: {
    unauthorized: 401,
    admin_only: 403,
    role_forbidden: 403,
    rate_limited: 429,
  },
  /** Finding what the request names in the store. */
  resolve: {
    query_not_found: 404,
    version_not_found: 404,
    not_published: 404,
    connection_not_found: 404,
    key_not_found: 404,
    admin_not_found: 404,
    token_not_found: 404,
    role_not_found: 404,
    collection_not_found: 404,
    cache_entry_not_found: 404,
  },
  /** Whether this caller may reach what it named. */
  authorize: {
    query_forbidden: 403,
    connection_forbidden: 403,
    connection_inactive: 403,
    sign_in_required: 403,
    claim_missing: 403,
  },
  /** Binding the caller's values to the statement's parameters. */
  bind: {
    param_required: 400,
    param_invalid: 400,
    param_from_claim: 400,
  },
  /** The statement held against the caller's policy (governance/). */
  govern: {
    multiple_statements: 400,
    read_only: 403,
    write_op_not_allowed: 403,
    table_not_allowed: 403,
    table_check_failed: 403,
    mask_unresolvable: 403,
    mask_predicate: 403,
    mask_write: 403,
    forbidden: 403,
  },
  /** Running the statement on a data source (sources/). */
  execute: {
    unsupported_database: 400,
    connection_misconfigured: 400,
    value_rejected: 400,
    query_failed: 500,
    connection_failed: 502,
    query_timeout: 504,
  },
  /** Rendering the rows into the answer's body. */
  shape: {
    answer_too_large: 400,
    /** A stream's reader took nothing for QUERYAPIGATE_STALL_TIMEOUT: after the first byte, so only history says it. */
    stream_stalled: 408,
  },
  /** Management writes: what is saved must hold (its SQL, its parameters, the names it refers to). */
  manage: {
    invalid_sql: 400,
    param_undeclared: 400,
    param_unused: 400,
    unknown_grant: 400,
    query_exists: 409,
    connection_exists: 409,
    key_exists: 409,
    admin_exists: 409,
    name_taken: 409,
    last_owner: 409,
    precondition_failed: 412,
    role_exists: 409,
    collection_exists: 409,
    examples_conflict: 409,
  },
  /** The server itself. */
  server: {
    internal_error: 500,
    unavailable: 503,
    too_many_streams: 503,
  },
} as const;

type Groups = typeof ERRORS;
export type ErrorStage = keyof Groups;
export type ErrorCode = { [S in ErrorStage]: keyof Groups[S] }[ErrorStage];

/** One flat code → status table, built once from the groups. */
const STATUS: Readonly<Record<ErrorCode, number>> = Object.freeze(Object.assign({}, ...Object.values(ERRORS)));

/** The HTTP status the edge answers a code with. */
export function statusOf(code: ErrorCode): number {
  return STATUS[code];
}

/** The codes one stage raises, for that stage's narrower types. */
export type CodeOf<S extends ErrorStage> = keyof Groups[S] & ErrorCode;

/** Optional fields an error body may carry besides error, code and request_id. */
export interface ErrorExtras {
  /** Output columns that cannot be traced (mask_unresolvable). */
  column?: string;
  errors?: Record<string, string>;
  detail?: string;
  timeout?: number;
  retry_after?: number;
  /** role_forbidden: the capability the route needs, and the caller's role. */
  capability?: string;
  role?: string;
}

/** Thrown by a rule that needs the address of a call that crossed without it (ADDRESS_UNREAD); not a failure. */
export class AddressNeeded extends Error {}

/** The one error type every layer throws: a code of the table, a message for the caller, extras. */
export class GatewayError extends Error {
  readonly code: ErrorCode;
  readonly extras: ErrorExtras | undefined;
  constructor(code: ErrorCode, message: string, extras?: ErrorExtras) {
    super(message);
    this.code = code;
    this.extras = extras;
  }
}
