// What the request stage costs in a loop, on this machine: parseQueryString and parseCall (call/request.ts)
// for the seeds' query strings, ns per call, median of rounds. No server: the stage alone, warm. Run on
// another build by copying the compiled file into that build's dist/bench (it imports ../src/call/request.js).
//   npm run build && node dist/bench/requestStage.js [--calls 2000000] [--rounds 5]
import { parseArgs } from 'node:util';
import type { Request } from '../src/contract/exchange.js';
import { parseCall, parseQueryString } from '../src/call/request.js';
import { median, today, writeResults } from './gateway.js';

const { values } = parseArgs({ options: { calls: { type: 'string', default: '2000000' }, rounds: { type: 'string', default: '5' } } });
const CALLS = Number(values.calls);
const QUERIES = ['aid=1', 'aid=123456', 'aid=99&page_size=20'];
const req: Request = {
  method: 'GET',
  url: '/q/account',
  query: '',
  requestId: 'abcdef012345',
  apiKey: 'sk_x',
  ifNoneMatch: '',
  lastEventId: '',
  ip: '',
  body: null,
  started: 0,
};

const cells: Record<string, (i: number) => unknown> = {
  parseQueryString: (i) => parseQueryString(QUERIES[i % 3]),
  parseCall: (i) => {
    req.query = QUERIES[i % 3];
    return parseCall(req);
  },
};
let sink: unknown;
const rows: Array<{ round: number; cell: string; ns: number }> = [];
for (let round = -1; round < Number(values.rounds); round++) {
  for (const [cell, f] of Object.entries(cells)) {
    const t = process.hrtime.bigint();
    for (let i = 0; i < CALLS; i++) sink = f(i);
    if (round >= 0) rows.push({ round, cell, ns: Number(process.hrtime.bigint() - t) / CALLS }); // round -1 warms
  }
}
void sink;
const md = `# The request stage in a loop (${today()})

Made with \`node dist/bench/requestStage.js --calls ${CALLS} --rounds ${values.rounds}\`: ${QUERIES.map((q) => `\`${q}\``).join(', ')} in turn, warm, median of the rounds.

| Function | ns a call |
|---|---|
${Object.keys(cells)
  .map((cell) => `| ${cell} | ${median(rows.filter((r) => r.cell === cell).map((r) => r.ns)).toFixed(0)} |`)
  .join('\n')}
`;
console.log(md);
console.log('written to', writeResults('requeststage', rows, md));
