// In charge of GET /api/v1/settings: every setting in its group, the value the server runs with, and
// where it came from (the environment or the default). A secret shows only as "configured", and the
// text it was given is never returned.
import { type Config, SETTING_GROUPS, settingList, settingsRead } from '../config.js';
import { jsonAnswer } from '../contract/exchange.js';
import { type ApiRouter, NOTHING_CHANGED } from './routes.js';

export interface SettingRow {
  label: string;
  description: string;
  env: string;
  type: string;
  /** The default as text; null: unset by default. */
  default: string | null;
  /** What the server runs with; a secret's is "configured" (or null when unset). */
  value: unknown;
  source: 'env' | 'default';
  /** The variable's text as given; always null for a secret. */
  env_value: string | null;
  experimental: boolean;
}

/** 'HISTORY_FLUSH_INTERVAL' -> 'History flush interval'. */
const labelOf = (name: string) => name.charAt(0) + name.slice(1).toLowerCase().replaceAll('_', ' ');

export function settingsReport(config: Config) {
  const reads = settingsRead(config);
  const rows = settingList().map((s) => {
    const read = reads[s.name] ?? { value: null, given: null };
    const row: SettingRow = {
      label: labelOf(s.name),
      description: s.description,
      env: s.env,
      type: s.type,
      default: s.defaultText ?? s.default,
      value: s.secret ? (read.value === null ? null : 'configured') : read.value,
      source: read.given === null ? 'default' : 'env',
      env_value: s.secret ? null : read.given,
      experimental: false,
    };
    return { group: s.group, row };
  });
  return {
    items: SETTING_GROUPS.map((g) => ({ ...g, rows: rows.filter((r) => r.group === g.id).map((r) => r.row) })),
  };
}

export function settingsRoutes(r: ApiRouter): void {
  r.add('GET', '/api/v1/settings', (ctx) => jsonAnswer(200, settingsReport(ctx.config)), NOTHING_CHANGED);
}
