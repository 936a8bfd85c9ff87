/**
 * The routes of a pod interface (src/agent/cni/pod-routes.ts): what ADD adds and reports and CHECK
 * looks for, from the network's `defaultRoute` and `routes` and the pod's addresses.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { podRoutes } from '../../src/agent/cni/pod-routes.js';
import { PodwireError } from '../../src/base/errors.js';
import type { Allocation } from '../../src/ipam/allocator.js';

const V4: Allocation = {
  ip: '10.244.1.5',
  prefixLength: 24,
  gateway: '10.244.1.1',
  family: 4,
  rangeId: '10.244.1.0/24',
};
const V6: Allocation = {
  ip: 'fd00:10:244:1::5',
  prefixLength: 64,
  gateway: 'fd00:10:244:1::1',
  family: 6,
  rangeId: 'fd00:10:244:1::/64',
};

test('default: one default route per family via the pod gateway', () => {
  assert.deepEqual(podRoutes({}, [V4, V6]), [
    { dst: '0.0.0.0/0', gw: '10.244.1.1' },
    { dst: '::/0', gw: 'fd00:10:244:1::1' },
  ]);
});

test('defaultRoute false: only the configured routes, via the gateway of their family or their gw', () => {
  const routes = [
    { dst: '192.168.50.0/24' },
    { dst: 'fd00:50::/64' },
    { dst: '172.16.0.0/12', gw: '10.244.1.254' },
  ];
  assert.deepEqual(podRoutes({ defaultRoute: false, routes }, [V4, V6]), [
    { dst: '192.168.50.0/24', gw: '10.244.1.1' },
    { dst: 'fd00:50::/64', gw: 'fd00:10:244:1::1' },
    { dst: '172.16.0.0/12', gw: '10.244.1.254' },
  ]);
  assert.deepEqual(podRoutes({ defaultRoute: false }, [V4]), []);
});

test('defaultRoute true with routes: both', () => {
  assert.deepEqual(podRoutes({ defaultRoute: true, routes: [{ dst: '192.168.50.0/24' }] }, [V4]), [
    { dst: '0.0.0.0/0', gw: '10.244.1.1' },
    { dst: '192.168.50.0/24', gw: '10.244.1.1' },
  ]);
});

test('a route of a family the pod has no address of is refused, naming it', () => {
  assert.throws(
    () =>
      podRoutes({ defaultRoute: false, routes: [{ dst: '192.168.50.0/24' }, { dst: 'fd00:50::/64' }] }, [V4]),
    (err: unknown) =>
      err instanceof PodwireError &&
      err.code === 'ERR_INVALID_CONFIG' &&
      err.message.startsWith('routes[1].dst'),
  );
});
