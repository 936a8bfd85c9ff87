import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  compareVersions,
  hasIpVersionField,
  hasResultExtensions,
  isSupportedVersion,
  LATEST_VERSION,
  SUPPORTED_VERSIONS,
  supportsCheck,
  supportsGcStatus,
  versionInfo,
} from '../../src/cni/versions.js';

describe('versions', () => {
  test('supported list is the spec releases from 0.3.0 on, in order', () => {
    assert.deepEqual([...SUPPORTED_VERSIONS], ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']);
    for (let i = 1; i < SUPPORTED_VERSIONS.length; i++) {
      assert.ok(compareVersions(SUPPORTED_VERSIONS[i - 1] ?? '', SUPPORTED_VERSIONS[i] ?? '') < 0);
    }
    assert.equal(LATEST_VERSION, '1.1.0');
  });

  test('compareVersions orders numerically, not lexically', () => {
    assert.ok(compareVersions('0.10.0', '0.9.0') > 0);
    assert.ok(compareVersions('1.0.0', '0.4.0') > 0);
    assert.equal(compareVersions('1.1.0', '1.1.0'), 0);
    assert.ok(compareVersions('0.3.0', '0.3.1') < 0);
  });

  test('compareVersions refuses malformed versions', () => {
    for (const bad of ['', '1', '1.0', '1.0.0-rc1', 'v1.0.0', '01.0.0', 'a.b.c']) {
      assert.throws(() => compareVersions(bad, '1.0.0'), RangeError, bad);
    }
  });

  const table: { v: string; check: boolean; gc: boolean; ipVersion: boolean; ext: boolean }[] = [
    { v: '0.3.0', check: false, gc: false, ipVersion: true, ext: false },
    { v: '0.3.1', check: false, gc: false, ipVersion: true, ext: false },
    { v: '0.4.0', check: true, gc: false, ipVersion: true, ext: false },
    { v: '1.0.0', check: true, gc: false, ipVersion: false, ext: false },
    { v: '1.1.0', check: true, gc: true, ipVersion: false, ext: true },
  ];
  for (const row of table) {
    test(`capabilities of ${row.v}`, () => {
      assert.equal(isSupportedVersion(row.v), true);
      assert.equal(supportsCheck(row.v), row.check);
      assert.equal(supportsGcStatus(row.v), row.gc);
      assert.equal(hasIpVersionField(row.v), row.ipVersion);
      assert.equal(hasResultExtensions(row.v), row.ext);
    });
  }

  test('unsupported versions', () => {
    for (const v of ['0.1.0', '0.2.0', '1.2.0', '2.0.0', '', '1.0'])
      assert.equal(isSupportedVersion(v), false, v);
  });

  test('versionInfo echoes a supported version and falls back to the latest', () => {
    for (const v of SUPPORTED_VERSIONS) {
      assert.deepEqual(versionInfo(v), { cniVersion: v, supportedVersions: [...SUPPORTED_VERSIONS] });
    }
    assert.equal(versionInfo('0.2.0').cniVersion, '1.1.0');
    assert.equal(versionInfo(undefined).cniVersion, '1.1.0');
    // The answer must be a copy: a caller mutating it must not change what podwire supports.
    versionInfo().supportedVersions.push('9.9.9');
    assert.equal(versionInfo().supportedVersions.length, SUPPORTED_VERSIONS.length);
  });
});
