/** IP pool records: ranges (CIDR, start-end), the subnet's reserved addresses, VLAN, errors naming the key. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseIp } from '../../src/base/ip.js';
import { parseIpPool, poolAddresses, poolContains } from '../../src/cluster/ip-pool.js';

const base = { name: 'blue', subnet: { gateway: '172.30.0.254', prefixLength: 24 } };
const v = (ip: string) => parseIp(ip)?.value as bigint;

test('ranges as CIDR and start-end; gateway, network and broadcast are never handed out', () => {
  const p = parseIpPool({ ...base, ranges: ['172.30.0.0/30', '172.30.0.250-172.30.0.255'] }, 'x');
  assert.deepEqual(p.pool, { ...base, ranges: ['172.30.0.0/30', '172.30.0.250-172.30.0.255'], vlan: 0 });
  assert.equal(p.size, 3n + 4n); // .1 .2 .3, .250-.253
  assert.ok(!poolContains(p, v('172.30.0.0')));
  assert.ok(!poolContains(p, v('172.30.0.254')));
  assert.ok(!poolContains(p, v('172.30.0.255')));
  assert.ok(poolContains(p, v('172.30.0.253')));
  assert.equal([...poolAddresses(p)].length, 7);
});

test('VLAN 0-4094; IPv6 pools', () => {
  assert.equal(parseIpPool({ ...base, ranges: ['172.30.0.10-172.30.0.20'], vlan: 42 }, 'x').pool.vlan, 42);
  const six = parseIpPool(
    { name: 'six', ranges: ['fd00:30::10-fd00:30::1f'], subnet: { gateway: 'fd00:30::1', prefixLength: 64 } },
    'x',
  );
  assert.equal(six.size, 16n);
});

test('errors name the key', () => {
  const cases: Array<[unknown, RegExp]> = [
    [{ ...base, ranges: [] }, /x: ranges: must be a non-empty list/],
    [
      { ...base, ranges: ['10.0.0.1-10.0.0.5'] },
      /ranges\[0\]: 10\.0\.0\.1-10\.0\.0\.5 is not inside the subnet 172\.30\.0\.0\/24/,
    ],
    [{ ...base, ranges: ['172.30.0.9-172.30.0.1'] }, /ranges\[0\]: .*END is before START/],
    [{ ...base, ranges: ['172.30.0.1/24x'] }, /ranges\[0\]/],
    [
      { ...base, ranges: ['172.30.0.1-172.30.0.9', '172.30.0.5/32'] },
      /ranges\[1\]: 172\.30\.0\.5\/32 overlaps/,
    ],
    [{ ...base, ranges: ['172.30.0.10-172.30.0.20'], vlan: 4095 }, /vlan: 4095 must be an integer from 0/],
    [{ ...base, name: 'Blue', ranges: ['172.30.0.10/32'] }, /name: "Blue" must be a DNS-1123 label/],
    [{ ...base, ranges: ['172.30.0.254/32'] }, /leave no address/],
    [{ ...base, ranges: ['172.30.0.10/32'], colour: 'x' }, /colour: unknown key/],
    [
      { name: 'b', ranges: ['172.30.0.10/32'], subnet: { gateway: 'x', prefixLength: 24 } },
      /subnet\.gateway/,
    ],
  ];
  for (const [input, re] of cases) assert.throws(() => parseIpPool(input, 'x'), re, JSON.stringify(input));
});
