/**
 * The Linux bridge's pod guards through a pod's life (issue 12, decision 17): in place before the
 * port joins the bridge and comes up, checked by CHECK, restored by reconcile after an agent restart
 * whatever the kernel lost meanwhile, gone with DEL; the pod's own sysctls; `podwire status`. The
 * frames they stop are spoofing.ts's business.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { must, run } from '../../bed/exec.js';
import { NamespaceSet, netnsPath } from '../../bed/namespaces.js';
import { ROOT, resultIps, TestNode } from '../../bed/node.js';
import { configurePodInterface } from '../../src/agent/cni/pod-interface.js';
import { BridgeDatapath } from '../../src/datapath/linux-bridge/bridge-datapath.js';
import { missingPodGuard, POD_GUARD_TABLE } from '../../src/datapath/linux-bridge/pod-guard.js';
import { NfTables } from '../../src/kernel/netlink/nf-tables.js';
import { Rtnetlink } from '../../src/kernel/netlink/rtnetlink.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';
import { nftIn } from '../../src/kernel/nft.js';
import { writeSysctl } from '../../src/kernel/sysctl.js';
import { hostVethOf, podMacOf } from './ovs/ovs-node.js';

const nftList = (ns: string) =>
  must('ip', ['netns', 'exec', ns, 'nft', 'list', 'table', 'bridge', POD_GUARD_TABLE]);

describe('pod guard before the port comes up', () => {
  const spaces = new NamespaceSet();
  const handles: NetnsHandle[] = [];
  let nl: Rtnetlink | undefined;
  let nf: NfTables | undefined;
  after(async () => {
    nl?.close();
    nf?.close();
    for (const h of handles) h.close();
    await spaces.cleanup();
  });

  // Depends on bridge-datapath.ts `#attach`: `this.#pods?.add(port)` before `setMaster`/`setLinkUp`.
  test("the pod's elements are in the kernel when the port joins the bridge and when it comes up; no nft after start", async () => {
    const nodeNs = await spaces.add('gnode');
    const podNsName = await spaces.add('gpod');
    const home = NetnsHandle.current();
    const node = NetnsHandle.open(netnsPath(nodeNs));
    const podNs = NetnsHandle.open(netnsPath(podNsName));
    handles.push(home, node, podNs);
    nl = inNetns(node, home, () => Rtnetlink.open());
    nf = inNetns(node, home, () => NfTables.open());
    const host = nl.addVeth({ name: 'pwtg0', peerName: 'eth0', mtu: 1500, peerNetnsFd: podNs.fd });
    using podNl = inNetns(podNs, home, () => Rtnetlink.open());
    const ip = '10.251.0.2';
    const pod = configurePodInterface(podNl, 'eth0', [
      { ip, prefixLength: 24, gateway: '10.251.0.1', family: 4, rangeId: '10.251.0.0/24' },
    ]);
    const identity = { hostIfname: 'pwtg0', mac: pod.mac, ips: [ip] };
    const seen: string[] = [];
    const realNl = nl;
    const guardNow = () => (nf ? (missingPodGuard(nf, identity) ?? 'complete') : 'no socket');
    // The real netlink socket, with a look at the kernel's sets just before the port joins and comes up.
    const watched = new Proxy(realNl, {
      get(target, prop, receiver) {
        const v = Reflect.get(target, prop, receiver);
        if (typeof v !== 'function') return v;
        return (...args: unknown[]) => {
          if ((prop === 'setMaster' || prop === 'setLinkUp') && args[0] === host.index)
            seen.push(`${String(prop)}: ${guardNow()}`);
          return v.apply(target, args);
        };
      },
    });
    // `nft` runs at start only: the port's attach, check and removal must not spawn it (issue 12).
    const nftCalls: string[] = [];
    const realNft = nftIn(nodeNs);
    const dp = new BridgeDatapath({
      nl: watched,
      nf,
      nft: {
        apply: (script) => {
          nftCalls.push('apply');
          return realNft.apply(script);
        },
        run: (args) => {
          nftCalls.push(`run ${args.join(' ')}`);
          return realNft.run(args);
        },
      },
      sysctl: (k, v) => inNetns(node, home, () => writeSysctl(k, v)),
      bridge: 'pwtbr-g',
      mtu: 1500,
      gateways: [{ family: 4, address: '10.251.0.1', prefixLength: 24 }],
    });
    await dp.start();
    const atStart = nftCalls.length;
    assert.equal(missingPodGuard(nf, identity), 'pod_ports', 'no guard before attach');
    await dp.attachPort({
      hostIfname: 'pwtg0',
      hostIfindex: host.index,
      containerId: 'g',
      ifname: 'eth0',
      podMac: pod.mac,
      podIps: [ip],
    });
    assert.deepEqual(seen, ['setMaster: complete', 'setLinkUp: complete']);
    await dp.checkPort('pwtg0');
    await dp.isolatePort('pwtg0');
    assert.equal(missingPodGuard(nf, identity), 'pod_ports', 'gone once isolated (DEL)');
    await dp.detachPort('pwtg0');
    assert.deepEqual(nftCalls.slice(atStart), [], 'no nft process after start');
    await dp.stop();
    nl.deleteLinkByName('pwtg0');
  });
});

describe('pod guard through ADD, CHECK, restart and DEL (agent)', () => {
  const node = new TestNode({ podCIDRs: ['10.244.33.0/24', 'fd00:10:244:33::/64'] });
  let pod = '';
  let add: Awaited<ReturnType<TestNode['cni']>>;
  let veth = '';
  let mac = '';
  let v4 = '';

  before(async () => {
    await node.setup();
    pod = await node.addPod('guarded');
    add = await node.cni({ command: 'ADD', containerId: 'guarded', netns: pod });
    assert.equal(add.code, 0, add.stdout);
    veth = hostVethOf(add);
    mac = podMacOf(add).toLowerCase();
    v4 = resultIps(add)[0] as string;
  });
  after(() => node.cleanup());

  const check = () =>
    node.cni({ command: 'CHECK', containerId: 'guarded', netns: pod, conf: { prevResult: add.json } });

  const elementsOf = async (name: string) =>
    (await nftList(node.nodeNs)).split('\n').filter((l) => l.includes(`"${name}"`)).length;

  // Depends on `ip6 saddr :: return` in ns_guard (src/datapath/linux-bridge/pod-guard.ts): Linux puts a
  // nonce option (RFC 7527) in every DAD probe, which the SLL check alone would drop.
  test("a dual-stack pod's own start-up traffic drops nothing: DAD probes with a nonce pass", async () => {
    const counters = async () =>
      (
        await run('ip', [
          'netns',
          'exec',
          node.nodeNs,
          'nft',
          'list',
          'counters',
          'table',
          'bridge',
          POD_GUARD_TABLE,
        ])
      ).stdout;
    const second = await node.addPod('dad');
    const added = await node.cni({ command: 'ADD', containerId: 'dad', netns: second });
    assert.equal(added.code, 0, added.stdout);
    try {
      // The link-local address's DAD probe goes out within a second of link-up.
      const deadline = Date.now() + 3000;
      let link = '';
      while (Date.now() < deadline) {
        link = (await run('ip', ['-n', second, '-6', 'addr', 'show', 'dev', 'eth0', 'scope', 'link'])).stdout;
        if (link.includes('inet6') && !link.includes('tentative')) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.ok(link.includes('inet6') && !link.includes('tentative'), `DAD done: ${link}`);
      assert.doesNotMatch(
        await counters(),
        /counter ND_GUARD \{\s*packets [1-9]/,
        'no ND frame of a pod dropped',
      );
    } finally {
      assert.equal((await node.cni({ command: 'DEL', containerId: 'dad', netns: second })).code, 0);
    }
  });

  // Depends on pod-sysctls.ts, called from cmd-add.ts before the pod interface comes up.
  test("the pod's interface takes nothing from router advertisements: accept_ra=0, autoconf=0", async () => {
    for (const key of ['accept_ra', 'autoconf']) {
      const v = await must('ip', ['netns', 'exec', pod, 'sysctl', '-n', `net.ipv6.conf.eth0.${key}`]);
      assert.equal(v.trim(), '0', key);
    }
  });

  test('podwire status shows the guards on', async () => {
    const r = await run(`${ROOT}/bin/podwire`, ['status', '--config', node.configPath]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /pod guards: +on/);
  });

  // Depends on bridge-datapath.ts checkPort -> PodGuards.check (missingPodGuard).
  test('CHECK passes with the guard whole, and fails with 104 once one element is deleted by hand', async () => {
    assert.equal((await check()).code, 0);
    await must('ip', [
      'netns',
      'exec',
      node.nodeNs,
      'nft',
      'delete',
      'element',
      'bridge',
      POD_GUARD_TABLE,
      'pod_ip4',
      `{ "${veth}" . ${mac} . ${v4} }`,
    ]);
    const drift = await check();
    assert.equal(drift.code, 1);
    assert.equal((drift.json as { code: number }).code, 104, drift.stdout);
    assert.match((drift.json as { msg: string }).msg, /pod guard of .* set pod_ip4/);
  });

  // Depends on PodGuards.start (the table by nft, elements read back) and reconcile's attachPort.
  test('an agent restarted after the kernel lost the guard puts it back (one set flushed; the whole table)', async () => {
    for (const loss of [
      ['flush', 'set', 'bridge', POD_GUARD_TABLE, 'pod_arp'],
      ['delete', 'table', 'bridge', POD_GUARD_TABLE],
    ]) {
      await node.stopAgent('SIGKILL');
      await must('ip', ['netns', 'exec', node.nodeNs, 'nft', ...loss]);
      await node.startAgent();
      assert.equal((await check()).code, 0, `CHECK after ${loss.join(' ')}`);
      const listing = await nftList(node.nodeNs);
      assert.ok(listing.includes(`"${veth}" . ${mac} . ${mac} . ${v4}`), listing);
      const ping = await run('ip', ['netns', 'exec', pod, 'ping', '-c', '1', '-W', '2', '10.244.33.1']);
      assert.equal(ping.code, 0, `the pod still reaches its gateway after ${loss.join(' ')}`);
    }
  });

  // Depends on bridge-datapath.ts isolatePort -> PodGuards.remove.
  test('DEL removes every element of the pod', async () => {
    assert.ok((await elementsOf(veth)) > 0);
    assert.equal((await node.cni({ command: 'DEL', containerId: 'guarded', netns: pod })).code, 0);
    assert.equal(await elementsOf(veth), 0, await nftList(node.nodeNs));
  });
});

describe('podGuards: off (agent)', () => {
  const node = new TestNode({ podCIDRs: ['10.244.34.0/24'], config: { podGuards: 'off' } });
  before(() => node.setup());
  after(() => node.cleanup());

  // Depends on bridge-datapath.ts #startPodGuards (the warning) and cli/commands.ts (the status line).
  test('the agent warns at start, podwire status says so, and pods are attached without a guard', async () => {
    assert.match(node.logs, /pod guards are off \(podGuards: off\)/);
    const r = await run(`${ROOT}/bin/podwire`, ['status', '--config', node.configPath]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /pod guards: +OFF \(podGuards: off\)/);
    const pod = await node.addPod('unguarded');
    const add = await node.cni({ command: 'ADD', containerId: 'unguarded', netns: pod });
    assert.equal(add.code, 0, add.stdout);
    const table = await run('ip', [
      'netns',
      'exec',
      node.nodeNs,
      'nft',
      'list',
      'table',
      'bridge',
      POD_GUARD_TABLE,
    ]);
    assert.notEqual(table.code, 0, 'no guard table');
    const check = await node.cni({
      command: 'CHECK',
      containerId: 'unguarded',
      netns: pod,
      conf: { prevResult: add.json },
    });
    assert.equal(check.code, 0, check.stdout);
    assert.equal((await node.cni({ command: 'DEL', containerId: 'unguarded', netns: pod })).code, 0);
  });
});
