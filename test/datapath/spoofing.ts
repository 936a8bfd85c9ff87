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
import { ipJson, must, run } from '../../bed/exec.js';
import { metricSample, scrapeMetrics } from '../../bed/metrics.js';
import { resultIps, TestNode } from '../../bed/node.js';
import { OVS_DATAPATH } from '../../bed/ovs.js';
import { eui64LinkLocal } from '../../src/base/mac.js';
import { podMacOf } from './ovs/ovs-node.js';
import { ScapySender, scapyAvailable } from './ovs/scapy-sender.js';

const BCAST = 'ff:ff:ff:ff:ff:ff';
const ALL_NODES_MAC = '33:33:00:00:00:01';
const FOREIGN_MAC = '02:de:ad:be:ef:02';
const METRICS_PORT = 9417;

interface Pod {
  ns: string;
  mac: string;
  v4: string;
  v6: string;
  ll: string;
}

/** `ip neigh show to IP dev DEV` in `ns`: the entry's MAC, lower case; undefined without an entry. */
async function neighMac(ns: string, ip: string, dev: string): Promise<string | undefined> {
  const entries = await ipJson<Array<{ lladdr?: string }>>(ns, ['neigh', 'show', 'to', ip, 'dev', dev]);
  return entries[0]?.lladdr?.toLowerCase();
}

/**
 * One counter of /proc/net/snmp (e.g. Icmp InEchos) or /proc/net/snmp6 (e.g. Icmp6InEchos) in `ns`;
 * with `dev`, the IPv6 counter of that interface only (/proc/net/dev_snmp6/DEV).
 */
async function snmp(ns: string, key: string, dev?: string): Promise<number> {
  if (key.startsWith('Icmp6') || key.startsWith('Ip6')) {
    const file = dev ? `/proc/net/dev_snmp6/${dev}` : '/proc/net/snmp6';
    const text = await must('ip', ['netns', 'exec', ns, 'cat', file]);
    const line = text.split('\n').find((l) => l.split(/\s+/)[0] === key);
    return Number(line?.split(/\s+/)[1] ?? 0);
  }
  const [group, name] = key.split(' ') as [string, string];
  const lines = (await must('ip', ['netns', 'exec', ns, 'cat', '/proc/net/snmp'])).split('\n');
  const header = lines.findIndex((l) => l.startsWith(`${group}:`));
  const names = lines[header]?.split(/\s+/) ?? [];
  const values = lines[header + 1]?.split(/\s+/) ?? [];
  return Number(values[names.indexOf(name)] ?? 0);
}

/** Polls `probe` until it returns true or `ms` pass; returns its last answer. */
async function eventually(probe: () => Promise<boolean>, ms = 3000): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await probe()) return true;
    if (Date.now() > deadline) return false;
    await sleep(100);
  }
}

async function ping(ns: string, ip: string): Promise<void> {
  const args = ['netns', 'exec', ns, 'ping', '-c', '1', '-W', '2', ip];
  if (ip.includes(':')) args.splice(4, 0, '-6');
  const r = await run('ip', args);
  assert.equal(r.code, 0, `ping ${ip} from ${ns}: ${r.stdout}${r.stderr}`);
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

    async function addPod(id: string): Promise<Pod> {
      const ns = await node.addPod(id);
      const add = await node.cni({ command: 'ADD', containerId: id, netns: ns });
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

    before(async () => {
      await node.setup();
      attacker = await addPod('attacker');
      neighbour = await addPod('neighbour');
      third = await addPod('third');
      scapy = await ScapySender.start(attacker.ns);
      const [gw] = await ipJson<Array<{ address: string }>>(node.nodeNs, ['link', 'show', gwIf]);
      gwMac = gw?.address.toLowerCase() ?? '';
      assert.match(gwMac, /^[0-9a-f:]{17}$/);
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

    // Linux bridge: na_guard (`@pod_nd_target`, `@pod_na_tll`, `counter name ND_GUARD drop`).
    // OVS: table 30 (ND_GUARD).
    test("a forged neighbour advertisement leaves the node's and the other pods' entries alone", async () => {
      const a = attacker;
      await ping(node.nodeNs, neighbour.v6);
      await ping(third.ns, neighbour.v6);
      await ping(third.ns, GW6);
      await ping(node.nodeNs, attacker.v6);
      await ping(third.ns, attacker.v6);
      const thirdGw = await neighMac(third.ns, GW6, 'eth0');
      const before = await drops('ND_GUARD');
      const na = (tgt: string, tll: string) =>
        `Ether(src='${a.mac}', dst='${ALL_NODES_MAC}')/IPv6(src='${a.v6}', dst='ff02::1', hlim=255)/ICMPv6ND_NA(tgt='${tgt}', R=0, S=0, O=1)/ICMPv6NDOptDstLLAddr(lladdr='${tll}')`;
      await scapy.send(na(neighbour.v6, a.mac), 3);
      await scapy.send(na(GW6, a.mac), 3);
      // Its own address, but another MAC as target link-layer address.
      await scapy.send(na(a.v6, FOREIGN_MAC), 3);
      // The genuine one (own target, own MAC) reaches the third pod: it gets there after the forged ones.
      const before3 = await snmp(third.ns, 'Icmp6InNeighborAdvertisements');
      await scapy.send(na(a.v6, a.mac), 1);
      assert.ok(
        await eventually(async () => (await snmp(third.ns, 'Icmp6InNeighborAdvertisements')) > before3),
        'the genuine NA arrived',
      );
      await sleep(200);
      assert.equal(await neighMac(node.nodeNs, neighbour.v6, gwIf), neighbour.mac, "the node's entry");
      assert.equal(await neighMac(third.ns, neighbour.v6, 'eth0'), neighbour.mac, "the third pod's entry");
      assert.equal(await neighMac(third.ns, GW6, 'eth0'), thirdGw, "the third pod's gateway entry");
      assert.equal(await neighMac(third.ns, a.v6, 'eth0'), a.mac, "the third pod's entry for the attacker");
      assert.equal(await neighMac(node.nodeNs, a.v6, gwIf), a.mac, "the node's entry for the attacker");
      await counted('ND_GUARD', before, 9);
    });

    // Linux bridge: ns_guard (`@pod_ns_sll`, `counter name ND_GUARD drop`). OVS: table 30's NS flows.
    test("a neighbour solicitation with another MAC as source link-layer address leaves the victim's entry alone", async () => {
      const a = attacker;
      await ping(third.ns, a.v6);
      const before = await drops('ND_GUARD');
      const ns = (sll: string) =>
        `Ether(src='${a.mac}', dst='${third.mac}')/IPv6(src='${a.v6}', dst='${third.v6}', hlim=255)/ICMPv6ND_NS(tgt='${third.v6}')/ICMPv6NDOptSrcLLAddr(lladdr='${sll}')`;
      await scapy.send(ns(FOREIGN_MAC), 3);
      await scapy.send(ns(neighbour.mac), 3);
      const seen = await snmp(third.ns, 'Icmp6InNeighborSolicits');
      await scapy.send(ns(a.mac), 1);
      assert.ok(
        await eventually(async () => (await snmp(third.ns, 'Icmp6InNeighborSolicits')) > seen),
        'the genuine NS arrived',
      );
      await sleep(200);
      assert.equal(await neighMac(third.ns, a.v6, 'eth0'), a.mac, "the third pod's entry for the attacker");
      await counted('ND_GUARD', before, 6);
    });

    // The security review's NS: the victim's MAC as a first source link-layer option, the pod's own as a
    // second. Linux takes the first of duplicated options; OVS reads duplicates as invalid and clears
    // nd_sll (and nd_target, nd_tll), as if there were no option.
    // Linux bridge: ns_guard's `@th,192,16 0x0101 meta iifname . @th,208,48 @pod_ns_sll return` (the
    // first option must be the pod's own SLL). OVS: table 30's NS flow without SLL, which passes only
    // `ipv6_src=::` (pipeline.ts podFlows, ~line 329:
    // `icmp6,${port},ipv6_src=::,icmp_type=135,icmp_code=0,nd_target=${target},nd_sll=${ZERO_MAC}`). Before it required
    // `ipv6_src=::`, the NS passed as "no option" and both entries below became the neighbour's MAC.
    // The NA half (a duplicated TLL) was dropped on OVS before too: nd_target reads ::, and every NA
    // flow of table 30 matches the pod's own nd_target (~line 316, `${na},nd_target=${target},...`).
    test("a neighbour solicitation or advertisement with a duplicated link-layer option (a foreign MAC first) leaves the node's and the other pods' entries alone", async () => {
      const a = attacker;
      await ping(third.ns, a.v6);
      await ping(node.nodeNs, a.v6);
      assert.equal(await neighMac(third.ns, a.v6, 'eth0'), a.mac);
      assert.equal(await neighMac(node.nodeNs, a.v6, gwIf), a.mac);
      const ip6 = (dstMac: string, src: string, dst: string) =>
        `Ether(src='${a.mac}', dst='${dstMac}')/IPv6(src='${src}', dst='${dst}', hlim=255)`;
      const sll = (...macs: string[]) => macs.map((m) => `/ICMPv6NDOptSrcLLAddr(lladdr='${m}')`).join('');
      const ns = (dstMac: string, dst: string, ...macs: string[]) =>
        `${ip6(dstMac, a.v6, dst)}/ICMPv6ND_NS(tgt='${dst}')${sll(...macs)}`;
      const before = await drops('ND_GUARD');
      const seen = {
        third: await snmp(third.ns, 'Icmp6InNeighborSolicits'),
        node: await snmp(node.nodeNs, 'Icmp6InNeighborSolicits', gwIf),
      };
      await scapy.send(ns(third.mac, third.v6, neighbour.mac, a.mac), 3);
      await scapy.send(ns(gwMac, GW6, neighbour.mac, a.mac), 3);
      await scapy.send(
        `${ip6(ALL_NODES_MAC, a.v6, 'ff02::1')}/ICMPv6ND_NA(tgt='${a.v6}', R=0, S=0, O=1)/ICMPv6NDOptDstLLAddr(lladdr='${neighbour.mac}')/ICMPv6NDOptDstLLAddr(lladdr='${a.mac}')`,
        3,
      );
      // Genuine NSs after the forged ones, from the link-local address: they must arrive, and they
      // touch only the entries for the link-local address, not the ones checked below.
      await scapy.send(`${ip6(third.mac, a.ll, third.v6)}/ICMPv6ND_NS(tgt='${third.v6}')${sll(a.mac)}`, 1);
      await scapy.send(`${ip6(gwMac, a.ll, GW6)}/ICMPv6ND_NS(tgt='${GW6}')${sll(a.mac)}`, 1);
      assert.ok(
        await eventually(async () => (await snmp(third.ns, 'Icmp6InNeighborSolicits')) > seen.third),
        'the genuine NS reached the third pod',
      );
      assert.ok(
        await eventually(async () => (await snmp(node.nodeNs, 'Icmp6InNeighborSolicits', gwIf)) > seen.node),
        "the genuine NS reached the node's gateway interface",
      );
      await sleep(200);
      assert.equal(await neighMac(third.ns, a.v6, 'eth0'), a.mac, "the third pod's entry for the attacker");
      assert.equal(await neighMac(node.nodeNs, a.v6, gwIf), a.mac, "the node's entry for the attacker");
      await counted('ND_GUARD', before, 9);
    });

    // What the rule above must keep working. OVS (pipeline.ts podFlows): table 30's
    // `ipv6_src=::,...,nd_target=<own address>,nd_sll=00:00:00:00:00:00` NS flows (~line 329: DAD, from
    // ::, without SLL, with Linux's nonce option, which OVS skips), its `nd_sll=<own MAC>` NS flow (~line 323: every NS Linux
    // sends from an address carries it, a unicast NUD probe too) and its NA flows with and without TLL
    // (~line 316: Linux answers a unicast NS without one). Linux bridge: ns_guard and na_guard (the DAD
    // step: `ip6 saddr :: ... @pod_nd_target return`). With the DAD flow gone, the DAD step fails; with
    // the NA flow without TLL gone, the NUD step.
    test('neighbour discovery between pods still works: resolution, NUD probes, DAD of an own address (a duplicate is detected)', async () => {
      const a = attacker;
      for (const [ns, peer] of [
        [a.ns, third],
        [third.ns, a],
      ] as const) {
        await must('ip', ['-n', ns, 'neigh', 'flush', 'dev', 'eth0']);
        await ping(ns, peer.v6);
        // The link-local addresses leave DAD about a second after the pods came up.
        const ll = ['netns', 'exec', ns, 'ping', '-6', '-c', '1', '-W', '1', `${peer.ll}%eth0`];
        assert.ok(
          await eventually(async () => (await run('ip', ll)).code === 0, 5000),
          `link-local ping from ${ns}`,
        );
      }
      await must('ip', ['-n', a.ns, 'neigh', 'flush', 'dev', 'eth0']);
      await ping(a.ns, GW6);
      // A NUD probe: third's entry for the attacker goes stale, and the next packet has third send a
      // unicast NS (with SLL) after delay_first_probe_time; the attacker's answer is an NA without TLL.
      await must('ip', [
        'netns',
        'exec',
        third.ns,
        'sysctl',
        '-qw',
        'net.ipv6.neigh.eth0.delay_first_probe_time=1',
      ]);
      await must('ip', [
        '-n',
        third.ns,
        'neigh',
        'replace',
        a.v6,
        'lladdr',
        a.mac,
        'dev',
        'eth0',
        'nud',
        'stale',
      ]);
      await ping(third.ns, a.v6);
      const reachable = async () => {
        const [e] = await ipJson<Array<{ state?: string[] }>>(third.ns, [
          'neigh',
          'show',
          'to',
          a.v6,
          'dev',
          'eth0',
        ]);
        return e?.state?.includes('REACHABLE') ?? false;
      };
      assert.ok(await eventually(reachable, 5000), "the NUD probe was answered: third's entry is REACHABLE");
      // DAD: a copy of the attacker's own address is on the node (a pod's copy could not defend it: its
      // NA would name an address not its own, which na_guard / table 30 drop). The attacker's probe
      // (from ::, target its own address) must reach the node, whose answer marks the attacker's
      // address dadfailed.
      const own = `${a.v6}/64`;
      const copy = [node.nodeNs, 'addr', 'add', `${a.v6}/128`, 'dev', gwIf, 'nodad'];
      await must('ip', ['-n', a.ns, 'addr', 'del', own, 'dev', 'eth0']);
      try {
        await must('ip', ['-n', ...copy]);
        await must('ip', ['-n', a.ns, 'addr', 'add', own, 'dev', 'eth0']);
        const failed = await eventually(async () => {
          const out = await must('ip', ['-n', a.ns, '-6', 'addr', 'show', 'dev', 'eth0']);
          return out.includes('dadfailed');
        }, 5000);
        assert.ok(failed, "the attacker's DAD probe for its own address reached the node, which defended it");
      } finally {
        await run('ip', ['-n', node.nodeNs, 'addr', 'del', `${a.v6}/128`, 'dev', gwIf]);
        await run('ip', ['-n', a.ns, 'addr', 'del', own, 'dev', 'eth0']);
        await must('ip', ['-n', a.ns, 'addr', 'add', own, 'dev', 'eth0', 'nodad']);
        await must('ip', ['-n', node.nodeNs, 'neigh', 'flush', 'to', a.v6]);
      }
      await ping(a.ns, third.v6);
    });

    // Duplicate address detection as a weapon: while an address of the victim is tentative, one NS from
    // :: for it (RFC 4862 5.4.3) makes the victim's kernel give the address up (dadfailed). Pods' own
    // addresses come up without DAD, but their link-local does not, and neither does any address the
    // node adds later. A DAD probe may only name the sender's own address as target.
    // Linux bridge: ns_guard's `ip6 saddr :: meta iifname . ether saddr . @th,64,128 @pod_nd_target
    // return` and the `ip6 saddr :: counter name ND_GUARD drop` after it (pod-guard.ts CHAINS); without
    // the drop, the probe without options passes `ip6 length 24 return`. OVS: table 30's DAD flows, one
    // per own target (pipeline.ts podFlows, `ipv6_src=::,...,nd_target=${target}`).
    test("a DAD probe for a neighbour's tentative address does not take the address from it", async () => {
      const a = attacker;
      const victim = neighbour;
      const [, , , d, e, f] = victim.mac.split(':');
      const dad = (target: string, dstMac: string, dst: string, nonce: boolean) =>
        `Ether(src='${a.mac}', dst='${dstMac}')/IPv6(src='::', dst='${dst}', hlim=255)/ICMPv6ND_NS(tgt='${target}')${
          nonce ? "/Raw(b'\\x0e\\x01\\x01\\x02\\x03\\x04\\x05\\x06')" : ''
        }`;
      const ll = `${victim.ll}/64`;
      const addrs = () => must('ip', ['-n', victim.ns, '-6', 'addr', 'show', 'dev', 'eth0']);
      const transmits = (n: number) =>
        must('ip', ['netns', 'exec', victim.ns, 'sysctl', '-qw', `net.ipv6.conf.eth0.dad_transmits=${n}`]);
      await must('ip', ['-n', victim.ns, 'addr', 'del', ll, 'dev', 'eth0']);
      try {
        const before = await drops('ND_GUARD');
        // Tentative from here until DAD's probes have each waited RetransTimer (1 s) unanswered: three
        // of them leave the attacker 3 s, also under emulation.
        await transmits(3);
        await must('ip', ['-n', victim.ns, 'addr', 'add', ll, 'dev', 'eth0']);
        assert.match(await addrs(), /tentative/, 'the victim re-added its link-local address with DAD');
        await scapy.send(dad(victim.ll, `33:33:ff:${d}:${e}:${f}`, `ff02::1:ff${d}:${e}${f}`, false), 5);
        await scapy.send(dad(victim.ll, `33:33:ff:${d}:${e}:${f}`, `ff02::1:ff${d}:${e}${f}`, true), 5);
        // Unicast to the victim's MAC as well: the kernel takes a DAD probe whatever its Ethernet destination.
        await scapy.send(dad(victim.ll, victim.mac, `ff02::1:ff${d}:${e}${f}`, false), 5);
        // A probe for the attacker's own link-local, to all nodes: the victim counts it (and discards it,
        // a DAD probe must go to the target's solicited-node group), so the path was open.
        const seen = await snmp(victim.ns, 'Icmp6InNeighborSolicits', 'eth0');
        await scapy.send(dad(a.ll, ALL_NODES_MAC, 'ff02::1', true), 1);
        assert.ok(
          await eventually(async () => (await snmp(victim.ns, 'Icmp6InNeighborSolicits', 'eth0')) > seen),
          "the attacker's probe for its own address reached the victim",
        );
        const settled = await eventually(async () => !/tentative/.test(await addrs()), 10_000);
        const out = await addrs();
        assert.ok(settled, out);
        assert.doesNotMatch(out, /dadfailed/, "the victim's link-local address");
        await counted('ND_GUARD', before, 15);
      } finally {
        await transmits(1);
        if (/dadfailed/.test(await addrs()))
          await must('ip', ['-n', victim.ns, 'addr', 'del', ll, 'dev', 'eth0']);
        await run('ip', ['-n', victim.ns, 'addr', 'add', ll, 'dev', 'eth0', 'nodad']);
      }
    });

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

    // Linux bridge: `pod_arp` holds (port, MAC, MAC, 0.0.0.0) for every IPv4 pod (pod-guard.ts).
    // OVS: the pod's `arp_spa=0.0.0.0` flow in table 10 (pipeline.ts podFlows); without it the probe
    // meets the table's drop and no answer comes back.
    test("an ARP probe (sender 0.0.0.0) with the pod's own MAC is answered; with a foreign MAC it is not", async () => {
      const probe = (extra: string[]) =>
        run('ip', [
          'netns',
          'exec',
          attacker.ns,
          'arping',
          '-0',
          '-c',
          '2',
          '-w',
          '2',
          '-i',
          'eth0',
          ...extra,
          neighbour.v4,
        ]);
      const own = await probe([]);
      assert.equal(own.code, 0, `the neighbour answered the probe: ${own.stdout}${own.stderr}`);
      const before = await drops('ARP_SPOOF_GUARD');
      const foreign = await probe(['-s', '02:00:00:00:be:ef', '-p']);
      assert.notEqual(foreign.code, 0, `no answer to a probe with a foreign MAC: ${foreign.stdout}`);
      await counted('ARP_SPOOF_GUARD', before, 1);
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
