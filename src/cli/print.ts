// In charge of how commands print data: aligned tables and "field: value" lines for people, one JSON
// document for scripts (--json).

export function printJson(out: (line: string) => void, value: unknown): void {
  out(JSON.stringify(value, null, 2));
}

/** Columns padded to their widest cell; an empty list prints `empty` instead. */
export function printTable(out: (line: string) => void, headers: string[], rows: string[][], empty: string): void {
  if (!rows.length) {
    out(empty);
    return;
  }
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]))).join('  ');
  out(line(headers));
  for (const r of rows) out(line(r));
}

/** One "field: value" line each, values as text (lists comma-joined, objects as JSON, null as '-'). */
export function printFields(out: (line: string) => void, value: Record<string, unknown>): void {
  const width = Math.max(...Object.keys(value).map((k) => k.length)) + 2;
  for (const [k, v] of Object.entries(value)) out(`${`${k}:`.padEnd(width)}${cell(v)}`);
}

export function cell(v: unknown): string {
  if (v === null || v === undefined) return '-';
  if (Array.isArray(v)) return v.length ? v.map((x) => (typeof x === 'object' ? JSON.stringify(x) : String(x))).join(', ') : '(none)';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}
