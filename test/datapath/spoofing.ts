/**
 * The pod identity guards (issue 12), one suite run against both datapaths (spoofing-*.test.ts): a pod
 * (the attacker) forges frames with scapy, and each test asserts on the VICTIMS' state — the node's
 * and other pods' neighbour entries, their routes, and the ICMP counters of what their kernels
 * received — not only on drop counters. Every forged frame is followed by a genuine one that must
 * arrive (so the path works and the forged frames had their chance).
 *
 * Each test names the product lines it depends on: on the Linux bridge, a rule of
 * `src/datapath/linux-bridge/pod-guard.ts` (CHAINS) and the per-pod elements of `podGuardKeys`; on OVS,
 * a flow of `src/datapath/ovs/pipeline.ts`. With the Linux bridge's guards removed (`podGuards: off`,
 * checked when this suite was written: see decision 17) every test here fails on that datapath, and
 * each fails on its own assertion when only the rule it names is taken out of the kernel's table.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { patient } from '../../bed/emulation.js';
import { ipJson, must, run } from '../../bed/exec.js';
import { metricSample, scrapeMetrics } from '../../bed/metrics.js';
import { netnsPath } from '../../bed/namespaces.js';
import { resultIps, TestNode } from '../../bed/node.js';
import { OVS_DATAPATH } from '../../bed/ovs.js';
import { capture } from '../../bed/tcpdump.js';
import { udpListener } from '../../bed/udp-listener.js';
import { eui64LinkLocal } from '../../src/base/mac.js';
import { EthtoolSocket } from '../../src/kernel/ethtool.js';
import { inNetns, NetnsHandle } from '../../src/kernel/netns.js';
import { sendChecksumForgery } from './checksum-forge.js';
import { podMacOf } from './ovs/ovs-node.js';
import { ScapySender, scapyAvailable } from './ovs/scapy-sender.js';
import { PYTHON } from './ovs/traffic.js';
import {
  ALL_NODES_MAC,
  BCAST,
  eventually,
  FOREIGN_MAC,
  neighMac,
  type Pod,
  ping,
  type SpoofingBed,
  snmp,
} from './spoofing-bed.js';
import { invalidEgressTests } from './spoofing-egress.js';
import { neighbourDiscoveryGuardTests } from './spoofing-nd.js';

const METRICS_PORT = 9417;

/** Equivalent to: `ip netns exec NS ethtool -K eth0 tx on|off`, as a pod with CAP_NET_ADMIN may. */
function setPodTxChecksumming(ns: string, on: boolean): void {
  using home = NetnsHandle.current();
  using pod = NetnsHandle.open(netnsPath(ns));
  using eth = inNetns(pod, home, () => EthtoolSocket.open());
  eth.setTxChecksumming('eth0', on);
}

/** A neighbour entry refreshed less than locktime (1 s) ago ignores an ARP that would change it. */
const ARP_LOCKTIME_MS = 1100;

export function spoofingSuite(datapath: 'linux-bridge' | 'ovs', subnet: number): void {
  const cidr4 = `10.244.${subnet}.0/24`;
  const GW4 = `10.244.${subnet}.1`;
  const GW6 = `fd00:10:244:${subnet}::1`;
  const label = datapath === 'ovs' ? `ovs (${OVS_DATAPATH})` : datapath;
  describe(`pod identity guards: ${label}`, {
    skip: !scapyAvailable() && 'python3-scapy is not installed',
  }, () => {
    const node = new TestNode({
      datapath,
      podCIDRs: [cidr4, `fd00:10:244:${subnet}::/64`],
      config: { metricsAddress: `127.0.0.1:${METRICS_PORT}` },
    });
    /** The node's interface holding the gateway addresses. */
    const gwIf = datapath === 'ovs' ? 'podwire-gw0' : 'podwire0';
    let gwMac = '';
    let attacker: Pod;
    let neighbour: Pod;
    let third: Pod;
    let scapy: ScapySender;

    async function addPod(id: string, conf?: Record<string, unknown>): Promise<Pod> {
      const ns = await node.addPod(id);
      const add = await node.cni({ command: 'ADD', containerId: id, netns: ns, ...(conf ? { conf } : {}) });
      assert.equal(add.code, 0, add.stdout);
      const [v4, v6] = resultIps(add) as [string, string];
      const mac = podMacOf(add).toLowerCase();
      return { ns, mac, v4, v6, ll: eui64LinkLocal(mac) };
    }

    async function drops(guard: string): Promise<number> {
      const text = await scrapeMetrics(node.nodeNs, METRICS_PORT);
      return metricSample(text, `podwire_datapath_dropped_packets_total{guard="${guard}"}`) ?? 0;
    }

    /** The guard counted at least `n` more drops than `before` (OVS credits its counters late). */
    async function counted(guard: string, before: number, n: number): Promise<void> {
      let now = before;
      const ok = await eventually(async () => {
        now = await drops(guard);
        return now >= before + n;
      }, 5000);
      assert.ok(ok, `${guard} counted ${now - before} drops, want >= ${n}`);
    }

    const bed = { node, gwIf, GW6, drops, counted } as SpoofingBed;

    before(async () => {
      await node.setup();
      attacker = await addPod('attacker');
      neighbour = await addPod('neighbour');
      third = await addPod('third');
      scapy = await ScapySender.start(attacker.ns);
      const [gw] = await ipJson<Array<{ address: string }>>(node.nodeNs, ['link', 'show', gwIf]);
      gwMac = gw?.address.toLowerCase() ?? '';
      assert.match(gwMac, /^[0-9a-f:]{17}$/);
      Object.assign(bed, { gwMac, attacker, neighbour, third, scapy });
    });
    after(async () => {
      await scapy?.close();
      await node.cleanup();
    });

    const garp = (src: string, sha: string, ip: string, op: number) =>
      `Ether(src='${src}', dst='${BCAST}')/ARP(op=${op}, hwsrc='${sha}', psrc='${ip}', hwdst='${BCAST}', pdst='${ip}')`;
    const arpRequest = (src: string, sha: string, spa: string, tpa: string) =>
      `Ether(src='${src}', dst='${BCAST}')/ARP(op=1, hwsrc='${sha}', psrc='${spa}', pdst='${tpa}')`;

    /** A genuine ARP request from the attacker to `victim`: its entry for the attacker becomes right. */
    async function genuineArpReaches(victim: Pod): Promise<void> {
      await must('ip', ['-n', victim.ns, 'neigh', 'flush', 'to', attacker.v4]);
      await scapy.send(arpRequest(attacker.mac, attacker.mac, attacker.v4, victim.v4), 1);
      assert.ok(
        await eventually(async () => (await neighMac(victim.ns, attacker.v4, 'eth0')) === attacker.mac),
        'the genuine ARP request reached the victim',
      );
    }

    // Linux bridge: arp_guard's `@pod_arp accept` + `counter name ARP_SPOOF_GUARD drop`.
    // OVS: table 10 (ARP_SPOOF_GUARD) pod flows and its priority-0 drop.
    test("ARP claiming the gateway's IP leaves the other pods' entry for the gateway alone", async () => {
      await ping(neighbour.ns, GW4);
      assert.equal(await neighMac(neighbour.ns, GW4, 'eth0'), gwMac);
      await sleep(ARP_LOCKTIME_MS);
      const before = await drops('ARP_SPOOF_GUARD');
      const a = attacker.mac;
      await scapy.send(garp(a, a, GW4, 2), 3);
      await scapy.send(garp(a, a, GW4, 1), 3);
      await scapy.send(arpRequest(a, a, GW4, neighbour.v4), 3);
      await genuineArpReaches(neighbour);
      assert.equal(await neighMac(neighbour.ns, GW4, 'eth0'), gwMac, "the neighbour's gateway entry");
      await counted('ARP_SPOOF_GUARD', before, 9);
    });

    // Same lines as above: the sender IP must be one of the pod's own.
    test("ARP claiming another pod's IP leaves the node's and the other pods' entries alone", async () => {
      await ping(node.nodeNs, neighbour.v4);
      await ping(third.ns, neighbour.v4);
      await sleep(ARP_LOCKTIME_MS);
      const a = attacker.mac;
      await scapy.send(garp(a, a, neighbour.v4, 2), 3);
      await scapy.send(garp(a, a, neighbour.v4, 1), 3);
      await scapy.send(arpRequest(a, a, neighbour.v4, third.v4), 3);
      await genuineArpReaches(third);
      assert.equal(await neighMac(node.nodeNs, neighbour.v4, gwIf), neighbour.mac, "the node's entry");
      assert.equal(await neighMac(third.ns, neighbour.v4, 'eth0'), neighbour.mac, "the third pod's entry");
    });

    // Linux bridge: `@pod_arp` keys hold the pod's MAC twice (ether saddr, arp saddr ether).
    // OVS: table 10 matches dl_src and arp_sha.
    test("ARP with a foreign MAC (Ethernet source or ARP sender) does not move the pod's own entries", async () => {
      await ping(node.nodeNs, attacker.v4);
      await ping(third.ns, attacker.v4);
      await sleep(ARP_LOCKTIME_MS);
      const a = attacker.mac;
      const f = FOREIGN_MAC;
      await scapy.send(garp(f, f, attacker.v4, 2), 3);
      await scapy.send(garp(a, f, attacker.v4, 2), 3);
      await scapy.send(garp(f, a, attacker.v4, 2), 3);
      await scapy.send(arpRequest(f, f, attacker.v4, third.v4), 3);
      await genuineArpReaches(neighbour);
      assert.equal(await neighMac(node.nodeNs, attacker.v4, gwIf), a, "the node's entry for the attacker");
      assert.equal(await neighMac(third.ns, attacker.v4, 'eth0'), a, "the third pod's entry");
      if (datapath === 'linux-bridge') {
        // The bridge learns source MACs after prerouting: a dropped frame teaches it nothing.
        const fdb = await must('bridge', ['-n', node.nodeNs, 'fdb', 'show']);
        assert.ok(!fdb.includes(FOREIGN_MAC), `the bridge learned the foreign MAC:\n${fdb}`);
      }
    });

    /** Sends the forged frames to `victim`, then a genuine echo that must arrive; returns the count delta of forged ones. */
    async function echoes(victim: Pod, key: string, forged: string[], genuine: string): Promise<number> {
      const before = await snmp(victim.ns, key);
      for (const f of forged) await scapy.send(f, 3);
      await scapy.send(genuine, 1);
      let after = before;
      assert.ok(
        await eventually(async () => {
          after = await snmp(victim.ns, key);
          return after >= before + 1;
        }),
        `the genuine echo reached the victim (${key} ${before} -> ${after})`,
      );
      await sleep(200);
      return (await snmp(victim.ns, key)) - before - 1;
    }

    // Linux bridge: ip4_guard's `@pod_ip4 accept` + `counter name IP_SPOOF_GUARD drop`.
    // OVS: table 40 (IP_SPOOF_GUARD).
    test('IPv4 with a forged source address or MAC never reaches the victim', async () => {
      const a = attacker;
      const to = `Ether(src='${a.mac}', dst='${third.mac}')`;
      const before = await drops('IP_SPOOF_GUARD');
      const extra = await echoes(
        third,
        'Icmp InEchos',
        [
          `${to}/IP(src='${neighbour.v4}', dst='${third.v4}')/ICMP()`,
          `${to}/IP(src='${GW4}', dst='${third.v4}')/ICMP()`,
          `${to}/IP(src='192.0.2.7', dst='${third.v4}')/ICMP()`,
          `Ether(src='${FOREIGN_MAC}', dst='${third.mac}')/IP(src='${a.v4}', dst='${third.v4}')/ICMP()`,
        ],
        `${to}/IP(src='${a.v4}', dst='${third.v4}')/ICMP()`,
      );
      assert.equal(extra, 0, 'forged IPv4 echoes the victim received');
      await counted('IP_SPOOF_GUARD', before, 12);
    });

    // Linux bridge: ip6_guard's `@pod_ip6 accept` + `counter name IP_SPOOF_GUARD drop`.
    // OVS: table 40 (IP_SPOOF_GUARD), ipv6_src flows. (`::` is allowed for ICMPv6 on both: DAD, MLD.)
    test('IPv6 with a forged source address or MAC never reaches the victim', async () => {
      const a = attacker;
      const to = `Ether(src='${a.mac}', dst='${third.mac}')`;
      const before = await drops('IP_SPOOF_GUARD');
      const extra = await echoes(
        third,
        'Icmp6InEchos',
        [
          `${to}/IPv6(src='${neighbour.v6}', dst='${third.v6}')/ICMPv6EchoRequest()`,
          `${to}/IPv6(src='${neighbour.ll}', dst='${third.v6}')/ICMPv6EchoRequest()`,
          `${to}/IPv6(src='2001:db8::7', dst='${third.v6}')/ICMPv6EchoRequest()`,
          `Ether(src='${FOREIGN_MAC}', dst='${third.mac}')/IPv6(src='${a.v6}', dst='${third.v6}')/ICMPv6EchoRequest()`,
        ],
        `${to}/IPv6(src='${a.v6}', dst='${third.v6}')/ICMPv6EchoRequest()`,
      );
      assert.equal(extra, 0, 'forged IPv6 echoes the victim received');
      await counted('IP_SPOOF_GUARD', before, 12);
    });

    // Linux bridge: ip6_guard's `icmpv6 type { nd-router-advert, nd-redirect } ... drop`.
    // OVS: table 0's icmp_type=134 drop flow.
    test('a router advertisement from a pod reaches neither the node nor the other pods', async () => {
      const a = attacker;
      const before = {
        neighbour: await snmp(neighbour.ns, 'Icmp6InRouterAdvertisements'),
        // The gateway interface: on OVS's userspace datapath the node's stack also sees every frame on
        // the host veth itself (which has accept_ra=0), as it does on an uplink (decision 15).
        node: await snmp(node.nodeNs, 'Icmp6InRouterAdvertisements', gwIf),
      };
      await scapy.send(
        `Ether(src='${a.mac}', dst='${ALL_NODES_MAC}')/IPv6(src='${a.ll}', dst='ff02::1', hlim=255)/ICMPv6ND_RA(routerlifetime=1800)/ICMPv6NDOptSrcLLAddr(lladdr='${a.mac}')/ICMPv6NDOptPrefixInfo(prefix='2001:db8:12::', prefixlen=64, L=1, A=1)`,
        3,
      );
      // A genuine multicast frame (an echo to all nodes) that must reach the neighbour.
      const echoBefore = await snmp(neighbour.ns, 'Icmp6InEchos');
      await scapy.send(
        `Ether(src='${a.mac}', dst='${ALL_NODES_MAC}')/IPv6(src='${a.v6}', dst='ff02::1')/ICMPv6EchoRequest()`,
        1,
      );
      assert.ok(
        await eventually(async () => (await snmp(neighbour.ns, 'Icmp6InEchos')) > echoBefore),
        'the genuine multicast reached the neighbour',
      );
      await sleep(200);
      assert.equal(
        await snmp(neighbour.ns, 'Icmp6InRouterAdvertisements'),
        before.neighbour,
        'RAs at the neighbour',
      );
      assert.equal(
        await snmp(node.nodeNs, 'Icmp6InRouterAdvertisements', gwIf),
        before.node,
        "RAs at the node's gateway interface",
      );
      for (const ns of [neighbour.ns, node.nodeNs]) {
        const routes = await must('ip', ['-n', ns, '-6', 'route', 'show']);
        assert.ok(
          !routes.includes('proto ra') && !routes.includes('2001:db8:12:'),
          `routes in ${ns}:\n${routes}`,
        );
        const addrs = await must('ip', ['-n', ns, '-6', 'addr', 'show']);
        assert.ok(!addrs.includes('2001:db8:12:'), `addresses in ${ns}:\n${addrs}`);
      }
    });

    // Linux bridge: the same RA/redirect rule. OVS: table 0's icmp_type=137 drop flow.
    test('a redirect from a pod never reaches the victim', async () => {
      const a = attacker;
      const to = `Ether(src='${a.mac}', dst='${third.mac}')`;
      const before = await snmp(third.ns, 'Icmp6InRedirects');
      await scapy.send(
        `${to}/IPv6(src='${a.ll}', dst='${third.v6}', hlim=255)/ICMPv6ND_Redirect(tgt='${a.ll}', dst='${neighbour.v6}')/ICMPv6NDOptDstLLAddr(lladdr='${a.mac}')`,
        3,
      );
      const echo = await snmp(third.ns, 'Icmp6InEchos');
      await scapy.send(`${to}/IPv6(src='${a.v6}', dst='${third.v6}')/ICMPv6EchoRequest()`, 1);
      assert.ok(
        await eventually(async () => (await snmp(third.ns, 'Icmp6InEchos')) > echo),
        'the genuine echo arrived',
      );
      await sleep(200);
      assert.equal(await snmp(third.ns, 'Icmp6InRedirects'), before, 'redirects at the victim');
    });

    // DHCP snooping's rule: a client port sends no server messages. A pod that answers DHCP (an offer
    // naming itself as router and DNS server) would configure the underlay's hosts in bridging mode
    // (found in a security review with busybox udhcpd in a pod). Clients check only the destination
    // port, so the source port is the sender's choice: a review answered from 1067 (decision 34).
    // Linux bridge: ip4_guard's `udp dport 68 counter name CLASSIFIER drop` and ip6_guard's `udp dport
    // 546 ...` (pod-guard.ts CHAINS). OVS: table 0's `udp,tp_dst=68` and `udp6,tp_dst=546` drop flows
    // (pipeline.ts pipelineFlows). Decisions 29, 34.
    test("a DHCP or DHCPv6 server's message from a pod never reaches a client, whatever its source port", async () => {
      const a = attacker;
      // Long enough for the sends below, also in the emulated guest.
      const seconds = patient(4000) / 1000;
      const client4 = await udpListener(third.ns, 4, 68, seconds);
      const client6 = await udpListener(third.ns, 6, 546, seconds);
      // The third pod's server ports: what a client sends there must arrive (pods stay DHCP clients).
      const server4 = await udpListener(third.ns, 4, 67, seconds);
      const server6 = await udpListener(third.ns, 6, 547, seconds);
      const before = await drops('CLASSIFIER');
      const v4 = (sport: number, dport: number, payload: string) =>
        `Ether(src='${a.mac}', dst='${BCAST}')/IP(src='${a.v4}', dst='255.255.255.255')/UDP(sport=${sport}, dport=${dport})/Raw(b'${payload}')`;
      // To the third pod's IPAM address: its link-local may still be tentative when this test runs first.
      const v6 = (sport: number, dport: number, payload: string) =>
        `Ether(src='${a.mac}', dst='${third.mac}')/IPv6(src='${a.ll}', dst='${third.v6}')/UDP(sport=${sport}, dport=${dport})/Raw(b'${payload}')`;
      for (const sport of [67, 1067, 40000]) await scapy.send(v4(sport, 68, `offer-${sport}`), 2);
      for (const sport of [547, 1547, 40000]) await scapy.send(v6(sport, 546, `reply-${sport}`), 2);
      // A client's messages, after the forged ones: they must arrive.
      await scapy.send(v4(68, 67, 'discover'), 1);
      await scapy.send(v6(546, 547, 'solicit'), 1);
      const payloads = async (l: typeof client4) => (await l.heard).map((h) => h.payload);
      assert.deepEqual(await payloads(server4), ['discover'], 'what the DHCP server port heard');
      assert.deepEqual(await payloads(server6), ['solicit'], 'what the DHCPv6 server port heard');
      assert.deepEqual(await payloads(client4), [], 'what the DHCP client port heard');
      assert.deepEqual(await payloads(client6), [], 'what the DHCPv6 client port heard');
      await counted('CLASSIFIER', before, 12);
    });

    neighbourDiscoveryGuardTests(bed);
    invalidEgressTests(bed);

    // Linux bridge: guard's `ether type { 8021q, 8021ad } ... drop` (with that rule gone, the guard
    // chain's last rule, `counter name CLASSIFIER drop`, still drops a tagged frame: the test fails only
    // when tagged frames are let through). OVS: table 0's vlan_tci drop flow.
    test('a frame the pod tags itself (802.1Q) never reaches the victim', async () => {
      const a = attacker;
      const to = `Ether(src='${a.mac}', dst='${third.mac}')`;
      const echo = `IP(src='${a.v4}', dst='${third.v4}')/ICMP()`;
      // VLAN 0 is a priority tag: a kernel without a VLAN device takes the frame as untagged.
      const extra = await echoes(
        third,
        'Icmp InEchos',
        [
          `${to}/Dot1Q(vlan=0)/${echo}`,
          `${to}/Dot1Q(vlan=100)/${echo}`,
          `${to}/Dot1Q(vlan=0)/Dot1Q(vlan=0)/${echo}`,
        ],
        `${to}/${echo}`,
      );
      assert.equal(extra, 0, 'tagged echoes the victim received');
    });

    // An ARP probe (RFC 5227: sender IP 0.0.0.0) names the address it asks about as target; a host that
    // runs conflict detection on that address gives it up when it hears one, and Linux answers it for
    // an address it holds. A pod may probe its own addresses only, with its own MAC (decision 34).
    // Linux bridge: arp_guard's `arp saddr ip 0.0.0.0 ... arp daddr ip != @pod_ip4 ... drop` (target),
    // and `pod_arp`'s (port, MAC, MAC, 0.0.0.0) elements (pod-guard.ts podGuardKeys; the MACs). OVS:
    // the pod's `arp_spa=0.0.0.0,arp_tpa=<own>` flow in table 10 (pipeline.ts podFlows). The victim is
    // the neighbour pod, which holds the address probed for: a capture on its interface.
    test("an ARP probe (sender 0.0.0.0) reaches a neighbour only for the pod's own address, with its own MAC", async () => {
      const a = attacker;
      const probe = (src: string, sha: string, tpa: string, dst = BCAST) =>
        `Ether(src='${src}', dst='${dst}')/ARP(op=1, hwsrc='${sha}', psrc='0.0.0.0', pdst='${tpa}')`;
      const cap = await capture(neighbour.ns, 'eth0', 'arp');
      const before = await drops('ARP_SPOOF_GUARD');
      let lines: string[] = [];
      try {
        await scapy.send(probe(a.mac, a.mac, neighbour.v4), 2);
        await scapy.send(probe(a.mac, a.mac, neighbour.v4, neighbour.mac), 2);
        await scapy.send(probe(a.mac, a.mac, third.v4), 2);
        await scapy.send(probe(FOREIGN_MAC, FOREIGN_MAC, a.v4), 2);
        await scapy.send(probe(a.mac, FOREIGN_MAC, a.v4), 2);
        await scapy.send(probe(FOREIGN_MAC, a.mac, a.v4), 2);
        // The genuine probe, last: for the attacker's own address, with its own MAC.
        await scapy.send(probe(a.mac, a.mac, a.v4), 1);
      } finally {
        lines = await cap.stop();
      }
      const heard = (ip: string) =>
        lines.filter((l) =>
          new RegExp(`who-has ${ip.replaceAll('.', '\\.')}[ ,].*tell 0\\.0\\.0\\.0`).test(l),
        );
      assert.equal(
        heard(a.v4).filter((l) => !l.includes(FOREIGN_MAC)).length,
        1,
        `the genuine probe reached the neighbour:\n${lines.join('\n')}`,
      );
      assert.deepEqual(heard(neighbour.v4), [], "probes for the neighbour's own address it received");
      assert.deepEqual(heard(third.v4), [], "probes for the third pod's address the neighbour received");
      assert.deepEqual(
        lines.filter((l) => l.includes(FOREIGN_MAC)),
        [],
        'probes with a foreign MAC the neighbour received',
      );
      await counted('ARP_SPOOF_GUARD', before, 12);
      // arping's probe for the neighbour's address: the neighbour answered it before this guard.
      const asked = await run('ip', [
        'netns',
        'exec',
        a.ns,
        'arping',
        '-0',
        '-c',
        '2',
        '-w',
        '2',
        '-i',
        'eth0',
        neighbour.v4,
      ]);
      assert.notEqual(asked.code, 0, `the neighbour answered a probe for its address: ${asked.stdout}`);
    });

    // Linux bridge: the bridge learns a link-local frame's source outside every nftables hook. A pod's
    // MAC is held by its sticky static entry (pod-forwarding.ts, decision 26); any other MAC (a host of
    // the underlay in bridging mode, one nobody has used yet) only by `setBridgeNoLinklocalLearn` in
    // src/datapath/linux-bridge/bridge-datapath.ts, which the foreign MAC below depends on. OVS
    // forwards on fixed addresses (pipeline.ts, table 50), so there the test is a regression check.
    test("a link-local frame (01:80:c2:00:00:0e) with another pod's MAC, or a foreign one, teaches the bridge nothing", async () => {
      await ping(third.ns, neighbour.v4);
      const fdb = async (mac: string) =>
        datapath === 'linux-bridge'
          ? (await must('ip', ['netns', 'exec', node.nodeNs, 'bridge', 'fdb', 'show', 'br', 'podwire0']))
              .split('\n')
              .find((l) => l.startsWith(`${mac} `))
          : undefined;
      const before = await fdb(neighbour.mac);
      for (const src of [neighbour.mac, FOREIGN_MAC]) {
        await scapy.send(`Ether(src='${src}', dst='01:80:c2:00:00:0e', type=0x88cc)/Raw(b'\\x00'*46)`, 3);
      }
      await sleep(200);
      assert.equal(await fdb(neighbour.mac), before, "the bridge's forwarding entry for the neighbour's MAC");
      assert.equal(await fdb(FOREIGN_MAC), undefined, 'no forwarding entry for the foreign MAC');
      for (let i = 0; i < 3; i++) await ping(third.ns, neighbour.v4);
    });

    // Depends on src/agent/cni/host-veth-sysctls.ts (rp_filter=1 and disable_ipv6=1 on the host veth):
    // the Linux bridge hands a link-local frame up to the host veth itself, and OVS's userspace
    // datapath leaves the node's kernel every frame of the veth, so the node's own stack would take
    // it from there, from any source.
    test("IP from another pod's address, handed to the host veth, never reaches the node's sockets", async () => {
      const listen = (ip: string) =>
        run('ip', [
          'netns',
          'exec',
          node.nodeNs,
          '/usr/bin/python3',
          '-c',
          `import socket,sys
s=socket.socket(socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 9999)); s.settimeout(2.5)
try:
    d, a = s.recvfrom(100); print(a[0])
except socket.timeout:
    pass`,
          ip,
        ]);
      const got = [listen(GW4), listen(GW6)];
      await sleep(500);
      for (const dst of ['01:80:c2:00:00:0e', BCAST]) {
        await scapy.send(
          `Ether(src='${attacker.mac}', dst='${dst}')/IP(src='${neighbour.v4}', dst='${GW4}')/UDP(sport=1234, dport=9999)/Raw(b'x')`,
          2,
        );
        await scapy.send(
          `Ether(src='${attacker.mac}', dst='${dst}')/IPv6(src='${neighbour.v6}', dst='${GW6}')/UDP(sport=1234, dport=9999)/Raw(b'x')`,
          2,
        );
      }
      const [v4, v6] = await Promise.all(got);
      assert.equal(v4?.stdout.trim(), '', `the node received a forged IPv4 packet from ${v4?.stdout.trim()}`);
      assert.equal(v6?.stdout.trim(), '', `the node received a forged IPv6 packet from ${v6?.stdout.trim()}`);
    });

    // Issue 25, finding 1 (checksum-forge.ts): IPv6 fragments through the gateway, which the node
    // reassembles (conntrack) and fragments again, completing the pod's pending checksum then, after
    // the guard. Depends, on the Linux bridge, on the checksum hop (src/datapath/checksum-ifb.ts: the
    // pods keep transmit checksumming, and the node's IFB completes the checksum per fragment before
    // the guard); on OVS's userspace datapath, on transmit checksumming off in the pod (the datapath's
    // `podTxChecksumming: false`, set by src/agent/cni/cmd-add.ts). Either way the word aimed at the
    // reassembled packet is written into a fragment's destination address, so the datagram never
    // reaches the victim. Decision 32.
    /**
     * The forgery (checksum-forge.ts) through the gateway, judged by what the victim's socket heard;
     * `beforeGenuine` runs between the forged datagrams and the genuine ones.
     */
    async function forgedThroughGateway(port: number, beforeGenuine = () => {}, a = attacker): Promise<void> {
      const victim = await udpListener(third.ns, 6, port, patient(8000) / 1000);
      await sendChecksumForgery(a.ns, {
        kind: 'udp6',
        iface: 'eth0',
        mac: a.mac,
        dstMac: gwMac,
        real: a.v6,
        forged: [neighbour.v6, GW6],
        dst: third.v6,
        port,
        payload: 'forged',
        repeat: 400,
        frag: 1000,
        count: 2,
      });
      beforeGenuine();
      // Genuine: the same size, fragmented by the pod's own kernel, and a small one.
      await must('ip', [
        'netns',
        'exec',
        a.ns,
        PYTHON,
        '-c',
        `import socket,sys
s=socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.sendto(b'genuine' * 400, (sys.argv[1], ${port}))
s.sendto(b'genuine', (sys.argv[1], ${port}))`,
        third.v6,
      ]);
      const heard = await victim.heard;
      assert.ok(
        heard.some((h) => h.payload.startsWith('genuine')),
        `the genuine datagrams arrived: ${JSON.stringify(heard)}`,
      );
      assert.deepEqual([...new Set(heard.map((h) => h.from))], [a.v6], 'the sources the victim heard');
    }

    test('a pod that leaves its checksum to the node cannot rewrite its source after the guard', () =>
      forgedThroughGateway(5601));

    // A pod with CAP_NET_ADMIN in its own namespace turns transmit checksumming back on (`ethtool -K
    // eth0 tx on`), then attacks (on the Linux bridge it is on already: the hop makes it safe).
    // Depends on the checksum hop: the host veth's ingress forwarded to the node's IFB, whose
    // transmit checksumming is off, so the node completes the pending checksum before the guard,
    // which then drops the forged frame (decision 32). On the Linux bridge the forward is tc's
    // (src/datapath/checksum-ifb.ts); on OVS's kernel datapath, whose ports' tc ingress ovs-vswitchd
    // owns, it is nftables' netdev ingress hook (src/datapath/ovs/netdev-ingress-hop.ts). OVS's
    // userspace datapath has no hop: it forwards the frame as it is, and the victim drops it for its
    // checksum (as it would the pod's own TCP and UDP, decision 8: so the genuine datagrams go out
    // with it off again). On OVS's kernel datapath this path completes no checksum even without the
    // hop (decision 32, fourth step): there the test holds either way, and the hop's own tests are
    // test/datapath/ovs/netdev-ingress-hop.test.ts and the lifecycle test's IFB count.
    test('a pod that turns transmit checksumming back on cannot rewrite its source after the guard', async () => {
      setPodTxChecksumming(attacker.ns, true);
      try {
        await forgedThroughGateway(5602, () => setPodTxChecksumming(attacker.ns, false));
      } finally {
        setPodTxChecksumming(attacker.ns, false);
      }
    });

    // The same, from a pod with an egress rate (the bandwidth capability, decision 42): its host veth
    // redirects to its own IFB with a TBF, not the node's; that IFB has transmit checksumming off too,
    // so it is this pod's checksum hop. Only where the datapath shapes egress (not OVS userspace).
    test('a pod with an egress rate that turns transmit checksumming on cannot rewrite its source either', {
      skip: datapath === 'ovs' && "OVS's userspace datapath shapes no egress (decision 42)",
    }, async () => {
      const shaped = await addPod('shaped', {
        runtimeConfig: {
          bandwidth: { egressRate: 200_000_000, egressBurst: 8_000_000, ingressRate: 0, ingressBurst: 0 },
        },
      });
      try {
        const ifbs = await ipJson<Array<{ ifname: string }>>(node.nodeNs, ['link', 'show', 'type', 'ifb']);
        assert.equal(ifbs.filter((l) => l.ifname.startsWith('pb')).length, 1, JSON.stringify(ifbs));
        setPodTxChecksumming(shaped.ns, true);
        await forgedThroughGateway(5603, () => setPodTxChecksumming(shaped.ns, false), shaped);
      } finally {
        const del = await node.cni({ command: 'DEL', containerId: 'shaped', netns: shaped.ns });
        assert.equal(del.code, 0, del.stdout);
      }
    });

    test('legitimate traffic is unchanged: ARP, IPv4 and IPv6 between pods, to the gateway, DAD', async () => {
      await ping(attacker.ns, third.v4);
      await ping(attacker.ns, third.v6);
      await ping(attacker.ns, GW4);
      await ping(attacker.ns, GW6);
      // The link-local addresses leave DAD about a second after the pods came up.
      const ll = ['netns', 'exec', attacker.ns, 'ping', '-6', '-c', '1', '-W', '1', `${third.ll}%eth0`];
      assert.ok(await eventually(async () => (await run('ip', ll)).code === 0, 5000), 'link-local ping');
      // A new address on the pod goes through DAD (NS from ::) and is used: it is not the pod's, so
      // its traffic is dropped, but DAD itself passes and finds no conflict.
      await must('ip', ['-n', attacker.ns, 'addr', 'add', `fd00:10:244:${subnet}::77/64`, 'dev', 'eth0']);
      const ok = await eventually(async () => {
        const out = await must('ip', ['-n', attacker.ns, '-6', 'addr', 'show', 'dev', 'eth0']);
        return out.includes('::77/64') && !out.includes('tentative');
      }, 5000);
      assert.ok(ok, 'DAD completed');
      const out = await must('ip', ['-n', attacker.ns, '-6', 'addr', 'show', 'dev', 'eth0']);
      assert.ok(!out.includes('dadfailed'), out);
      await must('ip', ['-n', attacker.ns, 'addr', 'del', `fd00:10:244:${subnet}::77/64`, 'dev', 'eth0']);
    });
  });
}
