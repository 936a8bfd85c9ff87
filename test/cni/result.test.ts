import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { formatResult, formatVersionResult, parseResult } from '../../src/cni/result.js';
import type { CniResult } from '../../src/cni/types.js';
import { SUPPORTED_VERSIONS } from '../../src/cni/versions.js';
import { assertCniError } from './assert-cni.js';

/** A dual-stack pod with every 1.1.0 extension filled in. */
const RESULT: CniResult = {
  interfaces: [
    { name: 'pw1a2b3c4d', mac: '5e:00:00:00:00:01', mtu: 1450 },
    {
      name: 'eth0',
      mac: '0a:58:0a:f4:00:05',
      mtu: 1450,
      sandbox: '/var/run/netns/p',
      socketPath: '/s',
      pciID: '0000:00:01.0',
    },
  ],
  ips: [
    { address: '10.244.0.5/24', gateway: '10.244.0.1', interface: 1 },
    { address: 'fd00:10:244::5/64', interface: 1 },
  ],
  routes: [
    { dst: '0.0.0.0/0', gw: '10.244.0.1', mtu: 1400, advmss: 1360, priority: 10, table: 100, scope: 0 },
    { dst: '::/0' },
  ],
  dns: {
    nameservers: ['10.96.0.10'],
    domain: 'cluster.local',
    search: ['svc.cluster.local'],
    options: ['ndots:5'],
  },
};

const JSON_0X = (v: string) =>
  `{"cniVersion":"${v}",` +
  '"interfaces":[{"name":"pw1a2b3c4d","mac":"5e:00:00:00:00:01"},' +
  '{"name":"eth0","mac":"0a:58:0a:f4:00:05","sandbox":"/var/run/netns/p"}],' +
  '"ips":[{"version":"4","address":"10.244.0.5/24","gateway":"10.244.0.1","interface":1},' +
  '{"version":"6","address":"fd00:10:244::5/64","interface":1}],' +
  '"routes":[{"dst":"0.0.0.0/0","gw":"10.244.0.1"},{"dst":"::/0"}],' +
  '"dns":{"nameservers":["10.96.0.10"],"domain":"cluster.local","search":["svc.cluster.local"],"options":["ndots:5"]}}';

const EXPECTED: Record<string, string> = {
  '0.3.0': JSON_0X('0.3.0'),
  '0.3.1': JSON_0X('0.3.1'),
  '0.4.0': JSON_0X('0.4.0'),
  '1.0.0':
    '{"cniVersion":"1.0.0",' +
    '"interfaces":[{"name":"pw1a2b3c4d","mac":"5e:00:00:00:00:01"},' +
    '{"name":"eth0","mac":"0a:58:0a:f4:00:05","sandbox":"/var/run/netns/p"}],' +
    '"ips":[{"address":"10.244.0.5/24","gateway":"10.244.0.1","interface":1},' +
    '{"address":"fd00:10:244::5/64","interface":1}],' +
    '"routes":[{"dst":"0.0.0.0/0","gw":"10.244.0.1"},{"dst":"::/0"}],' +
    '"dns":{"nameservers":["10.96.0.10"],"domain":"cluster.local","search":["svc.cluster.local"],"options":["ndots:5"]}}',
  '1.1.0':
    '{"cniVersion":"1.1.0",' +
    '"interfaces":[{"name":"pw1a2b3c4d","mac":"5e:00:00:00:00:01","mtu":1450},' +
    '{"name":"eth0","mac":"0a:58:0a:f4:00:05","mtu":1450,"sandbox":"/var/run/netns/p","socketPath":"/s","pciID":"0000:00:01.0"}],' +
    '"ips":[{"address":"10.244.0.5/24","gateway":"10.244.0.1","interface":1},' +
    '{"address":"fd00:10:244::5/64","interface":1}],' +
    '"routes":[{"dst":"0.0.0.0/0","gw":"10.244.0.1","mtu":1400,"advmss":1360,"priority":10,"table":100,"scope":0},{"dst":"::/0"}],' +
    '"dns":{"nameservers":["10.96.0.10"],"domain":"cluster.local","search":["svc.cluster.local"],"options":["ndots:5"]}}',
};

describe('formatResult: exact JSON per version', () => {
  for (const version of SUPPORTED_VERSIONS) {
    test(version, () => {
      assert.equal(JSON.stringify(formatResult(RESULT, version)), EXPECTED[version]);
    });
  }

  for (const version of SUPPORTED_VERSIONS) {
    test(`${version}: an empty result still has every key`, () => {
      const empty: CniResult = { interfaces: [], ips: [], routes: [], dns: {} };
      assert.equal(
        JSON.stringify(formatResult(empty, version)),
        `{"cniVersion":"${version}","interfaces":[],"ips":[],"routes":[],"dns":{}}`,
      );
    });
  }

  test('the output does not alias the input', () => {
    const out = formatResult(RESULT, '1.1.0') as { dns: { nameservers: string[] } };
    out.dns.nameservers.push('1.1.1.1');
    assert.deepEqual(RESULT.dns.nameservers, ['10.96.0.10']);
  });

  for (const version of ['0.2.0', '1.2.0', '']) {
    test(`refuses version ${JSON.stringify(version)}`, () => {
      assertCniError(() => formatResult(RESULT, version), 'ERR_INCOMPATIBLE_VERSION', 'cniVersion');
    });
  }
});

describe('parseResult', () => {
  for (const version of SUPPORTED_VERSIONS) {
    test(`${version}: reads back what formatResult wrote`, () => {
      const back = parseResult(JSON.parse(EXPECTED[version] ?? ''), version);
      const expected = version === '1.1.0' ? RESULT : parseResult(formatResult(RESULT, '1.0.0'), '1.0.0');
      assert.deepEqual(back, expected);
    });
  }

  test('an IPAM-style result (no interfaces, routes or dns) parses to empty lists', () => {
    assert.deepEqual(parseResult({ cniVersion: '1.0.0', ips: [{ address: '10.0.0.2/24' }] }, '1.0.0'), {
      interfaces: [],
      ips: [{ address: '10.0.0.2/24' }],
      routes: [],
      dns: {},
    });
  });

  test('0.x: a missing version key is inferred from the address', () => {
    assert.deepEqual(parseResult({ ips: [{ address: 'fd00::2/64' }] }, '0.3.1').ips, [
      { address: 'fd00::2/64' },
    ]);
  });

  test('1.x: a stray version key is ignored', () => {
    assert.deepEqual(parseResult({ ips: [{ version: 'x', address: '10.0.0.2/24' }] }, '1.0.0').ips, [
      { address: '10.0.0.2/24' },
    ]);
  });

  const bad: { label: string; json: unknown; version?: string; field: string }[] = [
    { label: 'not an object', json: [], field: 'result' },
    { label: 'interfaces not a list', json: { interfaces: 'eth0' }, field: 'result.interfaces' },
    {
      label: 'interface name a number',
      json: { interfaces: [{ name: 0 }] },
      field: 'result.interfaces[0].name',
    },
    {
      label: 'interface mtu negative',
      json: { interfaces: [{ name: 'e', mtu: -1 }] },
      field: 'result.interfaces[0].mtu',
    },
    {
      label: 'interface mtu fractional',
      json: { interfaces: [{ name: 'e', mtu: 1.5 }] },
      field: 'result.interfaces[0].mtu',
    },
    {
      label: 'interface mac a number',
      json: { interfaces: [{ name: 'e', mac: 1 }] },
      field: 'result.interfaces[0].mac',
    },
    { label: 'ip address missing', json: { ips: [{}] }, field: 'result.ips[0].address' },
    { label: 'ip address not an IP', json: { ips: [{ address: 'x/24' }] }, field: 'result.ips[0].address' },
    {
      label: 'ip prefix too long (v4)',
      json: { ips: [{ address: '10.0.0.1/33' }] },
      field: 'result.ips[0].address',
    },
    {
      label: 'ip prefix too long (v6)',
      json: { ips: [{ address: 'fd00::1/129' }] },
      field: 'result.ips[0].address',
    },
    {
      label: 'ip prefix with a leading zero',
      json: { ips: [{ address: '10.0.0.1/024' }] },
      field: 'result.ips[0].address',
    },
    {
      label: 'ip with a zone',
      json: { ips: [{ address: 'fe80::1%eth0/64' }] },
      field: 'result.ips[0].address',
    },
    {
      label: 'gateway not an IP',
      json: { ips: [{ address: '10.0.0.2/24', gateway: 'gw' }] },
      field: 'result.ips[0].gateway',
    },
    {
      label: 'gateway of the other family',
      json: { ips: [{ address: '10.0.0.2/24', gateway: 'fd00::1' }] },
      field: 'result.ips[0].gateway',
    },
    {
      label: 'interface index not an integer',
      json: { interfaces: [{ name: 'e' }], ips: [{ address: '10.0.0.2/24', interface: '0' }] },
      field: 'result.ips[0].interface',
    },
    {
      label: 'interface index out of range',
      json: { interfaces: [{ name: 'e' }], ips: [{ address: '10.0.0.2/24', interface: 1 }] },
      field: 'result.ips[0].interface',
    },
    {
      label: 'version not 4 or 6',
      json: { ips: [{ version: 4, address: '10.0.0.2/24' }] },
      version: '0.4.0',
      field: 'result.ips[0].version',
    },
    {
      label: 'version disagrees with address',
      json: { ips: [{ version: '6', address: '10.0.0.2/24' }] },
      version: '0.3.0',
      field: 'result.ips[0].version',
    },
    { label: 'route dst missing', json: { routes: [{ gw: '10.0.0.1' }] }, field: 'result.routes[0].dst' },
    {
      label: 'route dst without prefix',
      json: { routes: [{ dst: '0.0.0.0' }] },
      field: 'result.routes[0].dst',
    },
    {
      label: 'route gw of the other family',
      json: { routes: [{ dst: '::/0', gw: '10.0.0.1' }] },
      field: 'result.routes[0].gw',
    },
    {
      label: 'route table a string',
      json: { routes: [{ dst: '::/0', table: 'main' }] },
      field: 'result.routes[0].table',
    },
    {
      label: 'route priority too large',
      json: { routes: [{ dst: '::/0', priority: 2 ** 32 }] },
      field: 'result.routes[0].priority',
    },
    { label: 'dns not an object', json: { dns: [] }, field: 'result.dns' },
    { label: 'dns search not a list', json: { dns: { search: 'a' } }, field: 'result.dns.search' },
  ];
  for (const { label, json, version = '1.1.0', field } of bad) {
    test(`refuses: ${label}`, () =>
      assertCniError(() => parseResult(json, version), 'ERR_INVALID_CONFIG', field));
  }

  test('the path prefix names where the result came from', () => {
    assertCniError(
      () => parseResult({ ips: [{}] }, '1.0.0', 'prevResult'),
      'ERR_INVALID_CONFIG',
      'prevResult.ips[0].address',
    );
  });
});

describe('formatVersionResult', () => {
  test('answers in the requested version when supported', () => {
    assert.deepEqual(formatVersionResult('0.4.0'), {
      cniVersion: '0.4.0',
      supportedVersions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'],
    });
  });
  test('answers in 1.1.0 otherwise', () => {
    assert.equal(formatVersionResult('0.2.0').cniVersion, '1.1.0');
    assert.equal(formatVersionResult().cniVersion, '1.1.0');
  });
});
