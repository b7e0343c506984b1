// In charge of running one command line: walking the command tree to the command, printing help or
// the version, running the command, and turning every way it can end into an exit code and at most a
// line or two on stderr (never a stack trace): 0 ok, 1 the work failed, 2 the command line is wrong.
import { ConfigError } from '../config.js';
import { GatewayError } from '../contract/errors.js';
import { StoreTooNewError } from '../store/migrations.js';
import { ROOT } from './commands.js';
import { packageVersion } from '../contract/version.js';
import { type Command, commandHelp, didYouMean, Failure, type Group, groupHelp, readCommandLine, UsageError } from './tree.js';

export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;

/** Gateway codes that mean the input itself is malformed: the command line is wrong (2), not the work (1). */
const INPUT_CODES = new Set(['invalid_body', 'invalid_name', 'unknown_field']);

export async function runCli(argv: string[]): Promise<number> {
  const out = (line: string) => process.stdout.write(`${line}\n`);
  const say = (line: string) => process.stderr.write(`${line}\n`);
  try {
    await dispatch(argv, out, say);
    return EXIT.ok;
  } catch (e) {
    return explain(e, say);
  }
}

async function dispatch(argv: string[], out: (l: string) => void, say: (l: string) => void): Promise<void> {
  // No command at all runs the server, as the bin always has (Dockerfile, npm start).
  if (argv.length === 0) argv = ['serve'];
  if (argv[0] === '--version' || argv[0] === '-V') {
    if (argv.length > 1) throw new UsageError(`--version takes nothing after it: got '${argv.slice(1).join(' ')}'`, 'queryapigate');
    out(packageVersion());
    return;
  }
  // `help keys create` is `keys create --help`.
  if (argv[0] === 'help') argv = [...argv.slice(1), '--help'];

  let node: Command | Group = ROOT;
  let path = ROOT.name;
  let i = 0;
  while (node.kind === 'group') {
    const word = argv[i];
    if (word === undefined || word === '--help' || word === '-h') {
      const text = groupHelp(node, path, node === ROOT ? [['-V, --version', 'print the version']] : []);
      if (word === undefined) {
        // A group alone names no work: a usage error, with the group's help to say what it holds.
        process.stderr.write(text);
        throw new UsageError(`'${path}' needs a command`, path);
      }
      out(text.trimEnd());
      return;
    }
    const child: Command | Group | undefined = node.children.find((c) => c.name === word);
    if (!child) {
      const what = word.startsWith('-') ? 'option' : 'command';
      const known = node.children.map((c) => c.name);
      throw new UsageError(`unknown ${what} '${word}'${what === 'command' ? didYouMean(word, known) : ''}`, path);
    }
    node = child;
    path = `${path} ${child.name}`;
    i++;
  }
  const cmd: Command = node;
  const line = readCommandLine(cmd, path, argv.slice(i));
  if (line.help) {
    out(commandHelp(cmd, path).trimEnd());
    return;
  }
  await cmd.run({ values: line.values, args: line.args, out, say });
}

function explain(e: unknown, say: (l: string) => void): number {
  if (e instanceof UsageError) {
    say(`error: ${e.message}`);
    say(`Run '${e.helpFor} --help' for usage.`);
    return EXIT.usage;
  }
  if (e instanceof GatewayError || (e instanceof Failure && e.code)) {
    const code = (e as GatewayError | Failure).code!;
    say(`error: ${e.message} (${code})`);
    return INPUT_CODES.has(code) ? EXIT.usage : EXIT.failed;
  }
  if (e instanceof ConfigError) {
    say(`error: invalid configuration: ${e.problems.join('; ')}`);
    return EXIT.failed;
  }
  if (e instanceof Failure || e instanceof StoreTooNewError) {
    say(`error: ${e.message}`);
    return EXIT.failed;
  }
  // Anything else is a bug or the system's (a disk, a socket): its message, on one line, and no stack.
  const message = e instanceof Error ? e.message : String(e);
  say(`error: ${message.split('\n')[0]}`);
  return EXIT.failed;
}
