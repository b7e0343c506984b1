// Tests for the request stage: parseCall turns a /q/ Request into the caller's intent (name,
// parameters, options) and refuses malformed shapes with the contract's codes; parsePaging reads
// page and page_size against the server's limit. Nothing is looked up, so no server is needed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GatewayError, statusOf, type ErrorCode } from '../../src/contract/errors.js';
import type { Request } from '../../src/contract/exchange.js';
import { parseCall, parsePaging, parseJsonObject, parseQueryString, type CallRequest } from '../../src/call/request.js';

const utf8 = new TextEncoder();

/** A /q/ request as the acceptor hands it on; only what a case names differs. */
function get(query: string, url = '/q/films'): Request {
  return { method: 'GET', url, query, requestId: 'r1', apiKey: '', ifNoneMatch: '', lastEventId: '', ip: '127.0.0.1', body: null, started: 0 };
}

function post(body: unknown, query = ''): Request {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  return { ...get(query), method: 'POST', body: utf8.encode(text) };
}

/** The call's fields, or the refusal's code. */
function outcome(req: Request): CallRequest | ErrorCode {
  try {
    return parseCall(req);
  } catch (e) {
    assert.ok(e instanceof GatewayError, `not a GatewayError: ${String(e)}`);
    return e.code;
  }
}

/** A call with its params as a plain object, as the cases write them. */
type Plain = Omit<CallRequest, 'params'> & { params: Record<string, unknown> };

/** What a call looks like when the request asks for nothing special. */
const DEFAULTS: Plain = {
  name: 'films',
  version: null,
  connectionName: null,
  format: 'json',
  page: null,
  pageSize: null,
  timeout: null,
  params: {},
  typed: false,
  stream: false,
};

/** Expected: the fields that differ from DEFAULTS (params compared as plain objects), or an error code. */
type Want = Partial<Plain> | ErrorCode;

function check(req: Request, want: Want): void {
  const got = outcome(req);
  if (typeof want === 'string') {
    assert.equal(typeof got === 'string' ? got : `accepted: ${JSON.stringify(got)}`, want);
    return;
  }
  assert.notEqual(typeof got, 'string', `refused with ${String(got)}`);
  const call = got as CallRequest;
  // params is a Map (so names like constructor are plain names): compare its entries.
  assert.ok(call.params instanceof Map);
  assert.deepEqual({ ...call, params: Object.fromEntries(call.params) }, { ...DEFAULTS, ...want, params: { ...(want.params ?? {}) } });
}

test('parseCall: GET query strings', async (t) => {
  const cases: Array<[string, string, Want]> = [
    ['no query string', '', {}],
    ['parameters are strings, in the params', 'id=7&title=Alien', { params: { id: '7', title: 'Alien' } }],
    // reserved names are options, never parameters
    [
      'every reserved name',
      'format=csv&page=2&page_size=5&version=3&connection_name=pg&timeout=2.5&stream=true&id=1',
      { format: 'csv', page: '2', pageSize: '5', version: 3, connectionName: 'pg', timeout: 2.5, stream: true, params: { id: '1' } },
    ],
    ['page and page_size are kept as text for parsePaging', 'page=x&page_size=', { page: 'x', pageSize: '' }],
    ['an empty connection_name means the saved one', 'connection_name=', {}],
    ['a name without = is an empty string', 'flag&x=1', { params: { flag: '', x: '1' } }],
    ['empty pieces are skipped', '&&a=1&', { params: { a: '1' } }],
    // repeated names: the first value wins, for parameters and options alike
    ['repeated parameter: first wins', 'id=1&id=2', { params: { id: '1' } }],
    ['repeated option: first wins', 'format=csv&format=tsv', { format: 'csv' }],
    ['only the first value is decoded, so a broken repeat is ignored', 'id=1&id=%zz', { params: { id: '1' } }],
    // decoding: percent escapes and + for a space, in names and values
    ['percent and plus decoding', 'q=a%20b+c%2Bd&n%61me=%C3%A9', { params: { q: 'a b c+d', name: 'é' } }],
    ['an encoded = or & stays in the value', 'q=a%3Db%26c', { params: { q: 'a=b&c' } }],
    ['a reserved name spelled with escapes is still reserved', 'form%61t=csv', { format: 'csv' }],
    ['only the first = splits', 'expr=a=b', { params: { expr: 'a=b' } }],
    // invalid encoding anywhere is the request's fault
    ['a truncated escape', 'q=%E0%A4%A', 'invalid_request'],
    ['a non-hex escape', 'q=%zz', 'invalid_request'],
    ['a broken escape in a name', '%zz=1', 'invalid_request'],
    ['a broken escape in an option', 'format=%zz', 'invalid_request'],
    ['a lone UTF-8 continuation byte', 'q=%80', 'invalid_request'],
    // format: case-insensitive, and only the four the writers know
    ['format is case-insensitive', 'format=NDJSON', { format: 'ndjson' }],
    ['format=TSV', 'format=TSV', { format: 'tsv' }],
    ['an empty format is the default', 'format=', {}],
    ['an unknown format', 'format=xmlx', 'invalid_format'],
    ['a format with spaces is not trimmed', 'format=+csv', 'invalid_format'],
    // version: a positive whole number written in digits
    ['version=1', 'version=1', { version: 1 }],
    ['version=007', 'version=007', { version: 7 }],
    ['an empty version is the published one', 'version=', {}],
    ['version=0', 'version=0', 'invalid_request'],
    ['version=-1', 'version=-1', 'invalid_request'],
    ['version=1.5', 'version=1.5', 'invalid_request'],
    ['version=1e2', 'version=1e2', 'invalid_request'],
    ['version=+2', 'version=%2B2', 'invalid_request'],
    ['version=abc', 'version=abc', 'invalid_request'],
    ['version beyond 2^53', 'version=9007199254740993', 'invalid_request'],
    // timeout: positive seconds, decimals allowed
    ['timeout=5', 'timeout=5', { timeout: 5 }],
    ['timeout=.5', 'timeout=.5', { timeout: 0.5 }],
    ['timeout with surrounding spaces', 'timeout=+5+', { timeout: 5 }],
    ["an empty timeout is the server's", 'timeout=', {}],
    ['timeout=0 is not positive', 'timeout=0', 'invalid_timeout'],
    ['timeout=-1', 'timeout=-1', 'invalid_timeout'],
    ['timeout=abc', 'timeout=abc', 'invalid_timeout'],
    ['timeout=1e3', 'timeout=1e3', 'invalid_timeout'],
    ['timeout=Infinity', 'timeout=Infinity', 'invalid_timeout'],
    // stream: only the truthy words turn an export on; anything else is an ordinary call
    ['stream=1', 'stream=1', { stream: true }],
    ['stream=YES', 'stream=YES', { stream: true }],
    ['stream=on', 'stream=on', { stream: true }],
    ['stream=false', 'stream=false', {}],
    ['stream=0', 'stream=0', {}],
  ];
  for (const [label, query, want] of cases) {
    await t.test(`${label}: ?${query}`, () => check(get(query), want));
  }
});

test('parseCall: the query name comes from the /q/ path, decoded', async (t) => {
  const cases: Array<[string, string]> = [
    ['/q/films', 'films'],
    ['/q/top%20films', 'top films'],
    // a path is not a query string: + stays a plus
    ['/q/a+b', 'a+b'],
    ['/q/caf%C3%A9', 'café'],
    ['/q/a%2Fb', 'a/b'],
    // not valid URL encoding: the name is taken as sent (and then simply not found)
    ['/q/bad%zz', 'bad%zz'],
    ['/q/', ''],
  ];
  for (const [url, name] of cases) {
    await t.test(url, () => check(get('', url), { name }));
  }
});

test('parseCall: POST JSON bodies', async (t) => {
  const cases: Array<[string, Request, Want]> = [
    // params from a body are typed: the binder then expects JSON types, not text
    ['typed params', post({ params: { id: 7, tags: null, on: true, ratio: 0.5 } }), { params: { id: 7, tags: null, on: true, ratio: 0.5 }, typed: true }],
    ['empty params still mark the call typed', post({ params: {} }), { typed: true }],
    ['no params: an untyped call', post({ format: 'csv' }), { format: 'csv' }],
    ['an empty body is no body', { ...post(''), body: new Uint8Array(0) }, {}],
    ['a null body is no body', { ...post(''), body: null }, {}],
    // options may come in the body, with their JSON types
    [
      'options in the body',
      post({ format: 'TSV', version: 2, timeout: 1.5, page: 3, page_size: 20, connection_name: 'other', stream: true }),
      { format: 'tsv', version: 2, timeout: 1.5, page: '3', pageSize: '20', connectionName: 'other', stream: true },
    ],
    ['version as digits in the body', post({ version: '4' }), { version: 4 }],
    ['timeout as text in the body', post({ timeout: '2' }), { timeout: 2 }],
    // the query string wins over the body for an option both carry
    ['query string option beats the body', post({ format: 'csv', version: 2 }, 'format=ndjson'), { format: 'ndjson', version: 2 }],
    // parameters from both: the body's override the query string's, and the call is typed
    ['query string and body params merge, the body winning', post({ params: { b: 2, a: 9 } }, 'a=1&c=3'), { params: { a: 9, b: 2, c: '3' }, typed: true }],
    // a GET's body is never read
    ['a GET body is ignored', { ...get('a=1'), body: utf8.encode('{"params":{"b":2}}') }, { params: { a: '1' } }],
    ['a broken GET body is ignored', { ...get(''), body: utf8.encode('{oops') }, {}],
    // refusals
    ['not JSON', post('{oops'), 'invalid_body'],
    ['trailing garbage', post('{"params":{}} x'), 'invalid_body'],
    ['an array body', post([1, 2]), 'invalid_body'],
    ['a string body', post('"text"'), 'invalid_body'],
    ['a null body', post('null'), 'invalid_body'],
    ['params is an array', post({ params: [1] }), 'invalid_body'],
    ['params is null', post({ params: null }), 'invalid_body'],
    ['params is a string', post({ params: 'id=1' }), 'invalid_body'],
    ['an unknown format in the body', post({ format: 'html' }), 'invalid_format'],
    ['a numeric format in the body', post({ format: 1 }), 'invalid_format'],
    ['version 0 in the body', post({ version: 0 }), 'invalid_request'],
    ['version 1.5 in the body', post({ version: 1.5 }), 'invalid_request'],
    ['version "v2" in the body', post({ version: 'v2' }), 'invalid_request'],
    ['timeout 0 in the body', post({ timeout: 0 }), 'invalid_timeout'],
    ['timeout -2 in the body', post({ timeout: -2 }), 'invalid_timeout'],
    ['timeout true in the body', post({ timeout: true }), 'invalid_timeout'],
    ['timeout 1e400 (Infinity) in the body', post('{"timeout": 1e400}'), 'invalid_timeout'],
    // the query string's encoding is checked on a POST too
    ['a broken query string on a POST', post({ params: {} }, 'a=%zz'), 'invalid_request'],
  ];
  for (const [label, req, want] of cases) {
    await t.test(label, () => check(req, want));
  }
});

test('parseCall: refusals are 400s', () => {
  // every code the request stage raises is the caller's fault, before anything is looked up
  for (const [req, code] of [
    [get('format=html'), 'invalid_format'],
    [get('version=0'), 'invalid_request'],
    [get('timeout=0'), 'invalid_timeout'],
    [post('{'), 'invalid_body'],
    [get('a=%zz'), 'invalid_request'],
    // an option that is an object whose own toString or valueOf is not a function: read as its JSON text, never called
    [post({ page: { toString: null } }), 'invalid_paging'],
    [post({ page_size: { valueOf: null, toString: null } }), 'invalid_paging'],
    [post({ version: { toString: null } }), 'invalid_request'],
    [post({ format: { toString: null } }), 'invalid_format'],
    [post({ timeout: { toString: null } }), 'invalid_timeout'],
    [post({ connection_name: { toString: null }, page: [1] }), 'invalid_paging'],
  ] as const) {
    assert.throws(
      () => {
        const call = parseCall(req);
        parsePaging(call, 1000); // paging is checked after the parameters, as runCall does
      },
      (e: unknown) => e instanceof GatewayError && e.code === code && statusOf(e.code) === 400,
    );
  }
});

test('parseQueryString: names like __proto__ are plain entries', () => {
  const args = parseQueryString('__proto__=1&constructor=2&toString=3');
  assert.deepEqual(
    [...args],
    [
      ['__proto__', '1'],
      ['constructor', '2'],
      ['toString', '3'],
    ],
  );
  // and as parameters they reach the params, not a prototype; a name not sent is not there
  const call = parseCall(get('constructor=x&__proto__=y'));
  assert.equal(call.params.get('constructor'), 'x');
  assert.equal(call.params.get('__proto__'), 'y');
  assert.equal(call.params.get('toString'), undefined);
  assert.equal(call.params.get('hasOwnProperty'), undefined);
});

test('parseJsonObject: one JSON object or nothing', () => {
  assert.equal(parseJsonObject(null), null);
  assert.equal(parseJsonObject(new Uint8Array(0)), null);
  assert.deepEqual(parseJsonObject(utf8.encode('{"a":[1]}')), { a: [1] });
  // a UTF-8 byte order mark is not part of the text
  assert.deepEqual(parseJsonObject(new Uint8Array([0xef, 0xbb, 0xbf, ...utf8.encode('{"a":1}')])), { a: 1 });
  for (const text of ['', ' ', '[]', '1', 'true', '{"a":1', '{a:1}']) {
    if (text === '') continue; // empty bytes are "no body", above
    assert.throws(
      () => parseJsonObject(utf8.encode(text)),
      (e: unknown) => e instanceof GatewayError && e.code === 'invalid_body',
      text,
    );
  }
});

test('parseJsonObject: a lone surrogate escape, in any string or key at any depth, is invalid_body; a whole pair is text', () => {
  assert.deepEqual(parseJsonObject(utf8.encode('{"a":"\\ud83d\\ude00 \\u00e9"}')), { a: '\u{1f600} é' });
  for (const text of ['{"a":"\\ud800"}', '{"a":"x\\uDFFFy"}', '{"\\uDBFF":1}', '{"a":[{"b":"\\udc00\\ud800"}]}', '{"a":"\\ud83d"}']) {
    assert.throws(
      () => parseJsonObject(utf8.encode(text)),
      (e: unknown) => e instanceof GatewayError && e.code === 'invalid_body' && /lone surrogate/.test(e.message),
      text,
    );
  }
});

/** A call with only page and page_size set, as parseCall leaves them (text or null). */
function paging(page: string | null, pageSize: string | null): CallRequest {
  return { ...DEFAULTS, page, pageSize, params: new Map() };
}

test('parsePaging: defaults, limits and invalid_paging', async (t) => {
  const cases: Array<[string | null, string | null, number, { page: number; pageSize: number } | 'invalid_paging']> = [
    // defaults: page 1, 10 rows, or fewer when the server allows fewer
    [null, null, 1000, { page: 1, pageSize: 10 }],
    [null, null, 5, { page: 1, pageSize: 5 }],
    ['', '', 1000, { page: 1, pageSize: 10 }],
    ['3', '25', 1000, { page: 3, pageSize: 25 }],
    ['0002', '010', 1000, { page: 2, pageSize: 10 }],
    // the server's limit is inclusive
    ['1', '1000', 1000, { page: 1, pageSize: 1000 }],
    ['1', '1001', 1000, 'invalid_paging'],
    ['1', '6', 5, 'invalid_paging'],
    // positive whole numbers only
    ['0', null, 1000, 'invalid_paging'],
    ['-1', null, 1000, 'invalid_paging'],
    [null, '0', 1000, 'invalid_paging'],
    [null, '-0', 1000, 'invalid_paging'],
    ['1.0', null, 1000, 'invalid_paging'],
    ['+1', null, 1000, 'invalid_paging'],
    [' 1', null, 1000, 'invalid_paging'],
    ['1e2', null, 1000, 'invalid_paging'],
    ['x', null, 1000, 'invalid_paging'],
    [null, 'ten', 1000, 'invalid_paging'],
    ['null', null, 1000, 'invalid_paging'],
    // at most 15 digits, and the offset must stay an exact integer
    ['9007199254740', '1000', 1000, { page: 9007199254740, pageSize: 1000 }],
    ['999999999999999', '1000', 1000, 'invalid_paging'],
    ['1234567890123456', null, 1000, 'invalid_paging'],
  ];
  for (const [page, pageSize, max, want] of cases) {
    await t.test(`page=${page} page_size=${pageSize} max=${max}`, () => {
      let got: unknown;
      try {
        got = parsePaging(paging(page, pageSize), max);
      } catch (e) {
        assert.ok(e instanceof GatewayError);
        got = e.code;
      }
      assert.deepEqual(got, want);
    });
  }
});

test('parsePaging reads what parseCall kept, from the query string or the body', () => {
  assert.deepEqual(parsePaging(parseCall(get('page=4&page_size=7')), 100), { page: 4, pageSize: 7 });
  assert.deepEqual(parsePaging(parseCall(post({ page: 2, page_size: 3 })), 100), { page: 2, pageSize: 3 });
  // a JSON number that is not whole is refused like its text
  assert.throws(
    () => parsePaging(parseCall(post({ page_size: 2.5 })), 100),
    (e: unknown) => e instanceof GatewayError && e.code === 'invalid_paging',
  );
});
