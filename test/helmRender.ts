// A tiny renderer for the Helm chart's templates (deploy/helm/queryapigate), since no helm binary can
// be installed here. It knows only what the chart uses, and refuses anything else, so a template that
// needs real Helm fails its test instead of rendering wrongly:
//   {{ .Values.a.b }}  {{ .Release.Name }}  {{ .Chart.Name }}  {{ $var }}  with | quote, | toYaml, | nindent N
//   {{- if PATH }} / {{- if not PATH }} ... {{- end }}     {{- range $k, $v := PATH }} ... {{- end }}
// `{{-` and `-}}` trim the whitespace before and after, as in Go templates; map keys range sorted.
//   node dist/test/helmRender.js --print > deploy/helm/rendered.yaml     (the chart with its default values)
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';

export const CHART = fileURLToPath(new URL('../../deploy/helm/queryapigate/', import.meta.url));
export const RENDERED = fileURLToPath(new URL('../../deploy/helm/rendered.yaml', import.meta.url));

type Node = { text: string } | { expr: string } | { if: string; body: Node[] } | { range: [string, string, string]; body: Node[] };
type Scope = { root: Record<string, unknown>; vars: Record<string, unknown> };

function parseTemplate(source: string, file: string): Node[] {
  const tokens: Array<{ text: string } | { action: string }> = [];
  const re = /\{\{(-?)\s*(.*?)\s*(-?)\}\}/gs;
  let last = 0;
  let trimNext = false;
  for (let m = re.exec(source); m; m = re.exec(source)) {
    let text = source.slice(last, m.index);
    if (trimNext) text = text.replace(/^\s+/, '');
    if (m[1]) text = text.replace(/\s+$/, '');
    tokens.push({ text }, { action: m[2] });
    trimNext = m[3] === '-';
    last = m.index + m[0].length;
  }
  tokens.push({ text: trimNext ? source.slice(last).replace(/^\s+/, '') : source.slice(last) });

  const root: Node[] = [];
  const stack: Node[][] = [root];
  for (const t of tokens) {
    const into = stack[stack.length - 1];
    if ('text' in t) {
      if (t.text) into.push({ text: t.text });
      continue;
    }
    const a = t.action;
    const cond = /^if (.+)$/.exec(a);
    const loop = /^range (\$\w+), (\$\w+) := (\S+)$/.exec(a);
    if (cond) {
      const node = { if: cond[1], body: [] as Node[] };
      into.push(node);
      stack.push(node.body);
    } else if (loop) {
      const node = { range: [loop[1], loop[2], loop[3]] as [string, string, string], body: [] as Node[] };
      into.push(node);
      stack.push(node.body);
    } else if (a === 'end') {
      if (stack.length === 1) throw new Error(`${file}: {{ end }} without a block`);
      stack.pop();
    } else into.push({ expr: a });
  }
  if (stack.length !== 1) throw new Error(`${file}: a block is not closed`);
  return root;
}

function lookup(path: string, scope: Scope): unknown {
  if (path.startsWith('$')) {
    if (!(path in scope.vars)) throw new Error(`unknown variable ${path}`);
    return scope.vars[path];
  }
  if (!/^(\.\w+)+$/.test(path)) throw new Error(`not supported by this renderer: ${path}`);
  let v: unknown = scope.root;
  for (const part of path.slice(1).split('.')) {
    if (v === null || typeof v !== 'object' || !(part in v)) throw new Error(`${path}: no such value`);
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

const truthy = (v: unknown) =>
  !(
    v === false ||
    v === null ||
    v === undefined ||
    v === 0 ||
    v === '' ||
    (Array.isArray(v) && v.length === 0) ||
    (typeof v === 'object' && Object.keys(v as object).length === 0)
  );

function evaluate(expr: string, scope: Scope): string {
  const [head, ...pipes] = expr.split('|').map((s) => s.trim());
  let value: unknown = head.startsWith('toYaml ') ? stringify(lookup(head.slice(7), scope)).trimEnd() : lookup(head, scope);
  for (const p of pipes) {
    const m = /^nindent (\d+)$/.exec(p);
    if (p === 'quote') value = JSON.stringify(String(value));
    else if (m)
      value = `\n${String(value)
        .split('\n')
        .map((l) => ' '.repeat(Number(m[1])) + l)
        .join('\n')}`;
    else throw new Error(`not supported by this renderer: | ${p}`);
  }
  if (value !== null && typeof value === 'object') throw new Error(`${expr}: a map or list needs toYaml`);
  return String(value);
}

function renderNodes(nodes: Node[], scope: Scope): string {
  let out = '';
  for (const n of nodes) {
    if ('text' in n) out += n.text;
    else if ('expr' in n) out += evaluate(n.expr, scope);
    else if ('if' in n) {
      const negated = n.if.startsWith('not ');
      if (truthy(lookup(negated ? n.if.slice(4) : n.if, scope)) !== negated) out += renderNodes(n.body, scope);
    } else {
      const [k, v, path] = n.range;
      const map = lookup(path, scope) as Record<string, unknown>;
      for (const key of Object.keys(map).sort()) out += renderNodes(n.body, { ...scope, vars: { ...scope.vars, [k]: key, [v]: map[key] } });
    }
  }
  return out;
}

/** Deep merge of `over` onto `base` (maps merged, everything else replaced), as `--set`/`-f` do. */
function merge(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    out[k] =
      v && typeof v === 'object' && !Array.isArray(v) && b && typeof b === 'object' ? merge(b as Record<string, unknown>, v as Record<string, unknown>) : v;
  }
  return out;
}

export function chartValues(): Record<string, unknown> {
  return parse(readFileSync(join(CHART, 'values.yaml'), 'utf8'));
}

/** `helm template <release> deploy/helm/queryapigate` with the default values, and `overrides` over them. */
export function renderChart(overrides: Record<string, unknown> = {}, release = 'queryapigate'): string {
  const chart = parse(readFileSync(join(CHART, 'Chart.yaml'), 'utf8'));
  const root = {
    Values: merge(chartValues(), overrides),
    Release: { Name: release, Namespace: 'default' },
    Chart: { Name: chart.name, Version: chart.version, AppVersion: chart.appVersion },
  };
  const dir = join(CHART, 'templates');
  const docs: string[] = [];
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()) {
    const body = renderNodes(parseTemplate(readFileSync(join(dir, file), 'utf8'), file), { root, vars: {} }).trim();
    if (body) docs.push(`---\n# Source: ${chart.name}/templates/${file}\n${body}\n`);
  }
  return docs.join('');
}

// --print: `node --test dist/test/` runs this file too, and must not print.
if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === '--print') process.stdout.write(renderChart());
