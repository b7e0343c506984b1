// The layer check (npm run lint): which module of src/ and workers/ may import which. An import may go
// to its own folder or to a lower layer, never up; and no module imports itself back in a circle.
//
//   top      src/main.ts, src/cli, src/serve.ts,     may import anything below; nothing imports them
//            workers/                                (but main.ts imports cli, and cli serve.ts)
//   floor 4  src/http, src/api                       http may import api, not the other way
//   floor 3  src/call, src/examples, src/catalog,    examples and catalog may import call, not the other way;
//            src/mcp                                 examples and catalog do not import each other; mcp may
//                                                    import call and catalog, neither imports mcp
//   floor 2  src/auth, src/recorder                  they do not import each other
//   floor 1  src/store, src/sources, src/governance, src/metrics
//   ground   src/contract, src/config.ts, src/log.ts import nothing of the project (config.ts: src/contract only;
//                                                    log.ts: config.ts only)
//
// Each floor's rule lists what it MAY import (its own folder and the floors below), so a new folder of
// src/ can't be imported by a floor until it is given a place here. Type-only imports count like any
// other (tsPreCompilationDeps), as do `import('...')` types.

/** The modules of each layer, as path patterns relative to the project root. */
const GROUND = ['^src/contract/', '^src/config[.]ts$', '^src/log[.]ts$'];
const FLOOR_1 = ['^src/(store|sources|governance|metrics)/'];
const FLOOR_2 = ['^src/(auth|recorder)/'];
const FLOOR_3 = ['^src/(call|examples|catalog|mcp)/'];
/** Every module of the project: a rule's `to` is limited to these, so builtins and libraries are left alone. */
const PROJECT = '^(src|workers)/';
/** Libraries, whatever section of package.json they are declared in. */
const LIBRARIES = ['npm', 'npm-dev', 'npm-optional', 'npm-peer', 'npm-bundled', 'npm-no-pkg', 'npm-unknown'];

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No module may import itself back through others: break the circle by moving the shared part down a layer.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment:
        'An import that resolves to no file: fix it (a .js specifier must name a .ts file next to it). ' +
        'Unresolved imports would also escape every layer rule below.',
      from: {},
      to: { couldNotResolve: true },
    },

    // ---- ground
    {
      name: 'contract-imports-nothing-of-the-project',
      severity: 'error',
      comment: 'src/contract is the ground floor every layer shares (errors, the Request/Answer, thread messages): it imports no other module of the project.',
      from: { path: '^src/contract/' },
      to: { path: PROJECT, pathNot: '^src/contract/' },
    },
    {
      name: 'contract-imports-only-types-from-libraries',
      severity: 'error',
      comment: 'src/contract may use node: builtins, and from libraries only types (import type), so it costs nothing to load anywhere.',
      from: { path: '^src/contract/' },
      to: { dependencyTypes: LIBRARIES, dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'config-imports-only-the-contract',
      severity: 'error',
      comment:
        'src/config.ts parses the QUERYAPIGATE_* variables at boot; besides itself it may import only src/contract ' +
        '(the other half of the ground floor, which imports nothing), e.g. the "did you mean" of its warnings.',
      from: { path: '^src/config[.]ts$' },
      to: { path: PROJECT, pathNot: ['^src/config[.]ts$', '^src/contract/'] },
    },
    {
      name: 'log-imports-only-the-config',
      severity: 'error',
      comment: 'src/log.ts (pino, one root logger per thread) may import only src/config.ts, for the type of its settings.',
      from: { path: '^src/log[.]ts$' },
      to: { path: PROJECT, pathNot: ['^src/log[.]ts$', '^src/config[.]ts$'] },
    },

    // ---- floor 1
    {
      name: 'floor-1-imports-only-the-ground',
      severity: 'error',
      comment: 'src/store, src/sources, src/governance and src/metrics may import their own folder, src/contract and src/config.ts only.',
      from: { path: FLOOR_1 },
      to: { path: PROJECT, pathNot: ['^src/$1/', ...GROUND] },
    },

    // ---- floor 2
    {
      name: 'floor-2-imports-only-floor-1-and-below',
      severity: 'error',
      comment:
        'src/auth and src/recorder may import their own folder, floor 1 and the ground; ' +
        'not each other (one identifies callers, the other writes runs down: neither needs the other).',
      from: { path: FLOOR_2 },
      to: { path: PROJECT, pathNot: ['^src/$1/', ...FLOOR_1, ...GROUND] },
    },

    // ---- floor 3
    {
      name: 'call-imports-only-floor-2-and-below',
      severity: 'error',
      comment: 'src/call (the call as stages) may import floor 2 and below; not src/examples, which builds on it.',
      from: { path: '^src/call/' },
      to: { path: PROJECT, pathNot: ['^src/call/', ...FLOOR_2, ...FLOOR_1, ...GROUND] },
    },
    {
      name: 'catalog-imports-only-call-and-below',
      severity: 'error',
      comment: 'src/catalog (/catalog, /openapi.json, /docs) may import src/call and floor 2 and below: it reads calls as the call stages do.',
      from: { path: '^src/catalog/' },
      to: { path: PROJECT, pathNot: ['^src/catalog/', '^src/call/', ...FLOOR_2, ...FLOOR_1, ...GROUND] },
    },
    {
      name: 'mcp-imports-only-call-catalog-and-below',
      severity: 'error',
      comment: 'src/mcp (the MCP server: tools over saved queries and ad-hoc SQL) may import src/call, src/catalog and floor 2 and below.',
      from: { path: '^src/mcp/' },
      to: { path: PROJECT, pathNot: ['^src/mcp/', '^src/call/', '^src/catalog/', ...FLOOR_2, ...FLOOR_1, ...GROUND] },
    },
    {
      name: 'examples-imports-only-call-and-below',
      severity: 'error',
      comment: 'src/examples may import src/call and floor 2 and below.',
      from: { path: '^src/examples/' },
      to: { path: PROJECT, pathNot: ['^src/examples/', '^src/call/', ...FLOOR_2, ...FLOOR_1, ...GROUND] },
    },

    // ---- floor 4
    {
      name: 'api-imports-only-floor-3-and-below',
      severity: 'error',
      comment: 'src/api (the management routes) may import floor 3 and below; not src/http, which serves it.',
      from: { path: '^src/api/' },
      to: { path: PROJECT, pathNot: ['^src/api/', ...FLOOR_3, ...FLOOR_2, ...FLOOR_1, ...GROUND] },
    },
    {
      name: 'http-imports-only-api-and-below',
      severity: 'error',
      comment: 'src/http may import src/api and floor 3 and below.',
      from: { path: '^src/http/' },
      to: { path: PROJECT, pathNot: ['^src/http/', '^src/api/', ...FLOOR_3, ...FLOOR_2, ...FLOOR_1, ...GROUND] },
    },

    // ---- top
    {
      name: 'nothing-imports-an-entry-point',
      severity: 'error',
      comment: 'src/main.ts (the command line) and workers/ (thread entry files, started by path) are imported by no module.',
      from: {},
      to: { path: '^(src/main[.]ts$|workers/)' },
    },
    {
      name: 'only-main-imports-cli',
      severity: 'error',
      comment: 'src/cli (the command tree) is on top: only src/main.ts, the entry that hands it the command line, imports it.',
      from: { pathNot: '^src/(main[.]ts$|cli/)' },
      to: { path: '^src/cli/' },
    },
    {
      name: 'only-the-command-imports-serve',
      severity: 'error',
      comment: 'src/serve.ts (the server as a whole) is on top too: only the command (src/main.ts, src/cli) imports it.',
      from: { pathNot: '^src/(main[.]ts$|cli/)' },
      to: { path: '^src/serve[.]ts$' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    moduleSystems: ['es6', 'cjs'],
    // The TypeScript sources, with type-only imports: tsconfig.json's NodeNext resolution maps the
    // `.js` specifiers to the `.ts` files.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.d.ts', '.js', '.cjs', '.mjs', '.json'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
    skipAnalysisNotInRules: true,
  },
};
