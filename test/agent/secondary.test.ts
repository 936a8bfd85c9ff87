/**
 * Secondary networks (issue 13 item 4), as Multus uses them: a pod's `eth0` and default route come
 * from another CNI (here the reference `bridge` plugin with `host-local`, from /usr/lib/cni, run in
 * the node namespace), and podwire adds `net1` from a second configuration (`"name": "podwire-sec"`,
 * `"defaultRoute": false`, `"routes"`), through the relay. One agent also serves podwire's own
 * network (`"name": "podwire"`), so a pod can have both podwire networks at once. The suite runs on
 * both datapaths (OVS where it is installed; `PODWIRE_SECONDARY_DATAPATHS` picks).
 *
 * The namespaces around the node tell the two paths apart: `ext` (192.168.50.0/24, reached only
 * through net1's configured route) routes back only to podwire's pod CIDR, `outside` (203.0.113.0/24,
 * reached by the default route) routes back only to the bridge network. A packet that took the wrong
 * interface leaves with that interface's address and its answer never comes back.
 *
 * What fails when the mechanism is taken out (each checked by hand):
 * - `routes` ignored by pod-routes.ts: test 1 (no 192.168.50.0/24 route on net1, not in the result);
 * - `defaultRoute: false` ignored: every ADD of net1 fails (EEXIST: the default route is eth0's);
 * - the network name compared neither by GC's filter (cmd-gc.ts) nor by DEL (cmd-del.ts, which GC
 *   deletes through, so either one alone keeps other networks' claims): test 3 (podwire's own
 *   attachments released by GC of podwire-sec);
 * - the host veth alias not consulted by GC: test 3 (the other network's unclaimed veth removed);
 * - legacy claims judged like named ones: test 4 (the first GC, of podwire-sec, releases the legacy pod);
 * - CHECK not adopting the name: test 4 (the last GC leaves the adopted claim);
 * - DEL not comparing the network: test 4 (DEL from the wrong network releases the pod);
 * - CHECK not comparing the network: test 2 (CHECK under the wrong name passes).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ipJson, must, run } from '../../bed/exec.js';
import { hostVeths, linkNames, settledHostVeths } from '../../bed/inspect.js';
import { netnsPath } from '../../bed/namespaces.js';
import { type CniOutcome, resultIps, TestNode } from '../../bed/node.js';
import { ovsAvailable } from '../../bed/ovs.js';
import { hostVethName } from '../../src/agent/cni/host-veth.js';
import { reportOvsSkip } from '../datapath/ovs-skip.js';

const POD_CIDR = '10.244.27.0/24';
const POD_CIDR6 = 'fd00:10:244:27::/64';
const POD_GW6 = 'fd00:10:244:27::1';
const EXT_IP6 = 'fd00:50::1';
const POD_GW = '10.244.27.1';
const BRIDGE_SUBNET = '10.99.27.0/24';
const BRIDGE_GW = '10.99.27.1';
const EXT_IP = '192.168.50.1';
const OUTSIDE_IP = '203.0.113.1';
const SEC = 'podwire-sec';
const SEC_ROUTES = [{ dst: '192.168.50.0/24' }, { dst: 'fd00:50::/64' }];

/** Both datapaths where OVS is installed; `PODWIRE_SECONDARY_DATAPATHS=ovs` (say) picks. */
const DATAPATHS = (
  process.env.PODWIRE_SECONDARY_DATAPATHS ?? (ovsAvailable() ? 'linux-bridge,ovs' : 'linux-bridge')
).split(',') as Array<'linux-bridge' | 'ovs'>;

reportOvsSkip('secondary networks');
for (const datapath of DATAPATHS) {
  const node = new TestNode({ podCIDRs: [POD_CIDR, POD_CIDR6], datapath });
  const hostLocalDir = join(node.dir, 'host-local');

  before(async () => {
    await node.setup();
    await must('ip', ['netns', 'exec', node.nodeNs, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
    await must('ip', ['netns', 'exec', node.nodeNs, 'sysctl', '-qw', 'net.ipv6.conf.all.forwarding=1']);
    const ext = await stubNetwork('ext', `${EXT_IP}/24`, '192.168.50.254/24', POD_CIDR);
    await must('ip', ['-n', node.nodeNs, 'addr', 'add', 'fd00:50::fe/64', 'dev', 'st-ext', 'nodad']);
    await must('ip', ['-n', ext, 'addr', 'add', `${EXT_IP6}/64`, 'dev', 'up0', 'nodad']);
    await must('ip', ['-n', ext, 'route', 'add', POD_CIDR6, 'via', 'fd00:50::fe']);
    await stubNetwork('outside', `${OUTSIDE_IP}/24`, '203.0.113.254/24', BRIDGE_SUBNET);
  });
  after(() => node.cleanup());

  /**
   * A namespace behind the node on its own link: `address` there, `nodeAddress` on the node's end, and
   * a route back to `returnTo` only (through the node).
   */
  async function stubNetwork(role: string, address: string, nodeAddress: string, returnTo: string) {
    const ns = await node.ns.add(role);
    const hostEnd = `st-${role}`.slice(0, 15);
    await must('ip', [
      '-n',
      node.nodeNs,
      'link',
      'add',
      hostEnd,
      'type',
      'veth',
      'peer',
      'name',
      'up0',
      'netns',
      ns,
    ]);
    // No DAD on either end: a tentative link-local address holds back neighbour discovery for ~1 s.
    await must('ip', [
      'netns',
      'exec',
      node.nodeNs,
      'sysctl',
      '-qw',
      `net.ipv6.conf.${hostEnd}.accept_dad=0`,
    ]);
    await must('ip', ['netns', 'exec', ns, 'sysctl', '-qw', 'net.ipv6.conf.up0.accept_dad=0']);
    await must('ip', ['-n', node.nodeNs, 'addr', 'add', nodeAddress, 'dev', hostEnd]);
    await must('ip', ['-n', node.nodeNs, 'link', 'set', hostEnd, 'up']);
    await must('ip', ['-n', ns, 'addr', 'add', address, 'dev', 'up0']);
    await must('ip', ['-n', ns, 'link', 'set', 'up0', 'up']);
    await must('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    await must('ip', ['-n', ns, 'route', 'add', returnTo, 'via', nodeAddress.split('/')[0] as string]);
    return ns;
  }

  /** The reference bridge plugin, run in the node namespace as a runtime would run the primary CNI. */
  async function bridgePlugin(command: 'ADD' | 'DEL', containerId: string, pod: string): Promise<CniOutcome> {
    const conf = {
      cniVersion: '1.0.0',
      name: 'primary',
      type: 'bridge',
      bridge: 'secbr0',
      isGateway: true,
      isDefaultGateway: true,
      ipMasq: false,
      ipam: {
        type: 'host-local',
        ranges: [[{ subnet: BRIDGE_SUBNET, gateway: BRIDGE_GW }]],
        dataDir: hostLocalDir,
      },
    };
    const env = {
      PATH: process.env.PATH,
      CNI_COMMAND: command,
      CNI_CONTAINERID: containerId,
      CNI_NETNS: netnsPath(pod),
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/usr/lib/cni',
    };
    const r = await run('ip', ['netns', 'exec', node.nodeNs, '/usr/lib/cni/bridge'], {
      env: env as NodeJS.ProcessEnv,
      input: JSON.stringify(conf),
    });
    return {
      ...r,
      json: r.stdout.trim() === '' ? undefined : (JSON.parse(r.stdout) as Record<string, unknown>),
    };
  }

  /** podwire's secondary network on net1. */
  function addSecondary(containerId: string, pod: string): Promise<CniOutcome> {
    return node.cni({
      command: 'ADD',
      containerId,
      netns: pod,
      ifname: 'net1',
      conf: { name: SEC, defaultRoute: false, routes: SEC_ROUTES },
    });
  }

  /** One ping from `ns`, optionally bound to an interface (`ping -I`). */
  async function ping(ns: string, ip: string, ifname?: string): Promise<boolean> {
    const bind = ifname === undefined ? [] : ['-I', ifname];
    const v6 = ip.includes(':') ? ['-6'] : [];
    return (
      (await run('ip', ['netns', 'exec', ns, 'ping', ...v6, '-c', '1', '-W', '2', ...bind, ip])).code === 0
    );
  }

  interface IpRoute {
    dst: string;
    gateway?: string;
    dev: string;
  }

  async function routes(ns: string, family: '-4' | '-6' = '-4'): Promise<IpRoute[]> {
    return ipJson<IpRoute[]>(ns, [family, 'route', 'show', 'table', 'main']);
  }

  /**
   * The attachments with claims in the agent's store and the network their claims name ('-' for none),
   * as "id/ifname/net"; an attachment's two claims (IPv4, IPv6) count once when they agree.
   */
  function claimKeys(): string[] {
    const root = join(node.dir, 'state', 'ipam');
    const out: string[] = [];
    for (const range of readdirSync(root)) {
      for (const file of readdirSync(join(root, range))) {
        if (file.startsWith('.')) continue;
        const rec = JSON.parse(readFileSync(join(root, range, file), 'utf8')) as Record<string, string>;
        out.push(`${rec.containerId}/${rec.ifname}/${rec.network ?? '-'}`);
      }
    }
    return [...new Set(out)].sort();
  }

  /** The pod ports of the datapath: Linux bridge ports of podwire0, or OVS ports of br-podwire. */
  async function datapathPorts(): Promise<string[]> {
    const names =
      node.ovs === undefined
        ? (await ipJson<Array<{ ifname: string }>>(node.nodeNs, ['link', 'show', 'master', 'podwire0'])).map(
            (l) => l.ifname,
          )
        : (await node.ovs.vsctl('list-ports', 'br-podwire')).split('\n');
    return names.filter((n) => n.startsWith('pw')).sort();
  }

  function ok(out: CniOutcome, what: string): void {
    assert.equal(out.code, 0, `${what}: ${out.stdout}${out.stderr}`);
  }

  const pods: Record<string, string> = {};
  /** Pod b's address on podwire's own network. */
  let bIp = '';

  describe(`secondary networks (${datapath})`, () => {
    test('eth0 from the bridge plugin, net1 from podwire: both work, eth0 keeps the default route', async () => {
      pods.a = await node.addPod('a');
      pods.b = await node.addPod('b');
      ok(await bridgePlugin('ADD', 'sec-a', pods.a), 'bridge ADD');
      const net1 = await addSecondary('sec-a', pods.a);
      ok(net1, 'podwire ADD net1');
      const b = await node.cni({ command: 'ADD', containerId: 'sec-b', netns: pods.b });
      ok(b, 'podwire ADD of pod b');
      bIp = resultIps(b)[0] as string;

      const result = net1.json as { routes: unknown[]; ips: Array<{ address: string; interface: number }> };
      assert.deepEqual(
        result.routes,
        [
          { dst: '192.168.50.0/24', gw: POD_GW },
          { dst: 'fd00:50::/64', gw: POD_GW6 },
        ],
        'the result reports the routes',
      );
      assert.equal(result.ips.length, 2);
      const table = await routes(pods.a);
      const defaults = table.filter((r) => r.dst === 'default');
      assert.deepEqual(
        defaults.map((r) => `${r.gateway} ${r.dev}`),
        [`${BRIDGE_GW} eth0`],
        'one default route, the bridge network',
      );
      assert.deepEqual(
        table.filter((r) => r.dst === '192.168.50.0/24').map((r) => `${r.gateway} ${r.dev}`),
        [`${POD_GW} net1`],
        'the configured route is on net1 via the pod gateway',
      );
      const table6 = await routes(pods.a, '-6');
      assert.deepEqual(
        table6.filter((r) => r.dst === 'default'),
        [],
        'no IPv6 default route: net1 adds none',
      );
      assert.deepEqual(
        table6.filter((r) => r.dst === 'fd00:50::/64').map((r) => `${r.gateway} ${r.dev}`),
        [`${POD_GW6} net1`],
      );

      // Each network reaches what lies behind it, and only through its own interface.
      assert.ok(await ping(pods.a, BRIDGE_GW), 'eth0: the bridge network gateway');
      assert.ok(await ping(pods.a, OUTSIDE_IP), 'eth0: beyond the default route');
      assert.ok(await ping(pods.a, POD_GW), 'net1: the podwire gateway');
      assert.ok(await ping(pods.a, EXT_IP), 'net1: the configured route');
      assert.ok(await ping(pods.a, EXT_IP6), 'net1: the configured IPv6 route');
      assert.ok(await ping(pods.a, bIp), 'net1: a pod of podwire');

      // CHECK looks for the configured route.
      const check = () =>
        node.cni({
          command: 'CHECK',
          containerId: 'sec-a',
          netns: pods.a as string,
          ifname: 'net1',
          conf: { name: SEC, defaultRoute: false, routes: SEC_ROUTES, prevResult: net1.json },
        });
      ok(await check(), 'CHECK');
      await must('ip', ['-n', pods.a, 'route', 'del', '192.168.50.0/24']);
      const drift = await check();
      assert.equal((drift.json as { code: number }).code, 104, drift.stdout);
      assert.match(
        (drift.json as { msg: string }).msg,
        /route 192\.168\.50\.0\/24 via 10\.244\.27\.1 is missing on net1/,
      );
      await must('ip', ['-n', pods.a, 'route', 'add', '192.168.50.0/24', 'via', POD_GW, 'dev', 'net1']);
      ok(await check(), 'CHECK after repair');
    });

    test('one agent, two podwire networks, one containerID: eth0 and net1 coexist', async () => {
      pods.c = await node.addPod('c');
      const eth0 = await node.cni({ command: 'ADD', containerId: 'sec-c', netns: pods.c });
      ok(eth0, 'ADD eth0 (podwire)');
      const net1 = await addSecondary('sec-c', pods.c);
      ok(net1, 'ADD net1 (podwire-sec)');
      assert.notDeepEqual(resultIps(eth0), resultIps(net1));
      const defaults = (await routes(pods.c)).filter((r) => r.dst === 'default');
      assert.deepEqual(
        defaults.map((r) => r.dev),
        ['eth0'],
      );
      assert.ok(await ping(pods.c, bIp, 'eth0'), 'through eth0');
      assert.ok(await ping(pods.c, bIp, 'net1'), 'through net1');
      assert.ok(await ping(pods.c, EXT_IP), 'net1 route');
      assert.deepEqual(claimKeys(), [
        'sec-a/net1/podwire-sec',
        'sec-b/eth0/podwire',
        'sec-c/eth0/podwire',
        'sec-c/net1/podwire-sec',
      ]);
      // The host veths say which network they serve (`ip link` shows the alias).
      const links = await ipJson<Array<{ ifname: string; ifalias?: string }>>(node.nodeNs, ['link', 'show']);
      const aliases = links.filter((l) => l.ifname.startsWith('pw') && l.ifalias).map((l) => l.ifalias);
      assert.deepEqual(aliases.sort(), [
        'podwire network podwire',
        'podwire network podwire',
        `podwire network ${SEC}`,
        `podwire network ${SEC}`,
      ]);

      // CHECK under another network's name: that attachment does not exist.
      const wrong = await node.cni({
        command: 'CHECK',
        containerId: 'sec-c',
        netns: pods.c,
        ifname: 'net1',
        conf: { defaultRoute: false, routes: SEC_ROUTES, prevResult: net1.json },
      });
      assert.equal((wrong.json as { code: number }).code, 104, wrong.stdout);
      assert.match((wrong.json as { msg: string }).msg, /in network podwire-sec, not podwire/);

      // A route the kernel refuses (its gateway is on no link of the pod): the ADD fails after the
      // veth, the addresses and the first route exist, and undoes all of it.
      const claimsBefore = claimKeys();
      const vethsBefore = (await hostVeths(node.nodeNs)).length;
      const refused = await node.cni({
        command: 'ADD',
        containerId: 'sec-c',
        netns: pods.c,
        ifname: 'net2',
        conf: {
          name: SEC,
          defaultRoute: false,
          routes: [{ dst: '192.168.50.0/24' }, { dst: '172.16.0.0/12', gw: '10.1.2.3' }],
        },
      });
      assert.equal((refused.json as { code: number }).code, 105, refused.stdout);
      assert.deepEqual(claimKeys(), claimsBefore);
      assert.equal((await hostVeths(node.nodeNs)).length, vethsBefore);
      assert.deepEqual((await linkNames(pods.c)).sort(), ['eth0', 'lo', 'net1']);
    });

    test("GC of podwire-sec with no valid attachment removes only that network's attachments", async () => {
      // Two unclaimed podwire veths, as an interrupted DEL leaves them: one of each network.
      for (const [name, network] of [
        ['pwleftsec', SEC],
        ['pwleftown', 'podwire'],
      ] as const) {
        const peer = name.replace('pw', 'x');
        await must('ip', ['-n', node.nodeNs, 'link', 'add', name, 'type', 'veth', 'peer', 'name', peer]);
        await must('ip', ['-n', node.nodeNs, 'link', 'set', name, 'alias', `podwire network ${network}`]);
      }
      const before = (await hostVeths(node.nodeNs)).length;
      assert.equal((await datapathPorts()).length, 4, 'a, b and c (twice) are ports of the datapath');
      const gc = await node.cni({ command: 'GC', conf: { name: SEC, 'cni.dev/valid-attachments': [] } });
      ok(gc, 'GC');
      assert.deepEqual(
        claimKeys(),
        ['sec-b/eth0/podwire', 'sec-c/eth0/podwire'],
        'podwire-sec claims released',
      );
      const left = await settledHostVeths(node.nodeNs, before - 3);
      assert.equal(left.length, before - 3, `net1 of a and c and pwleftsec removed: ${left}`);
      assert.ok(left.includes('pwleftown'), "the other network's unclaimed veth stays");
      assert.ok(!left.includes('pwleftsec'));

      assert.deepEqual(
        await datapathPorts(),
        [hostVethName('sec-b', 'eth0'), hostVethName('sec-c', 'eth0')].sort(),
        "only podwire's own ports remain on the datapath",
      );
      // Pod a: net1 gone, eth0 (bridge plugin) as it was; pod c: eth0 (podwire) as it was.
      assert.deepEqual((await linkNames(pods.a as string)).sort(), ['eth0', 'lo']);
      assert.deepEqual((await linkNames(pods.c as string)).sort(), ['eth0', 'lo']);
      assert.ok(await ping(pods.a as string, OUTSIDE_IP), 'the bridge plugin attachment still works');
      assert.ok(await ping(pods.c as string, POD_GW), "podwire's own attachment still works");
      assert.ok(
        readdirSync(join(hostLocalDir, 'primary')).includes('10.99.27.2'),
        "the bridge plugin's address is still held",
      );
      const bridgePorts = await ipJson<unknown[]>(node.nodeNs, ['link', 'show', 'master', 'secbr0']);
      assert.equal(bridgePorts.length, 1, "the bridge plugin's veth is still on its bridge");

      // GC of podwire keeps what its list names, and now removes its own leftover veth.
      const own = await node.cni({
        command: 'GC',
        conf: {
          'cni.dev/valid-attachments': [
            { containerID: 'sec-b', ifname: 'eth0' },
            { containerID: 'sec-c', ifname: 'eth0' },
          ],
        },
      });
      ok(own, 'GC podwire');
      assert.deepEqual(claimKeys(), ['sec-b/eth0/podwire', 'sec-c/eth0/podwire']);
      assert.ok(!(await settledHostVeths(node.nodeNs, before - 4)).includes('pwleftown'));
      ok(await bridgePlugin('DEL', 'sec-a', pods.a as string), 'bridge DEL');
    });

    test('legacy claims (no network name): no GC removes them, DEL of another network neither; CHECK adopts the name', async () => {
      pods.d = await node.addPod('d');
      const add = await node.cni({ command: 'ADD', containerId: 'legacy-d', netns: pods.d });
      ok(add, 'ADD');
      // Rewrite its claims (IPv4, IPv6) as an earlier podwire wrote them, agent stopped.
      await node.stopAgent();
      const root = join(node.dir, 'state', 'ipam');
      let rewritten = 0;
      for (const range of readdirSync(root)) {
        for (const name of readdirSync(join(root, range))) {
          const file = join(root, range, name);
          const rec = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
          if (rec.containerId !== 'legacy-d') continue;
          assert.equal(rec.network, 'podwire');
          delete rec.network;
          writeFileSync(file, `${JSON.stringify(rec)}\n`);
          rewritten++;
        }
      }
      assert.equal(rewritten, 2);
      await node.startAgent();
      assert.ok(claimKeys().includes('legacy-d/eth0/-'), 'kept by reconcile: its veth exists');

      for (const name of [SEC, 'podwire']) {
        ok(await node.cni({ command: 'GC', conf: { name, 'cni.dev/valid-attachments': [] } }), `GC ${name}`);
        assert.ok(claimKeys().includes('legacy-d/eth0/-'), `GC of ${name} leaves the legacy claim`);
      }
      assert.ok(await ping(pods.d, POD_GW), 'the legacy pod still works');

      const check = await node.cni({
        command: 'CHECK',
        containerId: 'legacy-d',
        netns: pods.d,
        conf: { prevResult: add.json },
      });
      ok(check, 'CHECK');
      assert.ok(claimKeys().includes('legacy-d/eth0/podwire'), 'CHECK recorded the name');

      // Named now: DEL from another network is a DEL of an attachment that does not exist.
      const wrong = await node.cni({
        command: 'DEL',
        containerId: 'legacy-d',
        netns: pods.d,
        conf: { name: SEC },
      });
      ok(wrong, 'DEL of podwire-sec');
      assert.ok(claimKeys().includes('legacy-d/eth0/podwire'), 'DEL of another network deletes nothing');

      ok(await node.cni({ command: 'GC', conf: { 'cni.dev/valid-attachments': [] } }), 'GC podwire');
      assert.deepEqual(claimKeys(), [], 'GC of its network releases the adopted claim');
      assert.deepEqual(await settledHostVeths(node.nodeNs, 0), []);
    });
  });
}
