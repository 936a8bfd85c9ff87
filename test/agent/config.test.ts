/** The agent configuration: defaults, and every bad key or value refused with its name. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DEFAULT_CONFIG, DEFAULT_OVS_BRIDGE, parseAgentConfig } from '../../src/agent/config.js';
import { PodwireError } from '../../src/base/errors.js';

describe('agent config', () => {
  test('defaults fill what is not given', () => {
    assert.deepEqual(parseAgentConfig('podCIDRs: ["10.244.1.0/24"]'), {
      ...DEFAULT_CONFIG,
      podCIDRs: ['10.244.1.0/24'],
    });
  });

  test('a full configuration is read as written', () => {
    const cfg = parseAgentConfig(
      [
        'podCIDRs: ["10.244.1.0/24", "fd00:10:244:1::/64"]',
        'datapath: linux-bridge',
        'bridge: br-pods',
        'mtu: 9000',
        'socket: /run/x/cni.sock',
        'stateDir: /var/lib/x',
        'maxParallel: 8',
      ].join('\n'),
    );
    assert.deepEqual(cfg, {
      ...DEFAULT_CONFIG,
      podCIDRs: ['10.244.1.0/24', 'fd00:10:244:1::/64'],
      datapath: 'linux-bridge',
      bridge: 'br-pods',
      mtu: 9000,
      socket: '/run/x/cni.sock',
      stateDir: '/var/lib/x',
      maxParallel: 8,
    });
  });

  test('datapath ovs: bridge br-podwire, gateway podwire-gw0, system datapath, default OVSDB socket', () => {
    const cfg = parseAgentConfig('podCIDRs: ["10.244.1.0/24"]\ndatapath: ovs');
    assert.equal(cfg.datapath, 'ovs');
    assert.equal(cfg.bridge, DEFAULT_OVS_BRIDGE);
    assert.equal(cfg.bridge, 'br-podwire');
    assert.equal(cfg.gateway, 'podwire-gw0');
    assert.equal(cfg.ovsdb, 'unix:/run/openvswitch/db.sock');
    assert.equal(cfg.ovsDatapathType, 'system');
  });

  test('datapath ovs: every OVS key read as written', () => {
    const cfg = parseAgentConfig(
      [
        'podCIDRs: ["10.244.1.0/24"]',
        'datapath: ovs',
        'bridge: br-int',
        'gateway: gw0',
        'ovsdb: unix:/tmp/ovs/db.sock',
        'ovsDatapathType: netdev',
        'ovsUnixctl: /tmp/ovs/ovs-vswitchd.ctl',
      ].join('\n'),
    );
    assert.deepEqual(
      [cfg.bridge, cfg.gateway, cfg.ovsdb, cfg.ovsDatapathType, cfg.ovsUnixctl],
      ['br-int', 'gw0', 'unix:/tmp/ovs/db.sock', 'netdev', '/tmp/ovs/ovs-vswitchd.ctl'],
    );
  });

  test('egress masquerade: on by default; off, or with noMasqueradeCIDRs (canonical), as written', () => {
    const on = parseAgentConfig('podCIDRs: ["10.0.0.0/24"]');
    assert.equal(on.egressMasquerade, true);
    assert.deepEqual(on.noMasqueradeCIDRs, []);
    assert.equal(
      parseAgentConfig('podCIDRs: ["10.0.0.0/24"]\negressMasquerade: false').egressMasquerade,
      false,
    );
    const kept = parseAgentConfig(
      'podCIDRs: ["10.0.0.0/24"]\nnoMasqueradeCIDRs: ["192.168.0.0/16", "FD00:0::/8", "172.30.0.5/32"]',
    );
    assert.deepEqual(kept.noMasqueradeCIDRs, ['192.168.0.0/16', 'fd00::/8', '172.30.0.5/32']);
  });

  const OVS = 'podCIDRs: ["10.0.0.0/24"]\ndatapath: ovs\n';
  const BAD: Array<[string, string, RegExp]> = [
    [
      'unknown key',
      'podCIDRs: ["10.0.0.0/24"]\npodCidr: x',
      /podCidr: unknown key \(did you mean podCIDRs\?\)/,
    ],
    ['misspelt key', 'podCIDR: ["10.0.0.0/24"]', /podCIDR: unknown key \(did you mean podCIDRs\?\)/],
    [
      'misspelt nested key',
      'podCIDRs: ["10.0.0.0/24"]\nbridging: {uplnk: eth0}',
      /bridging.uplnk: unknown key \(did you mean uplink\?\)/,
    ],
    ['unknown key, nothing close', 'podCIDRs: ["10.0.0.0/24"]\nbanana: 1', /banana: unknown key$/],
    ['no podCIDRs', 'bridge: x', /podCIDRs: missing/],
    [
      'socket path too long for sockaddr_un',
      `podCIDRs: ["10.0.0.0/24"]\nsocket: /run/${'x'.repeat(100)}/cni.sock`,
      /socket: \/run\/x+\/cni.sock is 114 bytes; a unix socket path holds at most 107/,
    ],
    [
      'control.sock beside the socket too long',
      `podCIDRs: ["10.0.0.0/24"]\nsocket: /run/${'x'.repeat(90)}/c.sock`,
      /socket: \/run\/x+\/control.sock is 108 bytes/,
    ],
    ['three CIDRs', 'podCIDRs: ["10.0.0.0/24", "10.1.0.0/24", "fd00::/64"]', /podCIDRs/],
    ['two IPv4 CIDRs', 'podCIDRs: ["10.0.0.0/24", "10.1.0.0/24"]', /podCIDRs: more than one IPv4/],
    ['host bits set', 'podCIDRs: ["10.0.0.1/24"]', /podCIDRs: 10.0.0.1\/24/],
    ['not a CIDR', 'podCIDRs: ["banana"]', /podCIDRs: banana/],
    ['a /32', 'podCIDRs: ["10.0.0.0/32"]', /podCIDRs/],
    ['unknown datapath', 'podCIDRs: ["10.0.0.0/24"]\ndatapath: vpp', /datapath: "vpp" is not supported/],
    ['ovsdb over TCP', `${OVS}ovsdb: tcp:127.0.0.1:6640`, /ovsdb: must be unix:/],
    ['relative ovsdb socket', `${OVS}ovsdb: unix:db.sock`, /ovsdb: must be unix:/],
    ['unknown ovsDatapathType', `${OVS}ovsDatapathType: dpdk`, /ovsDatapathType: "dpdk" is not one of/],
    ['relative ovsUnixctl', `${OVS}ovsUnixctl: ovs-vswitchd.ctl`, /ovsUnixctl: must be an absolute path/],
    [
      'ovsUnixctl without ovs',
      'podCIDRs: ["10.0.0.0/24"]\novsUnixctl: /run/openvswitch/ovs-vswitchd.ctl',
      /ovsUnixctl: only meaningful with datapath: ovs/,
    ],
    ['long gateway name', `${OVS}gateway: abcdefghijklmnop`, /gateway: must be an interface name/],
    ['gateway named like the bridge', `${OVS}bridge: br0\ngateway: br0`, /gateway: must differ from bridge/],
    [
      'gateway without ovs',
      'podCIDRs: ["10.0.0.0/24"]\ngateway: gw0',
      /gateway: only meaningful with datapath: ovs/,
    ],
    [
      'ovsdb without ovs',
      'podCIDRs: ["10.0.0.0/24"]\novsdb: unix:/x',
      /ovsdb: only meaningful with datapath: ovs/,
    ],
    [
      'ovsDatapathType without ovs',
      'podCIDRs: ["10.0.0.0/24"]\ndatapath: linux-bridge\novsDatapathType: netdev',
      /ovsDatapathType: only meaningful/,
    ],
    ['long bridge name', 'podCIDRs: ["10.0.0.0/24"]\nbridge: abcdefghijklmnop', /bridge/],
    ['mtu too small for IPv6', 'podCIDRs: ["fd00::/64"]\nmtu: 1000', /mtu/],
    ['mtu not a number', 'podCIDRs: ["10.0.0.0/24"]\nmtu: big', /mtu/],
    ['relative socket', 'podCIDRs: ["10.0.0.0/24"]\nsocket: run/cni.sock', /socket/],
    ['relative stateDir', 'podCIDRs: ["10.0.0.0/24"]\nstateDir: state', /stateDir/],
    ['maxParallel 0', 'podCIDRs: ["10.0.0.0/24"]\nmaxParallel: 0', /maxParallel/],
    ['not a mapping', '- a\n- b', /top level/],
    [
      'egressMasquerade not a boolean',
      'podCIDRs: ["10.0.0.0/24"]\negressMasquerade: yes please',
      /egressMasquerade: must be true or false/,
    ],
    [
      'noMasqueradeCIDRs not a list',
      'podCIDRs: ["10.0.0.0/24"]\nnoMasqueradeCIDRs: 10.0.0.0/8',
      /noMasqueradeCIDRs: must be a list/,
    ],
    [
      'noMasqueradeCIDRs with host bits',
      'podCIDRs: ["10.0.0.0/24"]\nnoMasqueradeCIDRs: ["10.0.0.1/8"]',
      /noMasqueradeCIDRs: 10.0.0.1\/8: host bits/,
    ],
    [
      'noMasqueradeCIDRs not a CIDR',
      'podCIDRs: ["10.0.0.0/24"]\nnoMasqueradeCIDRs: ["example.com"]',
      /noMasqueradeCIDRs: example.com/,
    ],
    [
      'noMasqueradeCIDRs with masquerade off',
      'podCIDRs: ["10.0.0.0/24"]\negressMasquerade: false\nnoMasqueradeCIDRs: ["10.0.0.0/8"]',
      /noMasqueradeCIDRs: only meaningful with egressMasquerade: true/,
    ],
  ];
  const BAD_YAML: Array<[string, string, RegExp]> = [
    [
      'unclosed list',
      'podCIDRs: ["10.0.0.0/24"\nmtu: 1500\n',
      /not valid YAML: line 2, column 1: Flow sequence/,
    ],
    [
      'duplicate key',
      'podCIDRs: ["10.0.0.0/24"]\nmtu: 1500\nmtu: 9000\n',
      /not valid YAML: line 3, column 1: Map keys must be unique$/,
    ],
  ];
  for (const [name, text, expected] of BAD_YAML) {
    test(`not YAML, with line and column: ${name}`, () => {
      assert.throws(
        () => parseAgentConfig(text),
        (err: unknown) =>
          err instanceof PodwireError && err.code === 'ERR_DECODE' && expected.test(err.message),
      );
    });
  }

  for (const [name, text, expected] of BAD) {
    test(`refused: ${name}`, () => {
      assert.throws(
        () => parseAgentConfig(text),
        (err: unknown) =>
          err instanceof PodwireError && err.code === 'ERR_INVALID_CONFIG' && expected.test(err.message),
      );
    });
  }

  test('invalid YAML is a decode error', () => {
    assert.throws(
      () => parseAgentConfig('podCIDRs: [unclosed'),
      (e: unknown) => e instanceof PodwireError && e.code === 'ERR_DECODE',
    );
  });
});
