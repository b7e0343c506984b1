// Plain key against governed in one gateway, in CPU time: one process serves the seeds' account lookup to 32 callers
// with the plain key and with the seeds' governed key (allowed tables, abalance hashed) in turn, a short wrk run each,
// and charges each run the gateway's CPU. bench/levers.ts KEY=governed compares processes, each with its own JIT and
// heap and minutes of the machine between them; here both keys share the process and follow each other within
// seconds, so what differs between neighbouring slices is the key. The figures: each pair's governed calls per CPU-s
// over plain's, their median and quartiles, and all of a key's calls over all of its CPU.
//
//   node dist/bench/keys.js [--pg postgres://postgres@127.0.0.1:5432/qag_oltp_bench]
//        [--store postgres://postgres@127.0.0.1:5432/qag_lev_store | --store sqlite] [--pairs 30] [--slice 2] [--warm 15]
//        [--callers 32] [--workers 0] [--main <a build's dist/src/main.js>] [--name keys] [--rules '<the governed key's rules, JSON>']
//
// Results go to bench/results/<name>-<date>/ (results.jsonl + README.md).
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { codeVersion, GOVERNED, lookupCell, lookupKey, writeResults } from './gateway.js';
import { ensureWrk, runLoad } from './load.js';
import { alternate, pairsMarkdown, type Side, summarize } from './pairs.js';

const { values } = parseArgs({
  options: {
    pg: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/qag_oltp_bench' },
    store: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/qag_lev_store' },
    pairs: { type: 'string', default: '30' },
    slice: { type: 'string', default: '2' },
    /** Seconds of each key before the pairs: the governed key's code compiled and its caches filled. */
    warm: { type: 'string', default: '15' },
    callers: { type: 'string', default: '32' },
    workers: { type: 'string', default: '0' },
    main: { type: 'string', default: fileURLToPath(new URL('../src/main.js', import.meta.url)) },
    name: { type: 'string', default: 'keys' },
    /** The governed key's rules as the API takes them (JSON), instead of the seeds' (say, one mask action alone). */
    rules: { type: 'string' },
  },
});
ensureWrk();
const PAIRS = Number(values.pairs);
const SLICE = Number(values.slice);
const CALLERS = Number(values.callers);
const rules = values.rules ? (JSON.parse(values.rules) as object) : undefined;

type Key = 'plain' | 'governed';

const env: Record<string, string> = { QUERYAPIGATE_WORKERS: values.workers! };
if (values.store !== 'sqlite') env.QUERYAPIGATE_DATABASE_URL = values.store!;
const cell = await lookupCell({ name: 'keys', env, nodeArgs: [], main: values.main, governed: false }, values.pg!);
const secrets: Record<Key, string> = { plain: cell.key, governed: await lookupKey(cell.api, 'g', rules ?? GOVERNED) };
const side = (key: Key): Side => ({
  name: key,
  slice: (seconds) => runLoad({ randRegexUrl: cell.url, duration: seconds, connections: CALLERS, headers: { 'X-API-Key': secrets[key] }, pid: cell.pid }),
});

const started = new Date();
const loadBefore = loadavg();
const SIDES: [Key, Key] = ['plain', 'governed'];
const rows = await alternate([side('plain'), side('governed')], PAIRS, SLICE, Number(values.warm)).finally(() => cell.stop());
const summary = summarize(rows, SIDES);
const governedText = rules
  ? `a key with the rules \`${JSON.stringify(rules)}\``
  : "the seeds' governed key (allowed_tables pgbench_accounts, pgbench_branches; `*.abalance` hashed)";
const markdown = `# Plain key against governed in one gateway, calls per CPU-s (bench/keys.ts)

Run on ${started.toISOString()} with \`node dist/bench/keys.js --pairs ${PAIRS} --slice ${SLICE} --warm ${values.warm} --callers ${CALLERS}
--workers ${values.workers} --store ${values.store === 'sqlite' ? 'sqlite' : '<PostgreSQL>'}\`: ${cpus().length} × ${cpus()[0]?.model.trim()},
Node ${process.version}, build ${codeVersion()}; load average before ${loadBefore.map((l) => l.toFixed(2)).join(' ')}, after
${loadavg()
  .map((l) => l.toFixed(2))
  .join(' ')}.

One gateway (\`QUERYAPIGATE_WORKERS=${values.workers}\`, metadata cache 5 s, every run recorded, its store
${values.store === 'sqlite' ? 'SQLite' : 'in PostgreSQL'}) serves the seeds' account lookup (a random aid of 1,000,000 on
pgbench scale 10) to ${CALLERS} callers (wrk), with the plain key and with ${governedText} in turn: ${values.warm} s of each to warm up, then ${PAIRS} pairs of ${SLICE} s
slices, the order within a pair alternating. Each slice is charged the gateway's CPU (utime + stime of the process, from
/proc, 10 ms ticks).

${pairsMarkdown(rows, SIDES, summary)}`;
const dir = writeResults(values.name!, [...rows, { summary }], markdown);
console.log(`${markdown}\n${dir}`);
