// In charge of the acceptor's routes: /health, /q/<name> and /execute_sql (handed to the executors),
// the management API under /api/v1, the catalog (/catalog and /openapi.json, built in an executor and
// cached here; /docs), MCP at /mcp (answered in an executor), the console's static files at /console (and
// `/` sends a browser there), and a catch-all 404. Built once before listen; the acceptor never runs SQL.
import uWS from 'uWebSockets.js';
import { checkAccess, routeAccess } from '../api/access.js';
import { administratorRoutes } from '../api/administrators.js';
import { alertRoutes } from '../api/alerts.js';
import { apiKeyRoutes } from '../api/apiKeys.js';
import { auditRoutes } from '../api/auditLog.js';
import { cacheRoutes } from '../api/cache.js';
import { collectionRoutes } from '../api/collections.js';
import { connectionProbeRoutes } from '../api/connectionProbe.js';
import { connectionRoutes } from '../api/connections.js';
import { exampleRoutes } from '../api/examples.js';
import { historyRoutes } from '../api/history.js';
import { instanceRoutes } from '../api/instances.js';
import { queryRoutes } from '../api/queries.js';
import { handleApi, noteAdminUse } from '../api/handle.js';
import { roleRoutes } from '../api/roles.js';
import { ApiRouter, type ControlContext } from '../api/routes.js';
import { settingsRoutes } from '../api/settings.js';
import { identify } from '../auth/identify.js';
import type { RateLimits } from '../auth/rateLimit.js';
import { RATE_LIMIT_MESSAGES, rateLimitHeaders, type RateCheck } from '../auth/rates.js';
import type { CatalogDocuments } from '../catalog/build.js';
import { type CatalogCache, policySlot } from '../catalog/cache.js';
import { DocsFiles } from '../catalog/docsPage.js';
import { openApiDocument } from '../catalog/openapi.js';
import { GatewayError } from '../contract/errors.js';
import { packageVersion } from '../contract/version.js';
import { type Answer, errorAnswer, jsonAnswer, type Request } from '../contract/exchange.js';
import { bound, type ProcessMetrics } from '../metrics/metrics.js';
import { type AccessLine, accessLine } from './accessLog.js';
import { ConsoleFiles } from './consoleFiles.js';
import { corsPolicy } from './cors.js';
import type { Dispatcher } from './dispatch.js';
import type { EventHub } from './events.js';
import { serve, type Handler, type ServeOptions, type StreamStart } from './respond.js';
import { relayStream, wantsStream } from './streamRelay.js';
import { serverTimeZone } from './timeZone.js';

export const VERSION = packageVersion();

/** GET /api/v1/mcp/tools is served here (it needs an executor), not by the router; its access is the table's. */
const MCP_TOOLS_ACCESS = routeAccess('GET', '/api/v1/mcp/tools')!;
/** The routes a signed-in (JWT) user may call, and the routes browsers may call from an allowed origin. */
const AUTHORIZED_ENDPOINTS = new Set(['run_named_query', 'execute_sql', 'catalog', 'openapi', 'mcp', 'api_v1', 'events']);
const CORS_ENDPOINTS = new Set(['run_named_query', 'execute_sql', 'catalog', 'openapi']);

/** Status codes as label text, made once. */
const STATUS: Record<number, string> = Object.fromEntries(
  [200, 201, 202, 204, 302, 304, 400, 401, 403, 404, 405, 406, 409, 412, 413, 415, 429, 500, 502, 503, 504].map((c) => [c, String(c)]),
);

/** Every /api/v1 route the acceptor serves through the router, locked (each with its capability). */
export function managementRouter(): ApiRouter {
  const router = new ApiRouter();
  connectionRoutes(router);
  connectionProbeRoutes(router);
  queryRoutes(router);
  apiKeyRoutes(router);
  roleRoutes(router);
  collectionRoutes(router);
  exampleRoutes(router);
  historyRoutes(router);
  settingsRoutes(router);
  cacheRoutes(router);
  instanceRoutes(router);
  alertRoutes(router);
  administratorRoutes(router);
  auditRoutes(router);
  return router.lock();
}

export function buildApp(
  control: ControlContext,
  hub: EventHub,
  dispatcher: Dispatcher,
  limits: RateLimits,
  metrics: ProcessMetrics,
  state: { draining: boolean },
  catalogs: CatalogCache,
): uWS.TemplatedApp {
  const m = metrics.metrics;
  const cors = corsPolicy(control.config.corsOrigins);
  /** Serve options per route: the request metrics and the access line carry the route's endpoint name. */
  const opts = (endpoint: string): ServeOptions => {
    // Children bound once per label set: no label checks per request.
    const requests = bound((method, status, key) => m.requests.labels({ method, endpoint, status, key }));
    const durations = bound((method) => m.requestDuration.labels({ method, endpoint }));
    // Probes are not logged (the contract's access log skips /health and /metrics).
    const access: AccessLine | null = endpoint === 'health' || endpoint === 'metrics' ? null : accessLine(endpoint, control.config);
    return {
      maxBody: control.config.maxBodyBytes,
      trustProxy: control.config.trustProxy,
      stallMs: control.config.stallTimeout * 1000,
      // The Authorization header is read only where a signed-in user may call, and only with JWT on.
      authorization: Boolean(control.jwt) && AUTHORIZED_ENDPOINTS.has(endpoint),
      cors: CORS_ENDPOINTS.has(endpoint) ? cors : null,
      onAnswer(req, a) {
        const ms = performance.now() - req.started;
        requests(req.method, STATUS[a.status] ?? String(a.status), a.key ?? '-').inc();
        durations(req.method).observe(ms / 1000);
        access?.(req, a, ms);
        if (a.status === 429) {
          m.rateLimitRejections.inc();
          // A key's own limit (the caller named; not the per-address limit, answered before identification).
          if (a.key && a.key !== '-') control.signals.refusals.note(a.key);
        }
      },
    };
  };
  const router = managementRouter();

  const health = healthBody();
  // 503 from SIGTERM on: a load balancer's check takes the instance out while it drains.
  const healthCheck: Handler = (req) => (state.draining ? errorAnswer('unavailable', 'The server is shutting down', req.requestId) : health);
  const call: Handler = (req) => {
    if (state.draining) return errorAnswer('unavailable', 'The server is shutting down', req.requestId);
    if (req.method !== 'GET' && req.method !== 'POST') return errorAnswer('method_not_allowed', 'Method not allowed', req.requestId);
    return wantsStream(req.query) ? relayStream(req, dispatcher) : dispatcher.run(req);
  };
  /** POST /execute_sql: ad-hoc SQL, in an executor through the same stages as /q/. */
  const adhoc: Handler = (req) => {
    if (state.draining) return errorAnswer('unavailable', 'The server is shutting down', req.requestId);
    if (req.method !== 'POST') return errorAnswer('method_not_allowed', 'Method not allowed', req.requestId);
    return wantsStream(req.query) ? relayStream(req, dispatcher, 'adhoc') : dispatcher.run(req, undefined, 'adhoc');
  };
  const api: Handler = async (req) => {
    try {
      const found = router.match(req.method, req.url);
      if (found === null) return errorAnswer('not_found', 'Not found', req.requestId);
      const who = await identify(control.keys, control.adminKey, req.apiKey, req, control.jwt ?? null, req.authorization);
      if (found === 'method_not_allowed') {
        checkAccess(who, { capability: null }, []);
        return errorAnswer('method_not_allowed', 'Method not allowed', req.requestId);
      }
      const answer = await handleApi(control, req, who, found);
      answer.key = who?.name ?? '-';
      // Any change clears every executor's cached rows at once (a connection's also replaces its pools).
      if (req.method !== 'GET' && answer.status < 400 && found.saves) control.publishChange(found.change(found.params));
      return answer;
    } catch (e) {
      if (e instanceof GatewayError) return errorAnswer(e.code, e.message, req.requestId, e.extras);
      throw e;
    }
  };
  /** GET /events: any authenticated caller; the admin key sees every run, a scoped key its own. */
  const events: Handler = async (req) => {
    if (control.config.eventsMaxStreams === 0) return errorAnswer('not_found', 'Not found', req.requestId);
    const who = await identify(control.keys, control.adminKey, req.apiKey, req, control.jwt ?? null, req.authorization);
    if (!who) return errorAnswer('unauthorized', 'Unauthorized', req.requestId);
    if (who.admin) await noteAdminUse(control, who.admin, req);
    if (hub.size >= control.config.eventsMaxStreams) {
      return withHeaders(errorAnswer('too_many_streams', 'Too many open event streams on this server - try again shortly', req.requestId, { retry_after: 5 }), [
        'Retry-After',
        '5',
      ]);
    }
    const resume = req.lastEventId || new URLSearchParams(req.query).get('last_event_id') || '';
    if (resume && !/^\d{1,15}$/.test(resume)) return errorAnswer('invalid_request', 'Last-Event-ID must be an event id', req.requestId);
    // Administrators (an auditor too: it reads history) see every run; a scoped key its own.
    return hub.open(who.kind === 'key' && !who.admin ? who.name : null, resume ? Number(resume) : null);
  };
  const notFound: Handler = (req) => errorAnswer('not_found', 'Not found', req.requestId);

  /** /mcp: MCP over Streamable HTTP, stateless, so only POST (no session to resume or end); answered in an executor. */
  const mcp: Handler = (req) => {
    if (state.draining) return errorAnswer('unavailable', 'The server is shutting down', req.requestId);
    if (req.method !== 'POST') {
      return withHeaders(errorAnswer('method_not_allowed', 'This MCP server is stateless: POST each JSON-RPC message to /mcp', req.requestId), [
        'Allow',
        'POST',
      ]);
    }
    return dispatcher.mcp({ request: req, serverVersion: VERSION });
  };
  /** GET /api/v1/mcp/tools: the tools an administrator sees (each key sees its own share of them). */
  const mcpTools: Handler = async (req) => {
    const who = await identify(control.keys, control.adminKey, req.apiKey, req, control.jwt ?? null, req.authorization);
    try {
      const admin = checkAccess(who, MCP_TOOLS_ACCESS, []);
      await noteAdminUse(control, admin, req);
      if (!who || who.kind === 'key') return jsonAnswer(200, { items: [] }); // an auditor reaches no tool
      return { ...jsonAnswer(200, { items: await dispatcher.mcpTools({ caller: who }) }), key: who.name };
    } catch (e) {
      if (e instanceof GatewayError) return errorAnswer(e.code, e.message, req.requestId, e.extras);
      throw e;
    }
  };

  // Without a key (and with keys configured) /openapi.json is the document with no saved query in it.
  const { maxPageSize, queryTimeout } = control.config;
  const publicDocument = JSON.stringify(openApiDocument([], { serverVersion: VERSION, maxPageSize, queryTimeout }));
  /** GET /catalog and /openapi.json: the caller's own, built by an executor on a miss. */
  const catalogDocument =
    (pick: keyof CatalogDocuments): Handler =>
    async (req) => {
      if (state.draining) return errorAnswer('unavailable', 'The server is shutting down', req.requestId);
      const who = await identify(control.keys, control.adminKey, req.apiKey, req, control.jwt ?? null, req.authorization);
      if (!who && pick === 'openapi' && !req.apiKey) return documentAnswer(publicDocument, '-');
      if (!who) return errorAnswer('unauthorized', 'Unauthorized', req.requestId);
      try {
        const docs = await catalogs.get(policySlot(who), () => dispatcher.catalog({ caller: who, serverVersion: VERSION }));
        return documentAnswer(docs[pick], who.name);
      } catch (e) {
        if (!(e instanceof GatewayError)) throw e;
        const answer = errorAnswer(e.code, e.message, req.requestId, e.extras);
        return e.extras?.retry_after ? withHeaders(answer, ['Retry-After', String(e.extras.retry_after)]) : answer;
      }
    };
  const docsFiles = new DocsFiles();
  const docs: Handler = (req) => docsFiles.get(req.url) ?? errorAnswer('not_found', 'Not found', req.requestId);
  // The console: public static files (the app asks for the key), never rate-limited, as the contract says.
  const consoleFiles = new ConsoleFiles();
  const consolePage: Handler = (req) =>
    consoleFiles.get(req.url, req.headers?.['accept-encoding'] ?? '', req.ifNoneMatch) ??
    errorAnswer('not_found', consoleFiles.built ? 'Not found' : 'The console was not built (npm run build builds it)', req.requestId);
  const home: Handler = () => ({ status: 302, headers: ['Location', '/console/', 'Cache-Control', 'no-cache'], body: '' });

  /** The server-wide limit per client address, checked before authentication on every route it covers. */
  const limited =
    (h: Handler): Handler =>
    (req) => {
      const check = limits.checkClient(req);
      if (check === null) return h(req);
      return check instanceof Promise ? check.then((c) => admit(c, req, h)) : admit(check, req, h);
    };
  const admit = (c: RateCheck, req: Request, h: Handler): ReturnType<Handler> => {
    const headers = rateLimitHeaders(c, 'client');
    if (!c.allowed) {
      return withHeaders(errorAnswer('rate_limited', RATE_LIMIT_MESSAGES.client, req.requestId, { retry_after: c.retryAfterS }), headers);
    }
    const out = h(req);
    return out instanceof Promise ? out.then((a) => withHeaders(a, headers)) : withHeaders(out, headers);
  };

  const scrape: Handler = async () => {
    const { contentType, body } = await metrics.scrape();
    return { status: 200, headers: ['Content-Type', contentType], body };
  };
  const [healthOpts, metricsOpts, callOpts, apiOpts, unmatchedOpts, eventsOpts, catalogOpts, openapiOpts, docsOpts] = [
    'health',
    'metrics',
    'run_named_query',
    'api_v1',
    'unmatched',
    'events',
    'catalog',
    'openapi',
    'docs',
  ].map(opts);
  const limitedCatalog = limited(catalogDocument('catalog'));
  const limitedOpenapi = limited(catalogDocument('openapi'));
  const limitedCall = limited(call);
  const limitedAdhoc = limited(adhoc);
  const adhocOpts = opts('execute_sql');
  const limitedMcp = limited(mcp);
  const mcpOpts: ServeOptions = { ...opts('mcp'), headers: ['accept', 'content-type', 'mcp-protocol-version'] };
  const limitedMcpTools = limited(mcpTools);
  const limitedApi = limited(api);
  const consoleOpts: ServeOptions = { ...opts('console'), headers: ['accept-encoding'] };
  // Only the management API reads If-Match (its writes check it); no other route pays for the header.
  const managementOpts: ServeOptions = { ...apiOpts, headers: ['if-match'] };
  // A preflight (OPTIONS with Access-Control-Request-Method) is answered here at once, before any
  // limit or key; a plain OPTIONS is an ordinary request of the route.
  const preflightOpts = (endpoint: string, h: Handler): [Handler, ServeOptions] => {
    const o = { ...opts(endpoint), cors: null, headers: ['origin', 'access-control-request-method'] };
    return [(req) => (cors && req.headers?.['access-control-request-method'] ? cors.preflight(req.headers.origin ?? '') : h(req)), o];
  };
  const [callPreflight, callPreflightOpts] = preflightOpts('run_named_query', limitedCall);
  const [adhocPreflight, adhocPreflightOpts] = preflightOpts('execute_sql', limitedAdhoc);
  return uWS
    .App()
    .options('/q/*', (res, req) => serve(res, req, callPreflight, callPreflightOpts))
    .options('/execute_sql', (res, req) => serve(res, req, adhocPreflight, adhocPreflightOpts))
    .get('/health', (res, req) => serve(res, req, healthCheck, healthOpts))
    .get('/metrics', (res, req) => serve(res, req, scrape, metricsOpts))
    .get('/events', (res, req) => serve(res, req, limited(events), eventsOpts))
    .get('/catalog', (res, req) => serve(res, req, limitedCatalog, catalogOpts))
    .get('/openapi.json', (res, req) => serve(res, req, limitedOpenapi, openapiOpts))
    .get('/docs', (res, req) => serve(res, req, docs, docsOpts))
    .get('/docs/*', (res, req) => serve(res, req, docs, docsOpts))
    .get('/', (res, req) => serve(res, req, home, consoleOpts))
    .get('/console', (res, req) => serve(res, req, consolePage, consoleOpts))
    .get('/console/*', (res, req) => serve(res, req, consolePage, consoleOpts))
    .any('/q/*', (res, req) => serve(res, req, limitedCall, callOpts))
    .any('/execute_sql', (res, req) => serve(res, req, limitedAdhoc, adhocOpts))
    .any('/mcp', (res, req) => serve(res, req, limitedMcp, mcpOpts))
    .get('/api/v1/mcp/tools', (res, req) => serve(res, req, limitedMcpTools, apiOpts))
    .any('/api/v1/*', (res, req) => serve(res, req, limitedApi, managementOpts))
    .any('/*', (res, req) => serve(res, req, notFound, unmatchedOpts));
}

/** A caller's document: never kept by a shared cache, since it differs from key to key. */
function documentAnswer(body: string, key: string): Answer {
  return { status: 200, headers: ['Content-Type', 'application/json', 'Cache-Control', 'no-store'], body, key };
}

function withHeaders<A extends Answer | StreamStart>(a: A, extra: string[]): A {
  return { ...a, headers: a.headers.concat(extra) };
}

function healthBody(): Answer {
  const offsetMin = -new Date().getTimezoneOffset();
  const sign = offsetMin >= 0 ? '+' : '-';
  const abs = Math.abs(offsetMin);
  const offset = `${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
  return jsonAnswer(200, { status: 'ok', version: VERSION, time_zone: serverTimeZone(), utc_offset: offset });
}
