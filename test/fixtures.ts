// Store rows for unit tests, written once: a key row with every field at its default, so each test
// names only the fields it is about.
import type { KeyRow } from '../src/store/types.js';

/** A usable key granting nothing, with `fields` over it. */
export function keyRow(fields: Partial<KeyRow> = {}): KeyRow {
  return {
    name: 'k',
    hash: 'h',
    active: true,
    expires_at: null,
    example: false,
    created_at: '',
    updated_at: '',
    last_used_at: null,
    connections: [],
    queries: [],
    allow_writes: false,
    allowed_write_ops: null,
    allowed_tables: null,
    mask: null,
    rate_limit: null,
    rate_limits: null,
    allowed_ips: null,
    previous_until: null,
    via_previous: false,
    ...fields,
  };
}
