/**
 * podwire's route keys in the network configuration (issue 13 item 4, secondary networks):
 * `defaultRoute` and `routes`, in every version and command; each bad value names its field.
 * Taking `parseConfRoutes` out of parseNetConf fails the first test; taking out any of its checks
 * fails the row that names it.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseNetConf } from '../../src/cni/config.js';
import { SUPPORTED_VERSIONS } from '../../src/cni/versions.js';
import { assertCniError } from './assert-cni.js';
import { commandsOf, conf } from './netconf-fixture.js';

describe('defaultRoute and routes', () => {
  test('read, canonical, in every version and command', () => {
    for (const version of SUPPORTED_VERSIONS) {
      for (const command of commandsOf(version)) {
        const c = parseNetConf(
          conf(version, command, {
            defaultRoute: false,
            routes: [
              { dst: '192.168.50.0/24' },
              { dst: 'FD00:50:0:0::/64', gw: 'fd00:10:244:1:0::1' },
              { dst: '0.0.0.0/0', gw: '10.244.1.254', ignored: 'by podwire' },
            ],
          }),
          command,
        );
        assert.equal(c.defaultRoute, false, `${version} ${command}`);
        assert.deepEqual(c.routes, [
          { dst: '192.168.50.0/24' },
          { dst: 'fd00:50::/64', gw: 'fd00:10:244:1::1' },
          { dst: '0.0.0.0/0', gw: '10.244.1.254' },
        ]);
      }
    }
  });

  test('absent: undefined (a default route per family, no more routes)', () => {
    const c = parseNetConf(conf('1.1.0', 'ADD'), 'ADD');
    assert.equal(c.defaultRoute, undefined);
    assert.equal(c.routes, undefined);
    const on = parseNetConf(conf('1.1.0', 'ADD', { defaultRoute: true, routes: [] }), 'ADD');
    assert.equal(on.defaultRoute, true);
    assert.deepEqual(on.routes, []);
  });

  const BAD: Array<[string, Record<string, unknown>, string]> = [
    ['defaultRoute a string', { defaultRoute: 'false' }, 'defaultRoute'],
    ['defaultRoute null', { defaultRoute: null }, 'defaultRoute'],
    ['routes an object', { routes: { dst: '10.0.0.0/8' } }, 'routes'],
    ['a route not an object', { routes: ['10.0.0.0/8'] }, 'routes[0]'],
    ['dst missing', { routes: [{ gw: '10.0.0.1' }] }, 'routes[0].dst'],
    ['dst a number', { routes: [{ dst: 10 }] }, 'routes[0].dst'],
    ['dst without length', { routes: [{ dst: '10.0.0.0' }] }, 'routes[0].dst'],
    ['dst with host bits', { routes: [{ dst: '192.168.50.1/24' }] }, 'routes[0].dst'],
    ['dst listed twice', { routes: [{ dst: '10.0.0.0/8' }, { dst: '10.0.0.0/8' }] }, 'routes[1].dst'],
    ['a default route beside defaultRoute', { routes: [{ dst: '::/0' }] }, 'routes[0].dst'],
    ['gw not an address', { routes: [{ dst: '10.0.0.0/8', gw: 'gateway' }] }, 'routes[0].gw'],
    ['gw of the other family', { routes: [{ dst: '10.0.0.0/8', gw: 'fd00::1' }] }, 'routes[0].gw'],
  ];
  for (const [label, extra, field] of BAD) {
    test(label, () => {
      for (const command of ['ADD', 'DEL'] as const) {
        assertCniError(
          () => parseNetConf(conf('1.1.0', command, extra), command),
          'ERR_INVALID_CONFIG',
          field,
        );
      }
    });
  }

  test('the host-bits message says what was meant', () => {
    assertCniError(
      () => parseNetConf(conf('1.0.0', 'ADD', { routes: [{ dst: '192.168.50.1/24' }] }), 'ADD'),
      'ERR_INVALID_CONFIG',
      '192.168.50.0/24',
    );
  });
});
