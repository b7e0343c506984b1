// In charge of the store's row shapes: what the control plane writes (validated there) and what
// executors read (trusted). Imports only the contract (a run crosses threads).
import type { RunRecord } from '../contract/messages.js';

export interface ConnectionRow {
  name: string;
  db: string;
  active: boolean;
  host: string | null;
  port: number | null;
  database: string | null;
  user: string | null;
  password: string | null;
  options: Record<string, unknown> | null;
  example: boolean;
  created_at: string;
  updated_at: string;
}

export interface VersionFields {
  sql: string;
  connection_name: string | null;
  /** Normalized parameter rules (see call/params.ts), keyed by name. */
  parameters: Record<string, unknown>;
  description: string;
  author: string | null;
  tags: string[];
  cache_ttl: number | null;
}

export interface VersionRow extends VersionFields {
  version: number;
  uuid: string;
  /** True once this version has been published; a never-published version is a draft. */
  was_published: boolean;
  created_at: string;
  last_modified_at: string;
}

export interface QueryRow {
  name: string;
  collection: string | null;
  example: boolean;
  published_version: number | null;
  created_at: string;
  updated_at: string;
  /** Ascending by version. */
  versions: VersionRow[];
}

export type QueryGrant = string | { name: string; allow_writes: boolean };

export interface KeyGrants {
  connections: '*' | string[];
  queries: '*' | QueryGrant[];
  /** Every query currently in these collections, read-only: the grant is live (absent in rows older than roles: none). */
  collections?: string[];
  allow_writes: boolean;
  allowed_write_ops: string[] | null;
  allowed_tables: string[] | null;
  mask: Array<{ column: string; action: string }> | null;
  /** 'refuse': a masked column may not filter, join, group or sort the rows (inference through predicates). Absent: 'allow'. */
  mask_predicates?: 'allow' | 'refuse';
  rate_limit: string | null;
  rate_limits: Record<string, string> | null;
  allowed_ips: string[] | null;
}

export interface KeyRow extends KeyGrants {
  name: string;
  hash: string;
  active: boolean;
  expires_at: string | null;
  example: boolean;
  created_at: string;
  updated_at: string;
  last_used_at: string | null;
  /** After a rotation with grace: the old secret works until this time (epoch ms). */
  previous_until: number | null;
  /** True when the row was found by its previous (rotated-out) secret. */
  via_previous: boolean;
  /** The role whose grants were copied into the key when it was made (informational). */
  created_from_role?: string | null;
}

/** A key role: a template of grants, copied into keys made from it, read live for signed-in users. */
export interface RoleRow extends KeyGrants {
  name: string;
  example: boolean;
  keys_created: number;
  created_at: string;
  updated_at: string;
}

/** One run as the recorder writes it to history. */
export interface HistoryEntry extends RunRecord {
  id: number;
}

export interface HistoryFilter {
  query?: string;
  /** saved: runs of saved queries; adhoc: ad-hoc statements. */
  kind?: 'saved' | 'adhoc';
  version?: number;
  status?: 'success' | 'error';
  key?: string;
  since?: string;
  until?: string;
  /** Return entries with id below this one (the cursor). */
  before?: number;
  limit: number;
}
