// In charge of format=yaml: a list of mappings, keys in column order, through `yaml` (already the
// project's YAML library, for query bundles: YAML 1.2, it quotes whatever would read back as
// another type). The values are the JSON answer's (formats.ts jsonValue): numbers, booleans and
// nulls as YAML scalars, a 64-bit integer past 2^53 and a timestamp as strings, JSON and bytes as text.
import { createRequire } from 'node:module';
import type * as Yaml from 'yaml';
import { CONTENT_TYPES, jsonValue, uniqueColumnNames, type Writer } from '../formats.js';

type Rows = readonly (readonly unknown[])[];

/**
 * `yaml`, required on first use (a yaml answer, a query bundle: cli/bundle.ts): loaded up front it sat in
 * every thread's heap (about 1 MB).
 */
const requireCjs = createRequire(import.meta.url);
let library: typeof Yaml | null = null;
export const yamlLibrary = (): typeof Yaml => (library ??= requireCjs('yaml') as typeof Yaml);

export function compileYamlWriter(columns: readonly string[]): Writer {
  const names = uniqueColumnNames(columns);
  // A Map, not an object, per row: an object would move keys that look like integers ahead of the others.
  const chunk = (rows: Rows): string => {
    if (rows.length === 0) return '';
    const list = new Array<Map<string, unknown>>(rows.length);
    for (let r = 0; r < rows.length; r++) {
      const row = rows[r];
      const item = new Map<string, unknown>();
      for (let c = 0; c < names.length; c++) item.set(names[c], plain(row[c]));
      list[r] = item;
    }
    return yamlLibrary().stringify(list, { lineWidth: 0 });
  };
  return Object.assign(chunk, { format: 'yaml' as const, contentType: CONTENT_TYPES.yaml, head: '', chunk });
}

/** The value the JSON answer holds for `v`, as a JS value. */
function plain(v: unknown): unknown {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return v;
    case 'number':
      return Number.isFinite(v) ? v : null;
    case 'undefined':
      return null;
    default:
      return v === null ? null : JSON.parse(jsonValue(v));
  }
}
