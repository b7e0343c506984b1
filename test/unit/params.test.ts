// Tests for parameter rules: save-time normalisation, the per-call binder's coercion and every message.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GatewayError, statusOf } from '../../src/contract/errors.js';
import { compileBinder, type ParamSource } from '../../src/call/binder.js';
import { normalizeParameters, toPublicRule } from '../../src/call/paramRules.js';
import { formatG, type ParamRule } from '../../src/call/paramValues.js';

function query(values: Record<string, string>): ParamSource {
  return { kind: 'query', get: (name) => (Object.hasOwn(values, name) ? values[name] : undefined) };
}

function json(values: Record<string, unknown>): ParamSource {
  return { kind: 'json', get: (name) => (Object.hasOwn(values, name) ? values[name] : undefined) };
}

/** The rules for `definitions`, asserting they are valid and every name is a placeholder. */
function rulesFor(definitions: Record<string, unknown>): Record<string, ParamRule> {
  const { rules, errors } = normalizeParameters(definitions, Object.keys(definitions));
  assert.deepEqual(errors, {});
  return rules;
}

/** Binds one value for a parameter `p` declared as `definition`; returns the value or the error text. */
function bindOne(definition: unknown, source: ParamSource): unknown {
  const bind = compileBinder(['p'], rulesFor({ p: definition }));
  try {
    return bind(source)[0];
  } catch (error) {
    assert.ok(error instanceof GatewayError);
    return `${error.code}: ${error.extras?.errors?.p}`;
  }
}

const INVALID = (message: string): string => `param_invalid: ${message}`;

test('query-string coercion table', async (t) => {
  const cases: [unknown, string, unknown][] = [
    // integer
    ['int', '7', 7],
    ['int', '-7', -7],
    ['int', '+7', 7],
    ['int', '007', 7],
    ['int', '0', 0],
    ['integer', '9007199254740991', 9007199254740991],
    ['int', '9007199254740992', 9007199254740992n],
    ['int', '-9007199254740992', -9007199254740992n],
    ['int', '9223372036854775807', 9223372036854775807n],
    ['int', '-9223372036854775808', -9223372036854775808n],
    ['int', '9223372036854775808', INVALID('must be a 64-bit integer')],
    ['int', '-9223372036854775809', INVALID('must be a 64-bit integer')],
    ['int', '99999999999999999999999', INVALID('must be a 64-bit integer')],
    ['int', '000000000000000000000000001', 1],
    ['int', '1.5', INVALID('must be an integer')],
    ['int', '1e3', INVALID('must be an integer')],
    ['int', ' 7', INVALID('must be an integer')],
    ['int', '7 ', INVALID('must be an integer')],
    ['int', '1_000', INVALID('must be an integer')],
    ['int', '0x10', INVALID('must be an integer')],
    ['int', '', INVALID('must be an integer')],
    ['int', 'abc', INVALID('must be an integer')],
    ['int', '-', INVALID('must be an integer')],
    // number
    ['float', '1.5', 1.5],
    ['number', '-0.25', -0.25],
    ['float', '.5', 0.5],
    ['float', '5.', 5],
    ['float', '1e3', 1000],
    ['float', '1E-2', 0.01],
    ['float', '42', 42],
    ['float', 'nan', INVALID('must be a number')],
    ['float', 'inf', INVALID('must be a number')],
    ['float', 'Infinity', INVALID('must be a number')],
    ['float', '1e999', INVALID('must be a number')],
    ['float', '', INVALID('must be a number')],
    ['float', ' 1', INVALID('must be a number')],
    ['float', '0x10', INVALID('must be a number')],
    ['float', '1.2.3', INVALID('must be a number')],
    // boolean
    ['bool', 'true', true],
    ['bool', 'TRUE', true],
    ['bool', 'True', true],
    ['bool', '1', true],
    ['bool', 'yes', true],
    ['boolean', 'YES', true],
    ['bool', 'false', false],
    ['bool', 'False', false],
    ['bool', '0', false],
    ['bool', 'no', false],
    ['bool', 'NO', false],
    ['bool', 'on', INVALID('must be true or false')],
    ['bool', 't', INVALID('must be true or false')],
    ['bool', '2', INVALID('must be true or false')],
    ['bool', '', INVALID('must be true or false')],
    ['bool', 'truee', INVALID('must be true or false')],
    // string and untyped: text as sent
    ['str', 'hello', 'hello'],
    ['string', '', ''],
    ['str', ' 7 ', ' 7 '],
    [{}, '42', '42'],
    [{ type: null }, 'x', 'x'],
  ];
  for (const [definition, text, want] of cases) {
    await t.test(`${JSON.stringify(definition)} ${JSON.stringify(text)}`, () => {
      assert.deepEqual(bindOne(definition, query({ p: text })), want);
    });
  }
});

test('JSON coercion table', async (t) => {
  const cases: [unknown, unknown, unknown][] = [
    ['int', 7, 7],
    ['int', -7, -7],
    ['int', 1.0, 1],
    ['int', 2 ** 53, 2n ** 53n],
    ['int', 2 ** 62, 2n ** 62n],
    ['int', -(2 ** 63), -(2n ** 63n)],
    ['int', 2 ** 63, INVALID('must be a 64-bit integer')],
    ['int', 1e300, INVALID('must be a 64-bit integer')],
    ['int', 9223372036854775807n, 9223372036854775807n],
    ['int', 9223372036854775808n, INVALID('must be a 64-bit integer')],
    ['int', 5n, 5],
    ['int', 1.5, INVALID('must be an integer')],
    ['int', true, INVALID('must be an integer')],
    ['int', false, INVALID('must be an integer')],
    ['int', '7', INVALID('must be an integer')],
    ['int', [7], INVALID('must be an integer')],
    ['float', 1.5, 1.5],
    ['float', 3, 3],
    ['float', true, INVALID('must be a number')],
    ['float', '1.5', INVALID('must be a number')],
    ['float', {}, INVALID('must be a number')],
    ['bool', true, true],
    ['bool', false, false],
    ['bool', 1, INVALID('must be true or false')],
    ['bool', 'true', INVALID('must be true or false')],
    ['str', 'x', 'x'],
    ['str', '', ''],
    ['str', 5, INVALID('must be text')],
    ['str', false, INVALID('must be text')],
    [{}, 'x', 'x'],
    [{}, 5.5, 5.5],
    [{}, true, true],
    [{}, { a: 1 }, INVALID('must be text, a number or true/false')],
    [{}, [1], INVALID('must be text, a number or true/false')],
  ];
  for (const [definition, value, want] of cases) {
    await t.test(`${JSON.stringify(definition)} ${typeof value === 'bigint' ? `${value}n` : JSON.stringify(value)}`, () => {
      assert.deepEqual(bindOne(definition, json({ p: value })), want);
    });
  }
});

test('null, absence and defaults', async (t) => {
  await t.test('required and absent', () => {
    assert.equal(bindOne('int', query({})), 'param_required: is required');
    assert.equal(bindOne('int', json({})), 'param_required: is required');
  });
  await t.test('required and explicit JSON null', () => {
    assert.equal(bindOne('int', json({ p: null })), 'param_required: must not be null');
    assert.equal(bindOne({}, json({ p: null })), 'param_required: must not be null');
  });
  await t.test('optional, absent, no default: NULL', () => {
    assert.equal(bindOne({ type: 'int', required: false }, query({})), null);
    assert.equal(bindOne({ type: 'int', required: false }, json({ p: null })), null);
  });
  await t.test('default fills an absent value and makes the parameter optional', () => {
    assert.equal(bindOne({ type: 'int', default: 5 }, query({})), 5);
    assert.equal(bindOne({ type: 'int', default: 5 }, json({})), 5);
    assert.equal(bindOne({ type: 'int', default: 5 }, query({ p: '6' })), 6);
  });
  await t.test('explicit null with a default binds NULL (as the reference)', () => {
    assert.equal(bindOne({ type: 'int', default: 5 }, json({ p: null })), null);
  });
  await t.test('a text default is coerced at save time', () => {
    const rules = rulesFor({ p: { type: 'int', default: '12' } });
    assert.equal(rules.p.default, 12);
    assert.equal(bindOne({ type: 'bool', default: 'yes' }, query({})), true);
  });
  await t.test('a default past 2^53 is stored as given and bound exactly', () => {
    const rules = rulesFor({ p: { type: 'int', default: '9223372036854775807' } });
    assert.equal(rules.p.default, '9223372036854775807');
    assert.deepEqual(compileBinder(['p'], rules)(query({})), [9223372036854775807n]);
  });
});

test('rule violations and their messages', async (t) => {
  const cases: [unknown, ParamSource, unknown][] = [
    [{ type: 'str', enum: ['G', 'PG', 'R'] }, query({ p: 'PG' }), 'PG'],
    [{ type: 'str', enum: ['G', 'PG', 'R'] }, query({ p: 'X' }), INVALID('must be one of: G, PG, R')],
    [{ type: 'int', enum: [1, 2] }, query({ p: '2' }), 2],
    [{ type: 'int', enum: ['1', '2'] }, json({ p: 2 }), 2],
    [{ type: 'int', enum: [1, 2] }, query({ p: '3' }), INVALID('must be one of: 1, 2')],
    [{ enum: [1, 2] }, query({ p: '1' }), INVALID('must be one of: 1, 2')],
    [{ enum: [1, 2] }, json({ p: 1 }), 1],
    [{ type: 'int', min: 1, max: 600 }, query({ p: '1' }), 1],
    [{ type: 'int', min: 1, max: 600 }, query({ p: '600' }), 600],
    [{ type: 'int', min: 1, max: 600 }, query({ p: '0' }), INVALID('must be at least 1')],
    [{ type: 'int', min: 1, max: 600 }, query({ p: '601' }), INVALID('must be at most 600')],
    [{ type: 'int', max: 10 }, query({ p: '9223372036854775807' }), INVALID('must be at most 10')],
    [{ type: 'float', min: 0.5 }, query({ p: '0.25' }), INVALID('must be at least 0.5')],
    [{ type: 'float', max: 1234567 }, json({ p: 2e6 }), INVALID('must be at most 1.23457e+06')],
    [{ min: 5 }, query({ p: '1' }), '1'], // untyped text is not a number
    [{ min: 5 }, json({ p: 1 }), INVALID('must be at least 5')],
    [{ type: 'str', min_length: 2, max_length: 4 }, query({ p: 'ab' }), 'ab'],
    [{ type: 'str', min_length: 2 }, query({ p: 'a' }), INVALID('must be at least 2 characters long')],
    [{ type: 'str', max_length: 4 }, query({ p: 'abcde' }), INVALID('must be at most 4 characters long')],
    [{ type: 'str', max_length: 2 }, query({ p: '😀😀' }), '😀😀'], // code points, not UTF-16 units
    [{ type: 'str', min_length: 3 }, query({ p: '😀😀' }), INVALID('must be at least 3 characters long')],
    [{ type: 'str', pattern: '[a-z]+' }, query({ p: 'abc' }), 'abc'],
    [{ type: 'str', pattern: '[a-z]+' }, query({ p: 'abc1' }), INVALID('must match the pattern [a-z]+')],
    [{ type: 'str', pattern: '[a-z]+' }, query({ p: '1abc' }), INVALID('must match the pattern [a-z]+')],
    [{ type: 'str', pattern: 'a|b' }, query({ p: 'ab' }), INVALID('must match the pattern a|b')],
    [{ type: 'str', pattern: 'a|b' }, query({ p: 'b' }), 'b'],
    [{ type: 'str', pattern: '.' }, query({ p: '😀' }), '😀'],
    // type failure is reported before rules
    [{ type: 'int', min: 1, enum: [1] }, query({ p: 'x' }), INVALID('must be an integer')],
    // enum is checked before min
    [{ type: 'int', min: 5, enum: [1, 6] }, query({ p: '2' }), INVALID('must be one of: 1, 6')],
  ];
  for (const [definition, source, want] of cases) {
    await t.test(`${JSON.stringify(definition)} ${source.kind}:${JSON.stringify(source.get('p'))}`, () => {
      assert.deepEqual(bindOne(definition, source), want);
    });
  }
});

test('every violation is reported at once', () => {
  const rules = rulesFor({
    id: 'int',
    rating: { type: 'str', enum: ['G', 'PG', 'R'] },
    max_length: { type: 'int', max: 600 },
    flag: 'bool',
    title: { type: 'str', required: false, pattern: '[A-Za-z ]+' },
  });
  const bind = compileBinder(['rating', 'id', 'max_length', 'flag', 'title', 'extra'], rules);
  assert.throws(
    () => bind(query({ rating: 'X', max_length: '700', flag: 'maybe', title: 'a1' })),
    (error: unknown) => {
      assert.ok(error instanceof GatewayError);
      assert.equal(error.code, 'param_invalid');
      assert.equal(statusOf(error.code), 400);
      assert.equal(
        error.message,
        'Invalid parameters: id is required; rating must be one of: G, PG, R; max_length must be at most 600; ' +
          'flag must be true or false; title must match the pattern [A-Za-z ]+; extra is required',
      );
      assert.deepEqual(error.extras, {
        errors: {
          id: 'is required',
          rating: 'must be one of: G, PG, R',
          max_length: 'must be at most 600',
          flag: 'must be true or false',
          title: 'must match the pattern [A-Za-z ]+',
          extra: 'is required',
        },
      });
      return true;
    },
  );
});

test('param_required only when every problem is a missing value', () => {
  const bind = compileBinder(['a', 'b', 'c'], rulesFor({ a: 'int', b: 'str' }));
  assert.throws(
    () => bind(json({ b: null })),
    (e: unknown) => {
      assert.ok(e instanceof GatewayError);
      assert.equal(e.code, 'param_required');
      assert.equal(e.message, 'Invalid parameters: a is required; b must not be null; c is required');
      return true;
    },
  );
  assert.throws(
    () => bind(json({ a: 'x' })),
    (e: unknown) => {
      assert.ok(e instanceof GatewayError);
      assert.equal(e.code, 'param_invalid');
      assert.deepEqual(e.extras?.errors, { a: 'must be an integer', b: 'is required', c: 'is required' });
      return true;
    },
  );
});

test('binder output: placeholder order, undeclared pass-through, unused rules ignored', () => {
  const rules = rulesFor({ a: 'int', b: { type: 'bool', default: false } });
  const bind = compileBinder(['u', 'b', 'a'], rules);
  assert.deepEqual(bind(query({ a: '3', u: 'raw text' })), ['raw text', false, 3]);
  assert.deepEqual(bind(json({ a: 3, u: 4.5, b: true })), [4.5, true, 3]);
  // undeclared: JSON null is bound, an object is refused
  assert.deepEqual(bind(json({ a: 3, u: null })), [null, false, 3]);
  assert.throws(() => bind(json({ a: 3, u: { x: 1 } })), /u must be text, a number or true\/false/);
  // a rule for a name the SQL does not use is not enforced
  const loose = compileBinder(['a'], { ...rules, z: { type: 'integer', required: true } });
  assert.deepEqual(loose(query({ a: '1' })), [1]);
  // no placeholders
  assert.deepEqual(compileBinder([], {})(query({ anything: 'x' })), []);
});

test('the binder reuses compiled state: many calls, independent results', () => {
  const bind = compileBinder(['a'], rulesFor({ a: { type: 'str', pattern: '[0-9]+' } }));
  for (let i = 0; i < 50; i++) {
    assert.deepEqual(bind(query({ a: String(i) })), [String(i)]);
    assert.throws(() => bind(query({ a: `x${i}` })), /must match the pattern/);
  }
});

test('a stored pattern that no longer compiles fails closed', () => {
  const bind = compileBinder(['a'], { a: { type: 'string', required: true, pattern: '(' } });
  assert.throws(() => bind(query({ a: 'x' })), /a must match the pattern \(/);
});

test('normalizeParameters: valid definitions in long form', () => {
  const { rules, errors } = normalizeParameters(
    {
      id: 'int',
      price: 'FLOAT',
      name: 'str',
      on: 'boolean',
      any: {},
      rating: { type: 'str', enum: ['G', 'PG'], default: 'PG', description: 'MPAA rating' },
      n: { type: 'number', min: 1, max: 2.5 },
      title: { type: 'string', required: false, min_length: 2, max_length: 9, pattern: '[A-Za-z ]+' },
      opt: { type: 'int', required: false, default: 3 },
    },
    ['id', 'price', 'name', 'on', 'any', 'rating', 'n', 'title', 'opt'],
  );
  assert.deepEqual(errors, {});
  assert.deepEqual(rules, {
    id: { type: 'integer', required: true },
    price: { type: 'number', required: true },
    name: { type: 'string', required: true },
    on: { type: 'boolean', required: true },
    any: { type: null, required: true },
    rating: { type: 'string', required: false, default: 'PG', enum: ['G', 'PG'], description: 'MPAA rating' },
    n: { type: 'number', required: true, min: 1, max: 2.5 },
    title: { type: 'string', required: false, min_length: 2, max_length: 9, pattern: '[A-Za-z ]+' },
    opt: { type: 'integer', required: false, default: 3 },
  });
  assert.deepEqual(Object.keys(rules.rating), ['type', 'required', 'default', 'enum', 'description']);
});

test('normalizeParameters: every kind of bad definition', async (t) => {
  const cases: [unknown, string][] = [
    ['decimal', "has unknown type 'decimal' (use int, float, str or bool)"],
    [{ type: 'date' }, "has unknown type 'date' (use int, float, str or bool)"],
    [
      { type: 'int', nullable: true, x: 1 },
      'has unknown rule(s): nullable, x (allowed: default, description, enum, from_claim, max, max_length, min, min_length, pattern, required, type)',
    ],
    // from_claim (JWT sign-in): the token always gives the value, so never a default nor optional.
    [{ from_claim: 'sub', default: 'x' }, "cannot have both 'from_claim' and a 'default'"],
    [{ from_claim: 'sub', required: false }, "with 'from_claim' is always required"],
    [{ from_claim: 7 }, "'from_claim' must be a claim name of 1-200 characters"],
    [{ from_claim: 'c'.repeat(201) }, "'from_claim' must be a claim name of 1-200 characters"],
    [5, "must be a type name such as 'int' or an object of rules"],
    [['int'], "must be a type name such as 'int' or an object of rules"],
    [null, "must be a type name such as 'int' or an object of rules"],
    [{ type: 'int', required: 'yes' }, "'required' must be true or false"],
    [{ description: 5 }, "'description' must be text"],
    [{ type: 'str', min: 1 }, "'min' only applies to numbers (use min_length/max_length for text)"],
    [{ type: 'bool', max: 1 }, "'max' only applies to numbers (use min_length/max_length for text)"],
    [{ type: 'int', min: '1' }, "'min' must be a number"],
    [{ type: 'int', max: true }, "'max' must be a number"],
    [{ type: 'int', min: 5, max: 1 }, "'min' must not be greater than 'max'"],
    [{ type: 'int', min_length: 1 }, "'min_length' only applies to text"],
    [{ type: 'str', max_length: -1 }, "'max_length' must be a non-negative integer"],
    [{ type: 'str', min_length: 1.5 }, "'min_length' must be a non-negative integer"],
    [{ type: 'str', min_length: 5, max_length: 2 }, "'min_length' must not be greater than 'max_length'"],
    [{ type: 'int', pattern: '\\d+' }, "'pattern' only applies to text"],
    [{ type: 'str', pattern: 'a'.repeat(501) }, "'pattern' must be text of at most 500 characters"],
    [{ type: 'str', pattern: 5 }, "'pattern' must be text of at most 500 characters"],
    [{ type: 'str', enum: [] }, "'enum' must be a non-empty list"],
    [{ type: 'str', enum: 'G' }, "'enum' must be a non-empty list"],
    [{ type: 'int', enum: [1, 'x'] }, "has an 'enum' value that must be an integer"],
    [{ type: 'int', required: true, default: 1 }, "cannot be both 'required' and have a 'default'"],
    [{ type: 'int', default: 'x' }, "has a 'default' that must be an integer"],
    [{ type: 'int', default: null }, "has a 'default' that must be an integer"],
    [{ default: null }, "has a 'default' that must be text, a number or true/false"],
    [{ type: 'int', max: 5, default: 6 }, "has a 'default' that must be at most 5"],
    [{ type: 'str', enum: ['a'], default: 'b' }, "has a 'default' that must be one of: a"],
    [{ type: 'str', pattern: '[0-9]+', default: 'x' }, "has a 'default' that must match the pattern [0-9]+"],
    [{ type: 'int', default: '99999999999999999999' }, "has a 'default' that must be a 64-bit integer"],
  ];
  for (const [definition, message] of cases) {
    await t.test(JSON.stringify(definition).slice(0, 80), () => {
      const { rules, errors } = normalizeParameters({ p: definition }, ['p']);
      assert.deepEqual(errors, { p: message });
      assert.deepEqual(rules, {});
    });
  }
  await t.test('an invalid regular expression', () => {
    const { errors } = normalizeParameters({ p: { type: 'str', pattern: '(' } }, ['p']);
    assert.match(errors.p, /^'pattern' is not a valid regular expression \(.+\)$/);
  });
  await t.test('a pattern of exactly 500 characters is fine', () => {
    const { errors } = normalizeParameters({ p: { type: 'str', pattern: 'a'.repeat(500) } }, ['p']);
    assert.deepEqual(errors, {});
  });
});

test('normalizeParameters: names, usage and the map itself', () => {
  const { rules, errors } = normalizeParameters({ ok: 'int', '1bad': 'int', 'with-dash': 'int', unused: 'str', __proto__x: 'int' }, ['ok', '__proto__x']);
  assert.deepEqual(Object.keys(rules), ['ok', '__proto__x']);
  assert.deepEqual(errors, {
    '1bad': 'is not a valid parameter name (letters, digits and underscores; not starting with a digit)',
    'with-dash': 'is not a valid parameter name (letters, digits and underscores; not starting with a digit)',
    unused: 'is declared but not used in the SQL',
  });
  // every marker must be declared (versions saved before this rule still bind undeclared ones)
  assert.deepEqual(normalizeParameters(undefined, ['a']), {
    rules: {},
    errors: { a: 'is used in the SQL but not declared in "parameters"' },
    undeclared: ['a'],
    unused: [],
  });
  assert.deepEqual(normalizeParameters(null, []), { rules: {}, errors: {}, undeclared: [], unused: [] });
  const both = normalizeParameters({ id: 'int', ghost: 'int' }, ['aid', 'id', 'b']);
  assert.deepEqual(both.undeclared, ['aid', 'b']);
  assert.deepEqual(both.unused, ['ghost']);
  assert.deepEqual(Object.keys(both.errors), ['ghost', 'aid', 'b']);
  assert.deepEqual(normalizeParameters(['id'], ['id']).errors, { parameters: 'must be a JSON object' });
  assert.deepEqual(normalizeParameters('id', ['id']).errors, { parameters: 'must be a JSON object' });
});

test('normalizeParameters: a parameter named __proto__ is an ordinary own key', () => {
  const input = JSON.parse('{"__proto__": "int"}');
  const { rules, errors } = normalizeParameters(input, ['__proto__']);
  assert.deepEqual(errors, {});
  assert.ok(Object.hasOwn(rules, '__proto__'));
  assert.equal(Object.getPrototypeOf(rules), Object.prototype);
  assert.equal(JSON.stringify(rules), '{"__proto__":{"type":"integer","required":true}}');
});

test('toPublicRule', () => {
  assert.deepEqual(toPublicRule({ type: 'integer', required: true }), { type: 'integer', required: true });
  assert.deepEqual(toPublicRule({ type: null, required: false }), { type: null, required: false });
  const full: ParamRule = {
    type: 'string',
    required: false,
    default: 'PG',
    enum: ['G', 'PG'],
    min_length: 1,
    max_length: 2,
    pattern: '[A-Z]+',
    description: 'rating',
  };
  assert.deepEqual(toPublicRule(full), full);
  assert.deepEqual(Object.keys(toPublicRule(full)), ['type', 'required', 'default', 'enum', 'min_length', 'max_length', 'pattern', 'description']);
  assert.deepEqual(Object.keys(toPublicRule({ type: 'number', required: true, max: 1, min: 0 })), ['type', 'required', 'min', 'max']);
  // a falsy default is still present
  assert.deepEqual(toPublicRule({ type: 'integer', required: false, default: 0 }), {
    type: 'integer',
    required: false,
    default: 0,
  });
});

test("formatG matches Python's format(x, 'g')", () => {
  const cases: [number, string][] = [
    [0, '0'],
    [1, '1'],
    [600, '600'],
    [1.5, '1.5'],
    [-2.25, '-2.25'],
    [0.0001, '0.0001'],
    [0.00001, '1e-05'],
    [123456, '123456'],
    [1234567, '1.23457e+06'],
    [999999.5, '1e+06'],
    [1e20, '1e+20'],
    [0.1 + 0.2, '0.3'],
    [1e-10, '1e-10'],
    [-1e100, '-1e+100'],
  ];
  for (const [x, want] of cases) assert.equal(formatG(x), want, String(x));
});

test('compileBinder reads stored definitions leniently', () => {
  // short forms, as a saved query might hold them
  const bind = compileBinder(['id', 'on', 'x', 'y'], {
    id: 'int',
    on: { type: 'bool', default: 'no' },
    x: 'nonsense',
    y: { type: 'int', min: 'broken' },
  } as unknown as Record<string, ParamRule>);
  assert.deepEqual(bind(query({ id: '5', x: 'a', y: 'b' })), [5, false, 'a', 'b']);
  assert.throws(() => bind(query({ id: 'z', x: 'a', y: 'b' })), /id must be an integer/);
  // no rules at all
  assert.deepEqual(compileBinder(['a'], null)(query({ a: 'v' })), ['v']);
});

test('type names are looked up safely', () => {
  for (const type of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
    const { errors } = normalizeParameters({ p: { type } }, ['p']);
    assert.deepEqual(errors, { p: `has unknown type '${type}' (use int, float, str or bool)` });
  }
  assert.deepEqual(compileBinder(['p'], { p: 'constructor' } as unknown as Record<string, ParamRule>)(json({ p: 1 })), [1]);
});

test('patterns: Unicode mode when possible, legacy syntax still accepted', () => {
  // `\-` outside a class is invalid in Unicode mode but fine in legacy mode
  assert.deepEqual(bindOne({ type: 'str', pattern: 'a\\-b' }, query({ p: 'a-b' })), 'a-b');
  // Unicode mode: `.` is one code point
  assert.deepEqual(bindOne({ type: 'str', pattern: 'x.y' }, query({ p: 'x😀y' })), 'x😀y');
});
