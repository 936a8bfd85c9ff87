/**
 * The spoofing suite's IPv6 neighbour discovery tests (spoofing.ts runs them inside its suite, on its
 * pods): forged NAs and NSs, duplicated link-layer options, DAD aimed at a neighbour, and neighbour
 * discovery that must keep working. Each test names the product lines it depends on, as in spoofing.ts.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ipJson, must, run } from '../../bed/exec.js';
import {
  ALL_NODES_MAC,
  BCAST,
  eventually,
  FOREIGN_MAC,
  neighMac,
  ping,
  type SpoofingBed,
  snmp,
} from './spoofing-bed.js';

export function neighbourDiscoveryGuardTests(bed: SpoofingBed): void {
  // Linux bridge: na_guard (`@pod_nd_target`, `@pod_na_tll`, `counter name ND_GUARD drop`).
  // OVS: table 30 (ND_GUARD).
  test("a forged neighbour advertisement leaves the node's and the other pods' entries alone", async () => {
    const { node, gwIf, GW6, attacker, neighbour, third, scapy, drops, counted } = bed;
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
    const { attacker, neighbour, third, scapy, drops, counted } = bed;
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
    const { node, gwIf, gwMac, GW6, attacker, neighbour, third, scapy, drops, counted } = bed;
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
    const { node, gwIf, GW6, attacker, third } = bed;
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
  // per own target (pipeline.ts podFlows, `ipv6_src=::,...,nd_target=${target}`), and its NS flows with
  // the pod's SLL, which match the pod's own source addresses (`ipv6_src=${src},...,nd_sll=${mac}`):
  // the probes with an SLL option, which Linux victims ignore, count as drops only because of that.
  test("a DAD probe for a neighbour's tentative address does not take the address from it", async () => {
    const { attacker, neighbour, scapy, drops, counted } = bed;
    const a = attacker;
    const victim = neighbour;
    const [, , , d, e, f] = victim.mac.split(':');
    const options = {
      none: '',
      nonce: "/Raw(b'\\x0e\\x01\\x01\\x02\\x03\\x04\\x05\\x06')",
      // RFC 4861 7.1.1 has receivers discard a probe from :: with an SLL (Linux does): dropped all the same.
      sll: `/ICMPv6NDOptSrcLLAddr(lladdr='${a.mac}')`,
    };
    const dad = (target: string, dstMac: string, dst: string, option: keyof typeof options) =>
      `Ether(src='${a.mac}', dst='${dstMac}')/IPv6(src='::', dst='${dst}', hlim=255)/ICMPv6ND_NS(tgt='${target}')${options[option]}`;
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
      for (const option of ['none', 'nonce', 'sll'] as const) {
        await scapy.send(dad(victim.ll, `33:33:ff:${d}:${e}:${f}`, `ff02::1:ff${d}:${e}${f}`, option), 5);
      }
      // Unicast to the victim's MAC as well: the kernel takes a DAD probe whatever its Ethernet destination.
      await scapy.send(dad(victim.ll, victim.mac, `ff02::1:ff${d}:${e}${f}`, 'none'), 5);
      // A probe for the attacker's own link-local, to all nodes: the victim counts it (and discards it,
      // a DAD probe must go to the target's solicited-node group), so the path was open.
      const seen = await snmp(victim.ns, 'Icmp6InNeighborSolicits', 'eth0');
      await scapy.send(dad(a.ll, ALL_NODES_MAC, 'ff02::1', 'nonce'), 1);
      assert.ok(
        await eventually(async () => (await snmp(victim.ns, 'Icmp6InNeighborSolicits', 'eth0')) > seen),
        "the attacker's probe for its own address reached the victim",
      );
      const settled = await eventually(async () => !/tentative/.test(await addrs()), 10_000);
      const out = await addrs();
      assert.ok(settled, out);
      assert.doesNotMatch(out, /dadfailed/, "the victim's link-local address");
      await counted('ND_GUARD', before, 20);
    } finally {
      await transmits(1);
      if (/dadfailed/.test(await addrs()))
        await must('ip', ['-n', victim.ns, 'addr', 'del', ll, 'dev', 'eth0']);
      await run('ip', ['-n', victim.ns, 'addr', 'add', ll, 'dev', 'eth0', 'nodad']);
    }
  });

  // A router solicitation: the node forwards, so it is a router, and a router takes an RS's source
  // link-layer option for the sender's entry, even over a REACHABLE one (RFC 4861 6.2.6). Found in a
  // security review: one RS from the pod's own address with the neighbour's MAC sent the node's traffic
  // for the pod to the neighbour, and ff:ff:ff:ff:ff:ff to every pod. Pods ignore router advertisements
  // (accept_ra=0) and send none. Linux bridge: ip6_guard's `icmpv6 type { nd-router-solicit,
  // nd-router-advert, nd-redirect } counter name CLASSIFIER drop` (pod-guard.ts CHAINS). OVS: table 0's
  // `icmp6,icmp_type=133` drop flow (pipeline.ts pipelineFlows).
  test("a router solicitation with another MAC as source link-layer address leaves the node's entries for the pod alone", async () => {
    const { node, gwIf, gwMac, GW6, attacker: a, neighbour, scapy, drops, counted } = bed;
    await ping(node.nodeNs, a.v6);
    assert.equal(await neighMac(node.nodeNs, a.v6, gwIf), a.mac);
    const before = await drops('CLASSIFIER');
    const rs = (src: string, dstMac: string, dst: string, sll: string) =>
      `Ether(src='${a.mac}', dst='${dstMac}')/IPv6(src='${src}', dst='${dst}', hlim=255)/ICMPv6ND_RS()/ICMPv6NDOptSrcLLAddr(lladdr='${sll}')`;
    const ALL_ROUTERS_MAC = '33:33:00:00:00:02';
    await scapy.send(rs(a.v6, gwMac, GW6, neighbour.mac), 3);
    await scapy.send(rs(a.v6, ALL_ROUTERS_MAC, 'ff02::2', neighbour.mac), 3);
    await scapy.send(rs(a.ll, ALL_ROUTERS_MAC, 'ff02::2', BCAST), 3);
    // A genuine echo request to the node after the forged ones: the path was open. (Not an NS: its SLL
    // would put the entry right again.)
    const seen = await snmp(node.nodeNs, 'Icmp6InEchos', gwIf);
    await scapy.send(
      `Ether(src='${a.mac}', dst='${gwMac}')/IPv6(src='${a.v6}', dst='${GW6}')/ICMPv6EchoRequest()`,
      1,
    );
    assert.ok(
      await eventually(async () => (await snmp(node.nodeNs, 'Icmp6InEchos', gwIf)) > seen),
      'the genuine echo request reached the node',
    );
    await sleep(200);
    assert.equal(await neighMac(node.nodeNs, a.v6, gwIf), a.mac, "the node's entry for the attacker");
    const ll = await neighMac(node.nodeNs, a.ll, gwIf);
    assert.ok(ll === undefined || ll === a.mac, `the node's entry for the attacker's link-local: ${ll}`);
    await counted('CLASSIFIER', before, 9);
  });
}
