// In charge of "did you mean": the known name closest to a mistyped one, and a short list of the
// names that exist, for error messages and start-up warnings. Imports nothing of the project.

/** Names shown in a message at most; the rest are counted ("and 12 more"). */
const SHOWN = 20;

/**
 * The candidate closest to `name` (case-insensitive edit distance, a swap of two neighbours
 * counting as one edit), or null when none is close enough to be a plausible typo: at most one
 * edit for names of up to 4 characters, two up to 8, three beyond.
 */
export function closestName(name: string, candidates: Iterable<string>): string | null {
  const wanted = name.toLowerCase();
  const limit = wanted.length <= 4 ? 1 : wanted.length <= 8 ? 2 : 3;
  let best: string | null = null;
  let bestDistance = limit + 1;
  for (const c of candidates) {
    if (c === name) continue;
    const d = editDistance(wanted, c.toLowerCase()); // 0: the same name in another case
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}

/** "'a', 'b' and 'c'" (sorted), "(none)" when empty; long lists end with "and N more". */
export function listNames(names: Iterable<string>): string {
  const all = [...names].sort();
  if (all.length === 0) return '(none)';
  const shown = all.slice(0, SHOWN).map((n) => `'${n}'`);
  if (all.length > SHOWN) return `${shown.join(', ')} and ${all.length - SHOWN} more`;
  if (shown.length === 1) return shown[0];
  return `${shown.slice(0, -1).join(', ')} and ${shown[shown.length - 1]}`;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps. */
function editDistance(a: string, b: string): number {
  if (a === b) return 0;
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    rows.push(new Array<number>(b.length + 1).fill(0));
    rows[i][0] = i;
  }
  for (let j = 0; j <= b.length; j++) rows[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2][j - 2] + 1);
      rows[i][j] = d;
    }
  }
  return rows[a.length][b.length];
}
