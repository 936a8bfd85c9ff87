/**
 * ADD -> CHECK -> DEL -> DEL -> DEL with the netns gone, for IPv4-only, IPv6-only and dual-stack
 * nodes, through the real relay and a real agent in its own node namespace; traffic must pass.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ipJson, run } from '../../bed/exec.js';
import { netnsPath } from '../../bed/namespaces.js';
import { TestNode } from '../../bed/node.js';

interface IpAddr {
  ifname: string;
  addr_info: Array<{ local: string; prefixlen: number; family: string; scope: string }>;
}

async function podAddresses(ns: string, ifname: string): Promise<string[]> {
  const links = await ipJson<IpAddr[]>(ns, ['addr', 'show', 'dev', ifname]);
  return (links[0]?.addr_info ?? [])
    .filter((a) => a.scope === 'global')
    .map((a) => `${a.local}/${a.prefixlen}`);
}

async function ping(fromNs: string, to: string): Promise<boolean> {
  const args = ['netns', 'exec', fromNs, 'ping', '-c', '1', '-W', '2', to];
  if (to.includes(':')) args.splice(3, 1, 'ping', '-6');
  return (await run('ip', args)).code === 0;
}

const STACKS: Array<{ name: string; cidrs: string[]; gateways: string[] }> = [
  { name: 'IPv4-only', cidrs: ['10.244.1.0/24'], gateways: ['10.244.1.1'] },
  { name: 'IPv6-only', cidrs: ['fd00:10:244:1::/64'], gateways: ['fd00:10:244:1::1'] },
  {
    name: 'dual-stack',
    cidrs: ['10.244.1.0/24', 'fd00:10:244:1::/64'],
    gateways: ['10.244.1.1', 'fd00:10:244:1::1'],
  },
];

for (const stack of STACKS) {
  describe(`ADD, CHECK, DEL (${stack.name})`, () => {
    const node = new TestNode({ podCIDRs: stack.cidrs });
    before(() => node.setup());
    after(() => node.cleanup());

    test('two pods get addresses, reach each other and the gateway; DEL is idempotent', async () => {
      const pods = [await node.addPod('a'), await node.addPod('b')];
      const results = [];
      for (const [i, pod] of pods.entries()) {
        const add = await node.cni({ command: 'ADD', containerId: `ctr-${i}`, netns: pod });
        assert.equal(add.code, 0, add.stdout);
        results.push(add.json as { ips: Array<{ address: string; gateway: string }>; interfaces: unknown[] });
        const have = await podAddresses(pod, 'eth0');
        assert.deepEqual(have.sort(), results[i]?.ips.map((ip) => ip.address).sort());
        assert.deepEqual(results[i]?.ips.map((ip) => ip.gateway).sort(), [...stack.gateways].sort());
      }
      for (const gw of stack.gateways) assert.ok(await ping(pods[0] as string, gw), `pod -> gateway ${gw}`);
      for (const ip of results[1]?.ips ?? []) {
        assert.ok(
          await ping(pods[0] as string, ip.address.split('/')[0] as string),
          `pod -> pod ${ip.address}`,
        );
      }

      const check = await node.cni({
        command: 'CHECK',
        containerId: 'ctr-0',
        netns: pods[0],
        conf: { prevResult: results[0] },
      });
      assert.equal(check.code, 0, check.stdout);

      for (const [i, pod] of pods.entries()) {
        const del = await node.cni({ command: 'DEL', containerId: `ctr-${i}`, netns: pod });
        assert.equal(del.code, 0, del.stdout);
        const again = await node.cni({ command: 'DEL', containerId: `ctr-${i}`, netns: pod });
        assert.equal(again.code, 0, again.stdout);
        const eth0 = await run('ip', ['-n', pod, 'link', 'show', 'eth0']);
        assert.notEqual(eth0.code, 0, 'eth0 removed from the pod');
        await node.ns.delete(pod);
        const gone = await node.cni({ command: 'DEL', containerId: `ctr-${i}`, netns: netnsPath(pod) });
        assert.equal(gone.code, 0, gone.stdout);
      }
      const links = await ipJson<Array<{ ifname: string }>>(node.nodeNs, ['link', 'show']);
      assert.deepEqual(
        links.filter((l) => l.ifname.startsWith('pw')).map((l) => l.ifname),
        [],
        'no host veth left',
      );
    });
  });
}
