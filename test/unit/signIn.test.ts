// The pieces of sign-in and browser access, table-driven, without a server: the JWT and CORS
// settings as loadConfig checks them, bindClaims (from_claim values), the bearer header, and the
// CORS policy.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bearerToken } from '../../src/auth/jwt.js';
import { ADMIN, type Caller, OPEN } from '../../src/auth/keys.js';
import { bindClaims, claimParams } from '../../src/call/claims.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { GatewayError } from '../../src/contract/errors.js';
import { corsPolicy } from '../../src/http/cors.js';
import { keyRow } from '../fixtures.js';

const SECRET = 'x'.repeat(32);

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env, () => undefined);
    return [];
  } catch (e) {
    if (e instanceof ConfigError) return e.problems;
    throw e;
  }
}

test('JWT settings: what start-up refuses, naming the variable', () => {
  const cases: Array<[Record<string, string>, RegExp | null]> = [
    [{ QUERYAPIGATE_JWT_SECRET: SECRET, QUERYAPIGATE_JWT_ROLE: 'r' }, null],
    [{ QUERYAPIGATE_JWT_SECRET: 'short', QUERYAPIGATE_JWT_ROLE: 'r' }, /QUERYAPIGATE_JWT_SECRET.*at least 32 bytes/],
    [{ QUERYAPIGATE_JWT_SECRET: SECRET }, /QUERYAPIGATE_JWT_ROLE or QUERYAPIGATE_JWT_ROLE_CLAIM/],
    [{ QUERYAPIGATE_JWT_SECRET: SECRET, QUERYAPIGATE_JWT_ROLE: 'r', QUERYAPIGATE_JWT_JWKS_URL: 'https://id.test/jwks' }, /set one, not both/],
    [{ QUERYAPIGATE_JWT_JWKS_URL: 'https://id.test/jwks', QUERYAPIGATE_JWT_ROLE: 'r' }, /needs QUERYAPIGATE_JWT_ISSUER and QUERYAPIGATE_JWT_AUDIENCE/],
    [{ QUERYAPIGATE_JWT_JWKS_URL: 'http://id.test/jwks', QUERYAPIGATE_JWT_ROLE: 'r' }, /JWKS_URL.*https:\/\//],
    [
      {
        QUERYAPIGATE_JWT_JWKS_URL: 'http://127.0.0.1:9/jwks',
        QUERYAPIGATE_JWT_ISSUER: 'i',
        QUERYAPIGATE_JWT_AUDIENCE: 'a',
        QUERYAPIGATE_JWT_ROLE_CLAIM: 'role',
      },
      null,
    ],
    [{ QUERYAPIGATE_JWT_SECRET: SECRET, QUERYAPIGATE_JWT_ROLE: 'r', QUERYAPIGATE_JWT_ALGORITHMS: 'HS256,RS256' }, /must not mix/],
    [{ QUERYAPIGATE_JWT_SECRET: SECRET, QUERYAPIGATE_JWT_ROLE: 'r', QUERYAPIGATE_JWT_ALGORITHMS: 'none' }, /never none/],
    [{ QUERYAPIGATE_JWT_SECRET: SECRET, QUERYAPIGATE_JWT_ROLE: 'r', QUERYAPIGATE_JWT_ALGORITHMS: 'RS256' }, /HMAC .* only/],
    [{ QUERYAPIGATE_CORS_ORIGINS: 'app.example.com' }, /QUERYAPIGATE_CORS_ORIGINS/],
  ];
  for (const [env, expected] of cases) {
    const found = problems(env);
    if (expected === null) assert.deepEqual(found, [], JSON.stringify(env));
    else
      assert.ok(
        found.some((p) => expected.test(p)),
        `${JSON.stringify(env)}: ${found.join(' | ')}`,
      );
  }
  const c = loadConfig({ QUERYAPIGATE_CORS_ORIGINS: 'https://App.example.com/, *', QUERYAPIGATE_JWT_AUDIENCE: 'a, b' }, () => undefined);
  assert.deepEqual(c.corsOrigins, ['https://app.example.com', '*']);
  assert.deepEqual(c.jwtAudience, ['a', 'b']);
  assert.equal(c.jwtUserClaim, 'sub');
});

test('bearerToken: the scheme case-insensitive, anything else or too long is no token', () => {
  assert.equal(bearerToken('Bearer abc.def.ghi'), 'abc.def.ghi');
  assert.equal(bearerToken('bearer abc'), 'abc');
  assert.equal(bearerToken('Basic dXNlcjpwdw=='), '');
  assert.equal(bearerToken(''), '');
  assert.equal(bearerToken(`Bearer ${'a'.repeat(9000)}`), '');
});

const user = (claims: Record<string, unknown>): Caller => ({ kind: 'key', name: 'jwt:u', key: keyRow({ name: 'jwt:u' }), claims });
const query = (values: Record<string, string>) => ({ kind: 'query' as const, get: (n: string) => values[n] });
const code = (f: () => unknown) => {
  try {
    f();
    return 'ok';
  } catch (e) {
    assert.ok(e instanceof GatewayError);
    return e.code;
  }
};

test('claimParams: the from_claim parameters the SQL uses, text or not', () => {
  assert.deepEqual(
    claimParams(['t', 'n', 'x'], {
      t: { type: 'string', from_claim: 'tenant' },
      n: { type: 'integer', from_claim: 'org' },
      x: { type: 'integer' },
      unused: { from_claim: 'a' },
    }),
    [
      { param: 't', claim: 'tenant', text: true },
      { param: 'n', claim: 'org', text: false },
    ],
  );
  assert.deepEqual(claimParams(['a'], null), []);
});

test('bindClaims: who may call, what the token gives, what the request may not', () => {
  const claimed = claimParams(['t', 'n'], { t: { type: 'string', from_claim: 'tenant' }, n: { type: 'integer', from_claim: 'org' } });
  const v = bindClaims(claimed, user({ tenant: 'acme', org: 7 }), query({ other: 'x' }));
  assert.deepEqual([v.get('t'), v.get('n'), v.get('other')], ['acme', '7', 'x']);
  const json = bindClaims(claimed, user({ tenant: 42, org: 7 }), { kind: 'json', get: () => undefined });
  assert.deepEqual([json.get('t'), json.get('n')], ['42', 7], 'a number bound to a text parameter becomes text');
  assert.equal(
    code(() => bindClaims(claimed, user({ tenant: 'acme', org: 7 }), query({ t: 'globex' }))),
    'param_from_claim',
  );
  for (const bad of [{}, { tenant: '' }, { tenant: null }, { tenant: { nested: 1 } }, { tenant: ['a'] }]) {
    assert.equal(
      code(() => bindClaims(claimed, user({ ...bad, org: 7 }), query({}))),
      'claim_missing',
      JSON.stringify(bad),
    );
  }
  assert.equal(
    code(() => bindClaims(claimed, { kind: 'key', name: 'k', key: keyRow() }, query({ t: 'acme', n: '1' }))),
    'sign_in_required',
  );
  for (const admin of [ADMIN, OPEN]) {
    const src = query({ t: 'globex' });
    assert.equal(bindClaims(claimed, admin, src), src, 'administrators supply the values themselves');
  }
});

test('corsPolicy: listed origins echoed with Vary, * without it, never credentials', () => {
  assert.equal(corsPolicy(null), null);
  const listed = corsPolicy(['https://app.example.com'])!;
  const h = listed.headers('https://APP.example.com/')!;
  assert.deepEqual(h.slice(0, 4), ['Access-Control-Allow-Origin', 'https://APP.example.com/', 'Vary', 'Origin']);
  for (const refused of ['', 'null', 'https://app.example.com.evil.test', 'http://app.example.com']) assert.equal(listed.headers(refused), null, refused);
  const pre = listed.preflight('https://evil.test');
  assert.equal(pre.status, 204);
  assert.ok(!pre.headers.includes('Access-Control-Allow-Origin'));
  const any = corsPolicy(['*'])!;
  assert.deepEqual(any.headers('https://x.test')!.slice(0, 2), ['Access-Control-Allow-Origin', '*']);
  assert.ok(!any.preflight('https://x.test').headers.includes('Vary'));
  for (const p of [listed.preflight('https://app.example.com'), any.preflight('https://x.test')]) {
    assert.ok(!p.headers.some((x) => /credentials/i.test(x)));
  }
});
