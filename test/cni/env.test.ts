import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseCniArgs, parseEnv } from '../../src/cni/env.js';
import type { CniCommand } from '../../src/cni/types.js';
import { assertCniError } from './assert-cni.js';

const FULL = {
  CNI_CONTAINERID: 'abc123',
  CNI_NETNS: '/var/run/netns/pod-1',
  CNI_IFNAME: 'eth0',
  CNI_PATH: '/opt/cni/bin:/usr/lib/cni',
  CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0',
};

function envFor(command: CniCommand, overrides: Record<string, string | undefined> = {}) {
  return { CNI_COMMAND: command, ...FULL, ...overrides };
}

const REQUIRED: Record<CniCommand, string[]> = {
  ADD: ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'],
  CHECK: ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'],
  DEL: ['CNI_CONTAINERID', 'CNI_IFNAME', 'CNI_PATH'],
  VERSION: [],
  GC: [],
  STATUS: [],
};
const ATTACHMENT_COMMANDS = ['ADD', 'CHECK', 'DEL'] as const;

describe('parseEnv: CNI_COMMAND', () => {
  for (const value of [undefined, '', 'add', 'Add', 'UPDATE', 'ADD ', 'VERSION\n']) {
    test(`refuses ${JSON.stringify(value)}`, () => {
      assertCniError(() => parseEnv({ ...FULL, CNI_COMMAND: value }), 'ERR_INVALID_ENV', 'CNI_COMMAND');
    });
  }
});

describe('parseEnv: required variables per command', () => {
  for (const command of Object.keys(REQUIRED) as CniCommand[]) {
    for (const name of REQUIRED[command]) {
      for (const absent of [undefined, '']) {
        test(`${command} without ${name} (${JSON.stringify(absent)})`, () => {
          assertCniError(() => parseEnv(envFor(command, { [name]: absent })), 'ERR_INVALID_ENV', name);
        });
      }
    }
  }

  test('all missing variables are named at once', () => {
    assertCniError(
      () => parseEnv({ CNI_COMMAND: 'ADD' }),
      'ERR_INVALID_ENV',
      'CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_PATH',
    );
  });

  for (const command of ['VERSION', 'GC', 'STATUS'] as const) {
    test(`${command} needs nothing but CNI_COMMAND`, () => {
      assert.deepEqual(parseEnv({ CNI_COMMAND: command }), {
        command,
        containerId: undefined,
        netns: undefined,
        ifname: undefined,
        args: new Map(),
        path: [],
      });
    });
    test(`${command} ignores attachment variables, even malformed ones`, () => {
      const env = parseEnv({
        CNI_COMMAND: command,
        CNI_CONTAINERID: '-bad',
        CNI_IFNAME: 'a/b',
        CNI_NETNS: 'rel',
      });
      assert.equal(env.containerId, undefined);
      assert.equal(env.ifname, undefined);
      assert.equal(env.netns, undefined);
    });
    test(`${command} reads CNI_PATH when given`, () => {
      assert.deepEqual(parseEnv({ CNI_COMMAND: command, CNI_PATH: '/opt/cni/bin' }).path, ['/opt/cni/bin']);
    });
  }
});

describe('parseEnv: valid input', () => {
  for (const command of ['ADD', 'CHECK', 'DEL'] as const) {
    test(`${command} with everything`, () => {
      const env = parseEnv(envFor(command));
      assert.equal(env.command, command);
      assert.equal(env.containerId, 'abc123');
      assert.equal(env.netns, '/var/run/netns/pod-1');
      assert.equal(env.ifname, 'eth0');
      assert.deepEqual(env.path, ['/opt/cni/bin', '/usr/lib/cni']);
      assert.equal(env.args.get('K8S_POD_NAME'), 'web-0');
      assert.equal(env.args.get('IgnoreUnknown'), '1');
    });
  }

  for (const absent of [undefined, '']) {
    test(`DEL without CNI_NETNS (${JSON.stringify(absent)}) has netns undefined`, () => {
      const env = parseEnv(envFor('DEL', { CNI_NETNS: absent }));
      assert.equal(env.command, 'DEL');
      assert.equal(env.netns, undefined);
    });
  }

  test('accepted names at the limits', () => {
    for (const ifname of ['a'.repeat(15), 'eth0.100', 'net@1', 'x']) {
      assert.equal(parseEnv(envFor('ADD', { CNI_IFNAME: ifname })).ifname, ifname);
    }
    for (const id of ['a', '0', 'A_b.c-d', `${'f'.repeat(64)}`]) {
      assert.equal(parseEnv(envFor('ADD', { CNI_CONTAINERID: id })).containerId, id);
    }
  });

  test('CNI_PATH drops empty entries', () => {
    assert.deepEqual(parseEnv(envFor('ADD', { CNI_PATH: ':/a::/b:' })).path, ['/a', '/b']);
  });

  test('an inherited key is not a variable', () => {
    const env = Object.create({ CNI_COMMAND: 'VERSION' }) as Record<string, string>;
    assertCniError(() => parseEnv(env), 'ERR_INVALID_ENV', 'CNI_COMMAND');
  });
});

describe('parseEnv: malformed values', () => {
  const bad: { name: string; value: string; reason: string }[] = [
    { name: 'CNI_CONTAINERID', value: '-abc', reason: 'invalid characters' },
    { name: 'CNI_CONTAINERID', value: '_abc', reason: 'invalid characters' },
    { name: 'CNI_CONTAINERID', value: '.abc', reason: 'invalid characters' },
    { name: 'CNI_CONTAINERID', value: 'a b', reason: 'invalid characters' },
    { name: 'CNI_CONTAINERID', value: 'a/b', reason: 'invalid characters' },
    { name: 'CNI_CONTAINERID', value: 'a:b', reason: 'invalid characters' },
    { name: 'CNI_CONTAINERID', value: 'ab\n', reason: 'invalid characters' },
    { name: 'CNI_CONTAINERID', value: 'pödchen', reason: 'invalid characters' },
    { name: 'CNI_IFNAME', value: 'a'.repeat(16), reason: 'longer than 15 bytes' },
    { name: 'CNI_IFNAME', value: 'é'.repeat(8), reason: 'longer than 15 bytes' },
    { name: 'CNI_IFNAME', value: '.', reason: 'not an interface name' },
    { name: 'CNI_IFNAME', value: '..', reason: 'not an interface name' },
    { name: 'CNI_IFNAME', value: 'eth/0', reason: 'contains' },
    { name: 'CNI_IFNAME', value: 'eth:0', reason: 'contains' },
    { name: 'CNI_IFNAME', value: 'eth 0', reason: 'contains' },
    { name: 'CNI_IFNAME', value: 'eth\t0', reason: 'contains' },
    { name: 'CNI_IFNAME', value: 'eth\u00a00', reason: 'contains' },
    { name: 'CNI_IFNAME', value: 'eth\u20280', reason: 'contains' },
    { name: 'CNI_IFNAME', value: 'eth\u00000', reason: 'contains' },
    { name: 'CNI_NETNS', value: 'var/run/netns/x', reason: 'not an absolute path' },
    { name: 'CNI_NETNS', value: './x', reason: 'not an absolute path' },
    { name: 'CNI_NETNS', value: '/var/run/netns/x\u0000y', reason: 'NUL' },
    { name: 'CNI_ARGS', value: 'A', reason: 'not KEY=VALUE' },
    { name: 'CNI_ARGS', value: 'A=B=C', reason: 'not KEY=VALUE' },
    { name: 'CNI_ARGS', value: 'A=B;', reason: 'not KEY=VALUE' },
    { name: 'CNI_ARGS', value: ';A=B', reason: 'not KEY=VALUE' },
    { name: 'CNI_ARGS', value: 'A=B;;C=D', reason: 'not KEY=VALUE' },
    { name: 'CNI_ARGS', value: '=B', reason: 'empty key' },
    { name: 'CNI_PATH', value: '/opt/cni\u0000/bin', reason: 'NUL' },
  ];
  for (const command of ATTACHMENT_COMMANDS) {
    for (const { name, value, reason } of bad) {
      test(`${command} ${name}=${JSON.stringify(value)}`, () => {
        assertCniError(() => parseEnv(envFor(command, { [name]: value })), 'ERR_INVALID_ENV', `${name}: `);
        assertCniError(() => parseEnv(envFor(command, { [name]: value })), 'ERR_INVALID_ENV', reason);
      });
    }
  }

  test('the brief example message', () => {
    assertCniError(
      () => parseEnv(envFor('ADD', { CNI_IFNAME: 'averyveryverylongname' })),
      'ERR_INVALID_ENV',
      'CNI_IFNAME: longer than 15 bytes',
    );
  });

  test('a hostile value is cut short in the message', () => {
    try {
      parseEnv(envFor('ADD', { CNI_CONTAINERID: `-${'x'.repeat(10_000)}` }));
      assert.fail('expected an error');
    } catch (err) {
      assert.ok(err instanceof Error && err.message.length < 200, 'message length');
    }
  });
});

describe('parseCniArgs', () => {
  test('empty and absent give an empty map', () => {
    assert.equal(parseCniArgs(undefined).size, 0);
    assert.equal(parseCniArgs('').size, 0);
  });
  test('empty values are kept and a repeated key keeps the last value', () => {
    const args = parseCniArgs('A=;B=1;B=2');
    assert.deepEqual(
      [...args],
      [
        ['A', ''],
        ['B', '2'],
      ],
    );
  });
  test('keys that look like Object.prototype members are plain keys', () => {
    const args = parseCniArgs('__proto__=x;constructor=y');
    assert.equal(args.get('__proto__'), 'x');
    assert.equal(args.get('constructor'), 'y');
  });
});
