// In charge of the command tree's plumbing: how a command and a group are declared, reading a command
// line against them with node:util parseArgs, the help text of each, and the two ways a command fails
// (a usage error, exit 2; a runtime failure, exit 1). Knows no command of its own.
import { parseArgs } from 'node:util';

export interface Option {
  type: 'string' | 'boolean';
  short?: string;
  /** Given more than once, the values are kept in order. */
  multiple?: boolean;
  /** The value's name in help (`--out FILE`). */
  value?: string;
  help: string;
}

/** What a command's run gets: the options read, the positional arguments, and where to write. */
export interface Invocation {
  values: Record<string, string | boolean | string[] | undefined>;
  args: string[];
  /** The data the command prints (stdout). */
  out(line: string): void;
  /** What the command says about itself (stderr): which store, what it did, notes. */
  say(line: string): void;
}

export interface Command {
  kind: 'command';
  name: string;
  /** One line, for the group's list. */
  summary: string;
  /** After the command's path in the usage line, e.g. 'NAME [options]'. */
  usage: string;
  /** What it does, at more length; lines of help text. */
  description?: string[];
  /** The positional arguments it takes, at least and at most. */
  args: { min: number; max: number };
  options: Record<string, Option>;
  examples: string[];
  run(inv: Invocation): Promise<void>;
}

export interface Group {
  kind: 'group';
  name: string;
  summary: string;
  description?: string[];
  children: Array<Command | Group>;
  examples: string[];
}

/** The command line is wrong: exit 2, with the message and a pointer to the help. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly helpFor: string,
  ) {
    super(message);
  }
}

/** The command could not do its work: exit 1, one line. `code` is the gateway's error code, if any. */
export class Failure extends Error {
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message);
  }
}

export const HELP: Option = { type: 'boolean', short: 'h', help: 'show this help' };
export const JSON_OUTPUT: Option = { type: 'boolean', help: 'print JSON (one document) instead of text, for scripts' };

/** Reads `argv` (what follows the command's path) against the command's options and arity. */
export function readCommandLine(cmd: Command, path: string, argv: string[]): { values: Invocation['values']; args: string[]; help: boolean } {
  const options = { ...cmd.options, help: HELP };
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (e) {
    throw new UsageError(explainParseError(e as Error & { code?: string }, Object.keys(options)), path);
  }
  const values = parsed.values as Invocation['values'];
  if (values.help) return { values, args: parsed.positionals, help: true };
  const n = parsed.positionals.length;
  if (n < cmd.args.min) throw new UsageError(`'${path}' needs ${cmd.usage.split(' [')[0] || 'more arguments'}`, path);
  if (n > cmd.args.max)
    throw new UsageError(
      `'${path}' takes ${cmd.args.max === 0 ? 'no' : `at most ${cmd.args.max}`} argument${cmd.args.max === 1 ? '' : 's'}: got '${parsed.positionals.join(' ')}'`,
      path,
    );
  return { values, args: parsed.positionals, help: false };
}

function explainParseError(e: Error & { code?: string }, known: string[]): string {
  const unknown = /^Unknown option '(-{1,2}[^']+)'/.exec(e.message);
  if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && unknown) {
    const name = unknown[1].replace(/^-+/, '').split('=')[0];
    return `unknown option '${unknown[1]}'${didYouMean(name, known, (s) => `--${s}`)}`;
  }
  // parseArgs' own messages for a missing value or a stray value name the option and are clear enough.
  return e.message.split('\n')[0].replace(/\. To specify.*$/, '');
}

/** ". Did you mean 'x'?" for the closest known name, when one is close enough to be a typo; else ''. */
export function didYouMean(given: string, known: string[], show: (s: string) => string = (s) => s): string {
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const k of known) {
    const d = k.startsWith(given) && given.length >= 2 ? 1 : distance(given.toLowerCase(), k.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  return best !== null && bestDistance <= Math.max(2, Math.floor(given.length / 3)) ? `. Did you mean '${show(best)}'?` : '';
}

/** Levenshtein distance, with a swap of two neighbours counting as one edit ('kyes' is one from 'keys'). */
function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

// ---- help text

export function commandHelp(cmd: Command, path: string): string {
  const options = { ...cmd.options, help: HELP };
  const flags = Object.entries(options).map(([name, o]) => {
    const left = `${o.short ? `-${o.short}, ` : '    '}--${name}${o.type === 'string' ? ` ${o.value ?? 'VALUE'}` : ''}`;
    return [left, o.help + (o.multiple ? ' (may be given more than once)' : '')] as const;
  });
  const width = Math.max(...flags.map(([l]) => l.length)) + 2;
  return [
    `Usage: ${path}${cmd.usage ? ` ${cmd.usage}` : ''}`,
    '',
    cmd.summary,
    ...(cmd.description ? ['', ...cmd.description] : []),
    '',
    'Options:',
    ...flags.map(([l, r]) => `  ${l.padEnd(width)}${r}`),
    '',
    cmd.examples.length > 1 ? 'Examples:' : 'Example:',
    ...cmd.examples.map((e) => `  ${e}`),
    '',
  ].join('\n');
}

export function groupHelp(group: Group, path: string, extraOptions: Array<[string, string]> = []): string {
  const width = Math.max(...group.children.map((c) => c.name.length)) + 2;
  const options: Array<[string, string]> = [['-h, --help', 'show this help'], ...extraOptions];
  const optionWidth = Math.max(...options.map(([l]) => l.length)) + 2;
  return [
    `Usage: ${path} <command> [options]`,
    '',
    group.summary,
    ...(group.description ? ['', ...group.description] : []),
    '',
    'Commands:',
    ...group.children.map((c) => `  ${c.name.padEnd(width)}${c.summary}`),
    '',
    'Options:',
    ...options.map(([l, r]) => `  ${l.padEnd(optionWidth)}${r}`),
    '',
    group.examples.length > 1 ? 'Examples:' : 'Example:',
    ...group.examples.map((e) => `  ${e}`),
    '',
    `'${path} <command> --help' tells more about each.`,
    '',
  ].join('\n');
}
