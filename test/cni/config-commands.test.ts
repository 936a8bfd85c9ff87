import { describe, test } from 'node:test';
import { parseNetConf } from '../../src/cni/config.js';
import { compareVersions, SUPPORTED_VERSIONS } from '../../src/cni/versions.js';
import { assertCniError } from './assert-cni.js';
import { type Command, conf } from './netconf-fixture.js';

describe('parseNetConf: versions too old for the command', () => {
  for (const version of SUPPORTED_VERSIONS) {
    const tooOld: Command[] = [];
    if (compareVersions(version, '0.4.0') < 0) tooOld.push('CHECK');
    if (compareVersions(version, '1.1.0') < 0) tooOld.push('GC', 'STATUS');
    for (const command of tooOld) {
      test(`${command} in ${version}`, () => {
        assertCniError(
          () => parseNetConf(conf(version, command), command),
          'ERR_INCOMPATIBLE_VERSION',
          'cniVersion',
        );
        assertCniError(
          () => parseNetConf(conf(version, command), command),
          'ERR_INCOMPATIBLE_VERSION',
          command,
        );
      });
    }
  }
});

describe('parseNetConf: per-command requirements', () => {
  for (const version of ['0.4.0', '1.0.0', '1.1.0']) {
    test(`CHECK ${version} without prevResult`, () => {
      assertCniError(
        () => parseNetConf(conf(version, 'CHECK', { prevResult: undefined }), 'CHECK'),
        'ERR_INVALID_CONFIG',
        'prevResult',
      );
    });
  }

  test('GC without valid attachments is refused, not treated as "keep nothing"', () => {
    assertCniError(
      () => parseNetConf(conf('1.1.0', 'GC', { 'cni.dev/valid-attachments': undefined }), 'GC'),
      'ERR_INVALID_CONFIG',
      'cni.dev/valid-attachments',
    );
  });

  const badAttachments: { label: string; list: unknown; field: string }[] = [
    { label: 'entry not an object', list: ['abc/eth0'], field: 'cni.dev/valid-attachments[0]' },
    {
      label: 'containerID missing',
      list: [{ ifname: 'eth0' }],
      field: 'cni.dev/valid-attachments[0].containerID',
    },
    {
      label: 'containerID a number',
      list: [{ containerID: 1, ifname: 'eth0' }],
      field: 'cni.dev/valid-attachments[0].containerID',
    },
    {
      label: 'containerID malformed',
      list: [{ containerID: 'a b', ifname: 'eth0' }],
      field: 'cni.dev/valid-attachments[0].containerID',
    },
    { label: 'ifname missing', list: [{ containerID: 'a' }], field: 'cni.dev/valid-attachments[0].ifname' },
    {
      label: 'ifname too long',
      list: [
        { containerID: 'a', ifname: 'eth0' },
        { containerID: 'b', ifname: 'x'.repeat(16) },
      ],
      field: 'cni.dev/valid-attachments[1].ifname',
    },
    {
      label: 'containerId spelled in camel case',
      list: [{ containerId: 'a', ifname: 'eth0' }],
      field: 'cni.dev/valid-attachments[0].containerID',
    },
  ];
  for (const { label, list, field } of badAttachments) {
    test(`GC: ${label}`, () => {
      assertCniError(
        () => parseNetConf(conf('1.1.0', 'GC', { 'cni.dev/valid-attachments': list }), 'GC'),
        'ERR_INVALID_CONFIG',
        field,
      );
    });
  }

  test('GC: the original key is validated too', () => {
    assertCniError(
      () => parseNetConf(conf('1.1.0', 'GC', { 'cni.dev/attachments': [{ containerID: '-' }] }), 'GC'),
      'ERR_INVALID_CONFIG',
      'cni.dev/attachments[0].containerID',
    );
  });
});
