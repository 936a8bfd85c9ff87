import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InvalidConfigError } from '../../src/base/errors.js';
import { parseNetConf } from '../../src/cni/config.js';
import { parseEnv } from '../../src/cni/env.js';
import { toCniErrorObject } from '../../src/cni/errors.js';

/** Runs `fn`, which must throw, and returns the CNI error object the runtime would receive. */
function answerFor(fn: () => unknown, cniVersion = '1.1.0') {
  try {
    fn();
  } catch (err) {
    return toCniErrorObject(err, cniVersion);
  }
  assert.fail('expected a throw');
}

describe('toCniErrorObject for the spec layer failures', () => {
  const rows: { label: string; fn: () => unknown; code: number; field: string }[] = [
    {
      label: 'unknown version',
      fn: () => parseNetConf('{"cniVersion":"0.2.0","name":"n","type":"t"}', 'ADD'),
      code: 1,
      field: 'cniVersion',
    },
    {
      label: 'CHECK too old',
      fn: () => parseNetConf('{"cniVersion":"0.3.1","name":"n","type":"t"}', 'CHECK'),
      code: 1,
      field: 'cniVersion',
    },
    {
      label: 'bad ifname',
      fn: () =>
        parseEnv({
          CNI_COMMAND: 'ADD',
          CNI_CONTAINERID: 'c',
          CNI_NETNS: '/n',
          CNI_IFNAME: 'a:b',
          CNI_PATH: '/p',
        }),
      code: 4,
      field: 'CNI_IFNAME',
    },
    { label: 'missing command', fn: () => parseEnv({}), code: 4, field: 'CNI_COMMAND' },
    {
      label: 'undecodable stdin',
      fn: () => parseNetConf('{', 'ADD'),
      code: 6,
      field: 'network configuration',
    },
    {
      label: 'missing name',
      fn: () => parseNetConf('{"cniVersion":"1.0.0","type":"t"}', 'ADD'),
      code: 7,
      field: 'name',
    },
    {
      label: 'bad prevResult',
      fn: () =>
        parseNetConf(
          '{"cniVersion":"1.0.0","name":"n","type":"t","prevResult":{"ips":[{"address":"x"}]}}',
          'DEL',
        ),
      code: 7,
      field: 'prevResult.ips[0].address',
    },
  ];
  for (const { label, fn, code, field } of rows) {
    test(`${label} -> code ${code}`, () => {
      const obj = answerFor(fn);
      assert.equal(obj.code, code);
      assert.equal(obj.cniVersion, '1.1.0');
      assert.ok(obj.msg.includes(field), `msg ${JSON.stringify(obj.msg)} should name ${field}`);
    });
  }

  test('the cause of a decode error becomes details', () => {
    const obj = answerFor(() => parseNetConf('{"a":', 'ADD'), '1.0.0');
    assert.equal(obj.code, 6);
    assert.equal(obj.cniVersion, '1.0.0');
    assert.equal(typeof obj.details, 'string');
    assert.ok((obj.details ?? '').length > 0);
  });

  test('a validation error without a cause has no details key', () => {
    const obj = answerFor(() => parseEnv({ CNI_COMMAND: 'NOPE' }));
    assert.deepEqual(Object.keys(obj).sort(), ['cniVersion', 'code', 'msg']);
  });

  test('explicit details win over the cause', () => {
    const err = new InvalidConfigError('mtu: too small', {
      cause: new Error('x'),
      details: 'min 68',
    });
    assert.deepEqual(toCniErrorObject(err, '0.4.0'), {
      cniVersion: '0.4.0',
      code: 7,
      msg: 'mtu: too small',
      details: 'min 68',
    });
  });

  test('a foreign error becomes code 100', () => {
    const obj = toCniErrorObject(new TypeError('boom'), '1.1.0');
    assert.equal(obj.code, 100);
    assert.ok(obj.msg.includes('boom'));
    assert.equal(toCniErrorObject('plain', '1.1.0').code, 100);
  });
});
