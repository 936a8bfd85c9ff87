/** Every known configuration key with a wrong type or value, in every version: the error names the key. */

import { describe, test } from 'node:test';
import { parseNetConf } from '../../src/cni/config.js';
import { SUPPORTED_VERSIONS } from '../../src/cni/versions.js';
import { assertCniError } from './assert-cni.js';
import { type Command, conf } from './netconf-fixture.js';

/** [label, command, keys merged over the valid configuration (undefined deletes), field the error names] */
type Row = [string, Command, Record<string, unknown>, string];

const INVALID_CONFIG: Row[] = [
  ['cniVersion missing', 'ADD', { cniVersion: undefined }, 'cniVersion'],
  ['cniVersion a number', 'ADD', { cniVersion: 1 }, 'cniVersion'],
  ['cniVersion null', 'DEL', { cniVersion: null }, 'cniVersion'],
  ['name missing', 'ADD', { name: undefined }, 'name'],
  ['name a number', 'ADD', { name: 7 }, 'name'],
  ['name empty', 'DEL', { name: '' }, 'name'],
  ['name starts with -', 'ADD', { name: '-net' }, 'name'],
  ['name with a space', 'ADD', { name: 'pod net' }, 'name'],
  ['name with a slash', 'ADD', { name: 'a/b' }, 'name'],
  ['type missing', 'ADD', { type: undefined }, 'type'],
  ['type an object', 'ADD', { type: {} }, 'type'],
  ['type empty', 'DEL', { type: '' }, 'type'],
  ['type a path', 'ADD', { type: '../bin/sh' }, 'type'],
  ['type with a backslash', 'ADD', { type: 'a\\b' }, 'type'],
  ['socket a number', 'ADD', { socket: 5 }, 'socket'],
  ['socket relative', 'ADD', { socket: 'run/podwire.sock' }, 'socket'],
  ['socket empty', 'DEL', { socket: '' }, 'socket'],
  ['runtimeConfig a string', 'ADD', { runtimeConfig: 'x' }, 'runtimeConfig'],
  ['args an array', 'ADD', { args: [] }, 'args'],
  ['capabilities null', 'ADD', { capabilities: null }, 'capabilities'],
  ['capability not a boolean', 'ADD', { capabilities: { portMappings: 'yes' } }, 'capabilities.portMappings'],
  ['ipam a string', 'ADD', { ipam: 'host-local' }, 'ipam'],
  ['ipam.type a number', 'ADD', { ipam: { type: 1 } }, 'ipam.type'],
  ['dns a list', 'ADD', { dns: ['10.96.0.10'] }, 'dns'],
  ['dns.nameservers a string', 'ADD', { dns: { nameservers: '10.96.0.10' } }, 'dns.nameservers'],
  ['dns.nameservers[1] a number', 'ADD', { dns: { nameservers: ['a', 1] } }, 'dns.nameservers[1]'],
  ['dns.domain a list', 'ADD', { dns: { domain: [] } }, 'dns.domain'],
  ['prevResult a string', 'DEL', { prevResult: '{}' }, 'prevResult'],
  ['prevResult.ips an object', 'DEL', { prevResult: { ips: {} } }, 'prevResult.ips'],
  [
    'prevResult address without prefix',
    'DEL',
    { prevResult: { ips: [{ address: '10.0.0.1' }] } },
    'prevResult.ips[0].address',
  ],
  [
    'prevResult interface index out of range',
    'DEL',
    { prevResult: { ips: [{ address: '10.0.0.1/24', interface: 0 }] } },
    'prevResult.ips[0].interface',
  ],
  [
    'prevResult interface without name',
    'ADD',
    { prevResult: { interfaces: [{ mac: 'x' }] } },
    'prevResult.interfaces[0].name',
  ],
  ['valid-attachments not a list', 'ADD', { 'cni.dev/valid-attachments': {} }, 'cni.dev/valid-attachments'],
];

/** Versions podwire does not speak; version-independent, so run once. */
const INCOMPATIBLE: Row[] = [
  ['cniVersion 0.2.0', 'ADD', { cniVersion: '0.2.0' }, 'cniVersion'],
  ['cniVersion 2.0.0', 'DEL', { cniVersion: '2.0.0' }, 'cniVersion'],
  ['cniVersion not semver', 'ADD', { cniVersion: 'latest' }, 'cniVersion'],
];

describe('parseNetConf: each bad field, in every version', () => {
  for (const version of SUPPORTED_VERSIONS) {
    for (const [label, command, extra, field] of INVALID_CONFIG) {
      test(`${version} ${command}: ${label}`, () => {
        assertCniError(
          () => parseNetConf(conf(version, command, extra), command),
          'ERR_INVALID_CONFIG',
          field,
        );
      });
    }
  }

  for (const [label, command, extra, field] of INCOMPATIBLE) {
    test(`${command}: ${label}`, () => {
      assertCniError(
        () => parseNetConf(conf('1.1.0', command, extra), command),
        'ERR_INCOMPATIBLE_VERSION',
        field,
      );
    });
  }

  test('the incompatible-version message lists what podwire speaks', () => {
    assertCniError(
      () => parseNetConf(conf('0.2.0', 'ADD'), 'ADD'),
      'ERR_INCOMPATIBLE_VERSION',
      '0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0',
    );
  });
});
