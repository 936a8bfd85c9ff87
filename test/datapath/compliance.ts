/**
 * The compliance suite of the `Datapath` seam: every implementation runs it. Each run builds a throwaway
 * node namespace; the datapath under test works there through a netlink socket and a sysctl writer
 * bound to it, so the machine's own namespace is never touched (I7). Its NetworkPolicy cases drive the
 * datapath's `policyBackend()` with `PodPolicy` values built by hand (the compiler is tested on its
 * own) and judge by new connections between real pods.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { constants } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ipJson, must, run } from '../../bed/exec.js';
import { NamespaceSet, netnsPath } from '../../bed/namespaces.js';
import { configurePodInterface } from '../../src/agent/cni/pod-interface.js';
import { decodeArpFrame, encodeArpFrame, gratuitousArp } from '../../src/arp/arp-frame.js';
import { ETH_P_ARP } from '../../src/arp/ethernet.js';
import { PodwireError } from '../../src/base/errors.js';
import { BROADCAST_MAC, ZERO_MAC } from '../../src/base/mac.js';
import type { Datapath, GatewayAddress } from '../../src/datapath/datapath.js';
import type { PolicyBackend } from '../../src/datapath/policy-backend.js';
import type { Allocation } from '../../src/ipam/allocator.js';
import { EthtoolSocket } from '../../src/kernel/ethtool.js';
import { KernelError } from '../../src/kernel/libc.js';
import { NfTables } from '../../src/kernel/netlink/nf-tables.js';
import { Rtnetlink } from '../../src/kernel/netlink/rtnetlink.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';
import { type Nft, nftIn } from '../../src/kernel/nft.js';
import { CaptureSocket, PacketSocket } from '../../src/kernel/packet-socket.js';
import { type SysctlWriter, writeSysctl } from '../../src/kernel/sysctl.js';
import type { DirectionPolicy, PodPolicy } from '../../src/policy/model.js';
import { ProbeServer, probe, reaches } from './ovs/policy-probe.js';

/** What the guard that sees the gateway's ARP counted: OVS's ARP_SPOOF_GUARD, the Linux bridge's own. */
function arpGuardDrops(counters: Array<{ guard: string; packets: number }> | undefined): number {
  const guard = (counters ?? []).find(
    (c) => c.guard === 'ARP_SPOOF_GUARD' || c.guard === 'GATEWAY_ARP_GUARD',
  );
  assert.ok(guard, `an ARP guard among the drop counters: ${JSON.stringify(counters)}`);
  return guard.packets;
}

export interface DatapathEnv {
  /** Netlink socket in the node namespace. */
  nl: Rtnetlink;
  sysctl: SysctlWriter;
  gateways: GatewayAddress[];
  /** Name of the node namespace (for `ip -n`). */
  nodeNs: string;
  /** Applies nftables scripts in the node namespace. */
  nft: Nft;
  /** nf_tables over netlink in the node namespace (the Linux bridge's pod guards). */
  nf: NfTables;
}

const GATEWAYS: GatewayAddress[] = [{ family: 4, address: '10.250.0.1', prefixLength: 24 }];

/** What an implementation needs around the suite, e.g. its own daemons in the node namespace. */
export interface ComplianceHooks {
  /** Runs once the node namespace exists, before any test. */
  before?(env: DatapathEnv): Promise<void>;
  /** Runs after every test, pass or fail, before the namespaces are removed. */
  after?(): Promise<void>;
}

/**
 * `gateway` is the interface that holds the gateway addresses in the node namespace (the Linux bridge
 * itself, or OVS's internal port).
 */
export function datapathCompliance(
  name: string,
  gateway: string,
  makeDatapath: (env: DatapathEnv) => Datapath,
  hooks: ComplianceHooks = {},
): void {
  describe(`Datapath compliance: ${name}`, () => {
    const spaces = new NamespaceSet();
    const handles: NetnsHandle[] = [];
    /** Every datapath a test made; stopped at the end so none holds a connection open. */
    const made: Datapath[] = [];
    let env: DatapathEnv;
    let home: NetnsHandle;
    let node: NetnsHandle;
    let nextPod = 2;
    const make = (e: DatapathEnv): Datapath => {
      const dp = makeDatapath(e);
      made.push(dp);
      return dp;
    };

    before(async () => {
      const nodeNs = await spaces.add('dp');
      home = NetnsHandle.current();
      handles.push(home);
      node = NetnsHandle.open(netnsPath(nodeNs));
      handles.push(node);
      const nl = inNetns(node, home, () => Rtnetlink.open());
      const sysctl: SysctlWriter = (key, value) => inNetns(node, home, () => writeSysctl(key, value));
      const nf = inNetns(node, home, () => NfTables.open());
      env = { nl, sysctl, gateways: GATEWAYS, nodeNs, nft: nftIn(nodeNs), nf };
      await hooks.before?.(env);
    });
    after(async () => {
      for (const dp of made) await dp.stop();
      await hooks.after?.();
      env?.nl.close();
      env?.nf.close();
      for (const h of handles) h.close();
      await spaces.cleanup();
    });

    /** A pod namespace with a veth whose host end is in the node namespace, configured like ADD does. */
    async function pod(): Promise<{
      ns: string;
      hostIfname: string;
      hostIfindex: number;
      mac: string;
      ip: string;
    }> {
      const ns = await spaces.add('dppod');
      const n = nextPod++;
      const ip = `10.250.0.${n}`;
      using podNs = NetnsHandle.open(netnsPath(ns));
      const hostIfname = `pwtdp${n}`;
      const host = env.nl.addVeth({ name: hostIfname, peerName: 'eth0', mtu: 1500, peerNetnsFd: podNs.fd });
      using podNl = inNetns(podNs, home, () => Rtnetlink.open());
      const alloc: Allocation = {
        ip,
        prefixLength: 24,
        gateway: '10.250.0.1',
        family: 4,
        rangeId: '10.250.0.0/24',
      };
      const iface = configurePodInterface(podNl, 'eth0', [alloc]);
      return { ns, hostIfname, hostIfindex: host.index, mac: iface.mac, ip };
    }

    const portOf = (p: Awaited<ReturnType<typeof pod>>) => ({
      hostIfname: p.hostIfname,
      hostIfindex: p.hostIfindex,
      containerId: p.ns,
      ifname: 'eth0',
      podMac: p.mac,
      podIps: [p.ip],
    });

    test('is not ready before start; start is idempotent', async () => {
      const dp = make(env);
      assert.equal(typeof dp.podTxChecksumming, 'boolean');
      assert.equal(dp.status().ready, false);
      await dp.start();
      await dp.start();
      assert.deepEqual(dp.status(), { ready: true });
      assert.deepEqual(await dp.ports(), []);
    });

    test('an attached port carries traffic to the gateway; check passes; detach is idempotent', async () => {
      const dp = make(env);
      await dp.start();
      const p = await pod();
      await dp.attachPort(portOf(p));
      assert.deepEqual(await dp.ports(), [p.hostIfname]);
      await dp.checkPort(p.hostIfname);
      const ping = await run('ip', ['netns', 'exec', p.ns, 'ping', '-c', '1', '-W', '2', '10.250.0.1']);
      assert.equal(ping.code, 0, ping.stdout);

      await dp.detachPort(p.hostIfname);
      await dp.detachPort(p.hostIfname);
      await assert.rejects(
        dp.checkPort(p.hostIfname),
        (e: unknown) => e instanceof PodwireError && e.code === 'ERR_CHECK_FAILED',
      );
      assert.deepEqual(await dp.ports(), []);
      await dp.detachPort('pwt-no-such');
      await assert.rejects(dp.checkPort('pwt-no-such'), /does not exist/);
      env.nl.deleteLinkByName(p.hostIfname);
    });

    test('an isolated port carries nothing at once, though its veth still exists', async () => {
      const dp = make(env);
      await dp.start();
      const p = await pod();
      await dp.attachPort(portOf(p));
      const before = await run('ip', ['netns', 'exec', p.ns, 'ping', '-c', '1', '-W', '2', '10.250.0.1']);
      assert.equal(before.code, 0, 'reachable while attached');
      await dp.isolatePort(p.hostIfname);
      assert.ok(env.nl.linkByName(p.hostIfname), 'the veth is still there');
      const after = await run('ip', ['netns', 'exec', p.ns, 'ping', '-c', '2', '-W', '1', '10.250.0.1']);
      assert.notEqual(after.code, 0, 'cut off once isolated');
      await dp.isolatePort(p.hostIfname);
      await dp.isolatePort('pwt-no-such');
      await dp.detachPort(p.hostIfname);
      env.nl.deleteLinkByName(p.hostIfname);
    });

    test('a restarted datapath adopts the node objects; running pods keep working', async () => {
      const first = make(env);
      await first.start();
      const p = await pod();
      await first.attachPort(portOf(p));
      await first.stop();
      const second = make(env);
      await second.start();
      assert.deepEqual(await second.ports(), [p.hostIfname]);
      await second.checkPort(p.hostIfname);
      const ping = await run('ip', ['netns', 'exec', p.ns, 'ping', '-c', '1', '-W', '2', '10.250.0.1']);
      assert.equal(ping.code, 0);
      await second.detachPort(p.hostIfname);
      env.nl.deleteLinkByName(p.hostIfname);
    });

    test('the gateway may send ARP only as itself: its own address and MAC (I5, failure 2)', async () => {
      const dp = make(env);
      await dp.start();
      const p = await pod();
      await dp.attachPort(portOf(p));
      const gw = env.nl.linkByName(gateway);
      assert.ok(gw?.mac, `gateway ${gateway}`);
      const mac = gw.mac.toLowerCase();
      using podNs = NetnsHandle.open(netnsPath(p.ns));
      const podIndex = Number(
        (await ipJson<Array<{ ifindex: number }>>(p.ns, ['link', 'show', 'eth0']))[0]?.ifindex,
      );
      using capture = inNetns(podNs, home, () => CaptureSocket.open(podIndex, ETH_P_ARP));
      using sender = inNetns(node, home, () => PacketSocket.open(gw.index));
      const other = '02:00:00:00:0b:ad';
      const sent = {
        own: gratuitousArp(mac, '10.250.0.1'),
        'a node address that is not the gateway': gratuitousArp(mac, '10.250.0.77'),
        'another MAC': gratuitousArp(other, '10.250.0.1'),
        'own Ethernet source, another ARP sender MAC': encodeArpFrame({
          dst: BROADCAST_MAC,
          src: mac,
          arp: { op: 1, sha: other, spa: '10.250.0.1', tha: ZERO_MAC, tpa: '10.250.0.1' },
        }),
      };
      const dropsBefore = arpGuardDrops(await dp.dropCounters?.());
      for (let round = 0; round < 3; round++) {
        for (const [what, frame] of Object.entries(sent)) {
          try {
            sender.send(frame);
          } catch (err) {
            // A frame dropped on the gateway's own egress (the Linux bridge's guard) fails the send.
            assert.ok(
              what !== 'own' && err instanceof KernelError && err.errno === constants.errno.ENOBUFS,
              `${what}: ${err}`,
            );
          }
        }
        await sleep(50);
      }
      await sleep(200);
      const seen = new Set(
        capture.drain().map((f) => {
          const d = decodeArpFrame(f);
          return `${d.src} ${d.arp.sha} ${d.arp.spa}`;
        }),
      );
      assert.ok(
        seen.has(`${mac} ${mac} 10.250.0.1`),
        `the gateway's own ARP arrives: ${[...seen].join('; ')}`,
      );
      assert.deepEqual([...seen], [`${mac} ${mac} 10.250.0.1`], 'nothing else from the gateway arrives');
      // OVS's userspace datapath updates flow statistics every few hundred milliseconds.
      let drops = 0;
      for (const deadline = Date.now() + 5000; Date.now() < deadline; await sleep(100)) {
        drops = arpGuardDrops(await dp.dropCounters?.()) - dropsBefore;
        if (drops >= 9) break;
      }
      assert.ok(drops >= 9, `the 9 forged frames are counted by the gateway's ARP guard (${drops})`);
      await dp.detachPort(p.hostIfname);
      env.nl.deleteLinkByName(p.hostIfname);
    });

    test('the node forwards between pods and the outside once started (ip_forward=1)', async () => {
      const dp = make(env);
      await dp.start();
      const out = await must('ip', ['netns', 'exec', env.nodeNs, 'sysctl', '-n', 'net.ipv4.ip_forward']);
      assert.equal(out.trim(), '1');
    });

    describe('NetworkPolicy through policyBackend()', () => {
      const PORT = 8080;
      const UDP_PORT = 5353;
      let dp: Datapath;
      let backend: PolicyBackend;
      const pods: Array<Awaited<ReturnType<typeof pod>>> = [];
      const servers: ProbeServer[] = [];
      const ingress = (
        rules: Array<{ peers: 'any' | string[]; tcp?: number; udp?: number }>,
      ): DirectionPolicy => ({
        policies: ['default/compliance'],
        rules: rules.map((r, i) => ({
          id: `default/compliance/ingress/${i}`,
          entries: [
            {
              peers: r.peers,
              ports: [
                ...(r.tcp ? [{ protocol: 'TCP' as const, first: r.tcp, last: r.tcp }] : []),
                ...(r.udp ? [{ protocol: 'UDP' as const, first: r.udp, last: r.udp }] : []),
              ],
            },
          ],
        })),
      });
      const policyOf = (
        p: Awaited<ReturnType<typeof pod>>,
        inbound: DirectionPolicy | null,
        outbound: DirectionPolicy | null = null,
      ): PodPolicy => ({ namespace: 'default', name: p.ns, ips: [p.ip], ingress: inbound, egress: outbound });

      before(async () => {
        // The Linux bridge judges bridged frames in the inet hooks through br_netfilter, per namespace;
        // where br_netfilter is not loaded (the VM's kernel), its policyBackend() says so itself.
        if (existsSync('/proc/sys/net/bridge')) {
          await env.sysctl('net/bridge/bridge-nf-call-iptables', '1');
          await env.sysctl('net/bridge/bridge-nf-call-ip6tables', '1');
        }
        dp = make(env);
        await dp.start();
        for (let i = 0; i < 3; i++) {
          const p = await pod();
          if (!dp.podTxChecksumming) {
            // As ADD does (cmd-add.ts): this datapath wants the pod's checksums complete.
            using podNs = NetnsHandle.open(netnsPath(p.ns));
            using ethtool = inNetns(podNs, home, () => EthtoolSocket.open());
            ethtool.setTxChecksumming('eth0', false);
          }
          await dp.attachPort(portOf(p));
          pods.push(p);
          servers.push(await ProbeServer.start(p.ns, [PORT, UDP_PORT]));
        }
        // As the agent does it: from the node namespace (the backend's own sockets and checks are there).
        const policyBackend = dp.policyBackend?.bind(dp);
        assert.ok(policyBackend, `${name} has a policy backend`);
        backend = inNetns(node, home, () => policyBackend());
        await backend.start();
      });
      after(async () => {
        await backend?.remove().catch(() => undefined);
        for (const s of servers) await s.stop();
        for (const p of pods) {
          await dp.detachPort(p.hostIfname).catch(() => undefined);
          if (env.nl.linkByName(p.hostIfname)) env.nl.deleteLinkByName(p.hostIfname);
        }
      });

      test('isolation, an allowed peer and port, replies, the node itself; remove() lifts it', async () => {
        const [a, b, c] = pods as [
          Awaited<ReturnType<typeof pod>>,
          Awaited<ReturnType<typeof pod>>,
          Awaited<ReturnType<typeof pod>>,
        ];
        await backend.apply([]);
        const ping0 = await run('ip', ['netns', 'exec', c.ns, 'ping', '-c', '1', '-W', '2', b.ip]);
        assert.ok(
          await reaches(c.ns, 'tcp', b.ip, PORT),
          `no policy: c reaches b ${JSON.stringify(ping0)} ${await must('ip', ['netns', 'exec', c.ns, 'ip', 'neigh'])} ${await must('ip', ['netns', 'exec', c.ns, 'ip', 'addr'])}`,
        );
        // b: ingress from a on TCP 8080 only, and egress isolated with no rule.
        await backend.apply([
          policyOf(b, ingress([{ peers: [`${a.ip}/32`], tcp: PORT }]), {
            policies: ['default/compliance'],
            rules: [],
          }),
        ]);
        assert.ok(
          await reaches(a.ns, 'tcp', b.ip, PORT),
          "a to b TCP 8080 is allowed, and its replies pass b's egress",
        );
        assert.ok(!(await reaches(a.ns, 'udp', b.ip, UDP_PORT)), 'a to b UDP 5353 is not allowed');
        assert.ok(!(await reaches(c.ns, 'tcp', b.ip, PORT)), 'c to b is not allowed');
        assert.ok(!(await reaches(b.ns, 'tcp', c.ip, PORT)), 'b opens nothing (egress isolated)');
        assert.ok(await reaches(c.ns, 'tcp', a.ip, PORT), 'a is not isolated');
        const ping = await run('ip', ['netns', 'exec', env.nodeNs, 'ping', '-c', '1', '-W', '2', b.ip]);
        assert.equal(ping.code, 0, `the node itself reaches the isolated pod: ${ping.stdout}`);
        await backend.remove();
        await backend.start();
        assert.ok(await reaches(c.ns, 'tcp', b.ip, PORT), 'removed: c reaches b again');
      });

      test('a change is in force for new connections when apply() returns, both ways, ten times over', async () => {
        const [a, b] = pods as [Awaited<ReturnType<typeof pod>>, Awaited<ReturnType<typeof pod>>];
        const allowed = [policyOf(b, ingress([{ peers: [`${a.ip}/32`], tcp: PORT, udp: UDP_PORT }]))];
        const denied = [policyOf(b, ingress([{ peers: ['10.99.0.0/16'], tcp: PORT, udp: UDP_PORT }]))];
        for (let round = 0; round < 10; round++) {
          await backend.apply(allowed);
          assert.equal(await probe(a.ns, 'udp', b.ip, UDP_PORT, 3), 3, `round ${round}: allowed UDP`);
          assert.ok(await reaches(a.ns, 'tcp', b.ip, PORT), `round ${round}: allowed TCP`);
          await backend.apply(denied);
          assert.equal(await probe(a.ns, 'udp', b.ip, UDP_PORT, 3), 0, `round ${round}: denied UDP answered`);
          assert.ok(!(await reaches(a.ns, 'tcp', b.ip, PORT)), `round ${round}: denied TCP answered`);
        }
        await backend.apply([]);
      });
    });
  });
}
