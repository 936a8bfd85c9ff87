import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseNetConf, parseVersionRequest } from '../../src/cni/config.js';
import { SUPPORTED_VERSIONS } from '../../src/cni/versions.js';
import { assertCniError } from './assert-cni.js';
import { commandsOf, conf, PREV_1X } from './netconf-fixture.js';

describe('parseNetConf: valid configurations', () => {
  for (const version of SUPPORTED_VERSIONS) {
    for (const command of commandsOf(version)) {
      test(`${version} ${command}`, () => {
        const nc = parseNetConf(Buffer.from(conf(version, command)), command);
        assert.equal(nc.cniVersion, version);
        assert.equal(nc.name, 'podnet');
        assert.equal(nc.type, 'podwire');
        if (command === 'CHECK')
          assert.deepEqual(nc.prevResult?.ips, [
            { address: '10.244.0.5/24', gateway: '10.244.0.1', interface: 0 },
          ]);
        if (command === 'GC') assert.deepEqual(nc.validAttachments, [{ containerId: 'abc', ifname: 'eth0' }]);
      });
    }
  }

  test('optional keys are read; unknown keys pass through in raw', () => {
    const nc = parseNetConf(
      conf('1.1.0', 'ADD', {
        socket: '/run/podwire/cni.sock',
        runtimeConfig: { portMappings: [] },
        args: { cni: { ips: ['10.0.0.9'] } },
        capabilities: { portMappings: true },
        ipam: { type: 'host-local', subnet: '10.0.0.0/24' },
        dns: { nameservers: ['10.96.0.10'], search: ['svc.cluster.local'] },
        bridge: 'pw0',
        mtu: 1450,
      }),
      'ADD',
    );
    assert.equal(nc.socket, '/run/podwire/cni.sock');
    assert.deepEqual(nc.runtimeConfig, { portMappings: [] });
    assert.deepEqual(nc.args, { cni: { ips: ['10.0.0.9'] } });
    assert.deepEqual(nc.capabilities, { portMappings: true });
    assert.deepEqual(nc.ipam, { type: 'host-local', subnet: '10.0.0.0/24' });
    assert.deepEqual(nc.dns, { nameservers: ['10.96.0.10'], search: ['svc.cluster.local'] });
    assert.equal(nc.raw.bridge, 'pw0');
    assert.equal(nc.raw.mtu, 1450);
    assert.equal(nc.prevResult, undefined);
    assert.equal(nc.validAttachments, undefined);
  });

  test('a 0.4.0 prevResult is converted to the 1.x shape', () => {
    const prev = {
      cniVersion: '0.4.0',
      interfaces: [{ name: 'eth0', mac: '0a:58:0a:f4:00:05', sandbox: '/var/run/netns/p' }],
      ips: [
        { version: '4', address: '10.244.0.5/24', gateway: '10.244.0.1', interface: 0 },
        { version: '6', address: 'fd00::5/64', interface: 0 },
      ],
      routes: [],
      dns: {},
    };
    const nc = parseNetConf(conf('0.4.0', 'CHECK', { prevResult: prev }), 'CHECK');
    assert.deepEqual(nc.prevResult, {
      interfaces: [{ name: 'eth0', mac: '0a:58:0a:f4:00:05', sandbox: '/var/run/netns/p' }],
      ips: [
        { address: '10.244.0.5/24', gateway: '10.244.0.1', interface: 0 },
        { address: 'fd00::5/64', interface: 0 },
      ],
      routes: [],
      dns: {},
    });
  });

  test('DEL passes prevResult through when the runtime sends one', () => {
    const nc = parseNetConf(conf('1.0.0', 'DEL', { prevResult: PREV_1X }), 'DEL');
    assert.equal(nc.prevResult?.interfaces[0]?.name, 'eth0');
  });

  test('GC accepts the name SPEC.md 1.1.0 first printed', () => {
    const nc = parseNetConf(
      conf('1.1.0', 'GC', {
        'cni.dev/valid-attachments': undefined,
        'cni.dev/attachments': [{ containerID: 'c1', ifname: 'net1' }],
      }),
      'GC',
    );
    assert.deepEqual(nc.validAttachments, [{ containerId: 'c1', ifname: 'net1' }]);
  });

  test('GC with an empty list is valid (nothing is to be kept)', () => {
    const nc = parseNetConf(conf('1.1.0', 'GC', { 'cni.dev/valid-attachments': [] }), 'GC');
    assert.deepEqual(nc.validAttachments, []);
  });

  test('keys inherited from Object.prototype are not configuration', () => {
    // `constructor`/`toString` exist on every object; reading them must not find a "socket" or "ipam".
    const nc = parseNetConf('{"cniVersion":"1.0.0","name":"n","type":"t","__proto__":{"socket":5}}', 'ADD');
    assert.equal(nc.socket, undefined);
  });
});

describe('parseNetConf: undecodable input is ERR_DECODE', () => {
  const inputs: [string, Buffer | string][] = [
    ['empty', ''],
    ['truncated', '{"cniVersion":'],
    ['not JSON', 'cniVersion=1.0.0'],
    ['an array', '[]'],
    ['null', 'null'],
    ['a number', '42'],
    ['a string', '"podnet"'],
    ['invalid UTF-8', Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d])],
  ];
  for (const [label, input] of inputs) {
    test(label, () =>
      assertCniError(() => parseNetConf(input, 'ADD'), 'ERR_DECODE', 'network configuration'),
    );
  }
});

describe('parseVersionRequest', () => {
  test('reads the requested version', () => {
    assert.equal(parseVersionRequest('{"cniVersion":"1.1.0"}'), '1.1.0');
    assert.equal(parseVersionRequest(Buffer.from('{"cniVersion":"0.2.0"}')), '0.2.0');
  });
  test('empty stdin or no version is undefined', () => {
    assert.equal(parseVersionRequest(''), undefined);
    assert.equal(parseVersionRequest(' \n'), undefined);
    assert.equal(parseVersionRequest('{}'), undefined);
  });
  test('bad input is named', () => {
    assertCniError(() => parseVersionRequest('{'), 'ERR_DECODE', 'VERSION request');
    assertCniError(() => parseVersionRequest('[]'), 'ERR_DECODE', 'VERSION request');
    assertCniError(() => parseVersionRequest('{"cniVersion":1}'), 'ERR_INVALID_CONFIG', 'cniVersion');
  });
});
