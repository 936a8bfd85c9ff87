#!/usr/bin/env node
/**
 * `npm run mutate`: breaks each safety mechanism on purpose, one at a time, in a scratch copy of the
 * built tree (.cache/mutate), runs the tests that claim to cover it, and prints whether they caught it
 * (a test failed) or not (a survivor: work for the tests). Not part of `npm test`.
 *
 * The copy is compiled once from the working tree; each mutation is a literal edit of the compiled
 * JavaScript (the find text must occur exactly once, so a mutation that no longer applies is reported,
 * never silently skipped), undone before the next. First the tests run unmutated: a baseline failure
 * would make every "caught" meaningless, so it stops the run.
 *
 *   node scripts/mutate.mjs [--only ID[,ID]] [--list]
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), '..');
const TREE = join(ROOT, '.cache/mutate');
/** One test file's time limit; a hang counts as caught only if the test itself fails on it. */
const FILE_TIMEOUT_MS = 240_000;

const I1 = ['test/kernel/netns-faults.test.js', 'test/kernel/netns.test.js'];
const I4 = [
  'test/ipam/file-store.test.js',
  'test/ipam/file-store-crash.test.js',
  'test/ipam/dir-sync.test.js',
  'test/agent/crash.test.js',
];
/**
 * The power cut in the qemu guest (scripts/vm-powercut.sh), on the mutated tree's guest program. Each
 * cut is aimed at one step (claim, mkdir, release in turn) and catches a dropped sync of that step
 * every time, so 3 cuts (one of each) are enough here (`npm run test:vm` makes 10).
 */
const POWERCUT = {
  cmd: 'scripts/vm-powercut.sh',
  env: {
    PODWIRE_POWERCUT_GUEST: '.cache/mutate/dist/test/ipam/powercut-guest.js',
    PODWIRE_POWERCUT_CYCLES: '3',
  },
};
/**
 * The OVS lifecycle test on OVS's kernel datapath, in the qemu guest (scripts/vm-kernel-test.sh), on
 * the mutated tree: the guest sees this machine's file system, .cache/mutate included.
 */
const VM_OVS_LIFECYCLE = {
  cmd: 'scripts/vm-kernel-test.sh',
  args: ['.cache/mutate/dist/test/datapath/ovs/lifecycle.test.js'],
  env: {},
};
const GC = ['test/agent/gc-guards.test.js', 'test/agent/gc-race.test.js', 'test/agent/commands.test.js'];
/** The policy compiler's tests: case by case, and against the model of the API documentation. */
const POLICY = [
  'test/policy/label-selector.test.js',
  'test/policy/ip-block.test.js',
  'test/policy/compile.test.js',
  'test/policy/compile-model.test.js',
];

/**
 * Each mutation: what it breaks, the literal edits of the compiled files (under dist/), and the tests
 * that should catch it. `env` is added to the tests' environment.
 */
const MUTATIONS = [
  {
    id: 'i1-entry-check',
    what: 'I1: no check of the thread namespace on entry to inNetns',
    edits: [['src/kernel/netns.js', 'if (!sameNetns(before, home.id)) {', 'if (false) {']],
    tests: I1,
  },
  {
    id: 'i1-inside-check',
    what: 'I1: no check that setns landed in the target',
    edits: [['src/kernel/netns.js', 'if (!sameNetns(inside, target.id)) {', 'if (false) {']],
    tests: I1,
  },
  {
    id: 'i1-return-check',
    what: 'I1: no check of the namespace after setns back home',
    edits: [['src/kernel/netns.js', 'if (!sameNetns(currentNetnsId(), home.id)) {', 'if (false) {']],
    tests: I1,
  },
  {
    id: 'i1-return-setns-error',
    what: 'I1: a failed setns back home is ignored',
    edits: [
      ['src/kernel/netns.js', 'catch (err) {\n        onReturnFailure(err);\n    }', 'catch (err) {\n    }'],
    ],
    tests: I1,
  },
  {
    id: 'i4-fdatasync',
    what: 'I4: the fdatasync of a new claim file dropped',
    edits: [['src/ipam/fs-durable.js', 'await fh.datasync();', '']],
    tests: I4,
    commands: [POWERCUT],
  },
  {
    id: 'i4-dir-fsync',
    what: 'I4: the directory fsync dropped',
    edits: [['src/ipam/fs-durable.js', '(fh) => fh.sync());', 'async () => undefined);']],
    tests: I4,
    commands: [POWERCUT],
  },
  {
    id: 'i2-close-on-send-failure',
    what: 'I2: packet socket not closed when a send fails',
    edits: [
      [
        'src/arp/announcer.js',
        'catch (err) {\n        sock.close();\n        throw err;',
        'catch (err) {\n        throw err;',
      ],
    ],
    tests: ['test/arp/announcer-send-failure.test.js', 'test/agent/announce.test.js'],
  },
  {
    id: 'i2-close-after-send',
    what: 'I2: packet socket not closed after a successful send',
    edits: [['src/arp/announcer.js', 'return sock.closeAsync();', 'return Promise.resolve();']],
    tests: ['test/arp/announcer-send-failure.test.js', 'test/agent/announce.test.js'],
  },
  {
    id: 'i5-arp-announce',
    what: 'I5: arp_announce=0 on the gateway instead of 1',
    edits: [['src/datapath/gateway.js', "'arp_announce'), '1');", "'arp_announce'), '0');"]],
    tests: ['test/agent/arp-announce.test.js', 'test/agent/announce.test.js'],
  },
  {
    id: 'i5-lb-both-arp-defences',
    what: 'I5: both Linux-bridge ARP defences removed (arp_announce=0 and no gateway ARP guard)',
    edits: [
      ['src/datapath/gateway.js', "'arp_announce'), '1');", "'arp_announce'), '0');"],
      [
        'src/datapath/linux-bridge/bridge-datapath.js',
        'await installGatewayArpGuard(nft, { bridge, mac, ipv4s });',
        '',
      ],
    ],
    tests: ['test/agent/arp-announce.test.js', 'test/multinode/bridging.test.js'],
    env: { PODWIRE_BRIDGING_DATAPATHS: 'linux-bridge' },
  },
  {
    id: 'gc-reconcile-busy-skip',
    what: "GC: reconcile's skip of keys with calls in flight removed",
    edits: [['src/agent/cni/reconcile.js', 'if (busy.has(key)) {', 'if (false) {']],
    tests: GC,
  },
  {
    id: 'gc-reconcile-recheck',
    what: "GC: reconcile's re-check of the veth on the attachment's key removed",
    edits: [
      ['src/agent/cni/reconcile.js', 'if (ctx.nl.linkByName(name))\n                    return false;', ''],
    ],
    tests: GC,
  },
  {
    id: 'gc-reconcile-busy-veth-skip',
    what: "GC: reconcile's skips of veths whose key has a call in flight removed (both judgements)",
    edits: [
      ['src/agent/cni/reconcile.js', ' && !busyVeths.has(l.name));', ');'],
      [
        'src/agent/cni/reconcile.js',
        'if (claimedNow.has(name) || new Set([...guard.busy()].map(hostVethOfKey)).has(name)) {',
        'if (claimedNow.has(name)) {',
      ],
    ],
    tests: ['test/agent/gc-guards.test.js'],
  },
  {
    id: 'gc-cni-busy-veth-skip',
    what: "GC: CNI GC's skip of veths whose key has a call in flight removed",
    edits: [['src/agent/cni/cmd-gc.js', ' || new Set([...guard.busy()].map(hostVethOfKey)).has(name)', '']],
    tests: GC,
  },
  {
    id: 'peers-cni-first',
    what: 'Issue 17: peer programming slices no longer wait for CNI calls in flight',
    edits: [['src/agent/startup/cluster-node.js', 'const busy = this.#cniBusy;', 'const busy = undefined;']],
    tests: ['test/agent/cluster-node-cni-first.test.js'],
  },
  {
    id: 'peers-slice-size',
    what: 'Issue 17: peers handed to the overlay 128 at a time (an ADD waits ~10 ms behind a slice)',
    edits: [['src/agent/startup/cluster-node.js', 'const PEER_SLICE = 64;', 'const PEER_SLICE = 128;']],
    tests: ['test/agent/cluster-node-cni-first.test.js'],
  },
  {
    id: 'ovs-flow-restore-wait-cleared',
    what: 'OVS: flow-restore-wait left set after the flows are in place (a restarted switch handles no new packet)',
    edits: [['src/datapath/ovs/ovs-datapath.js', 'if (await vs.clearFlowRestoreWait()) {', 'if (false) {']],
    tests: ['test/datapath/ovs/flow-restore-wait.test.js'],
  },
  {
    id: 'ovs-replay-generation',
    what: 'OVS: a replay that finished with another queued says ready (an ADD then loses its flows)',
    edits: [['src/datapath/ovs/ovs-datapath.js', ' && generation === this.#replayGeneration;', ';']],
    tests: ['test/datapath/ovs/replay-races.test.js'],
  },
  {
    id: 'ovs-pending-removal-taken-over',
    what: 'OVS: a removal queued during an OVSDB outage removes the same attachment added again',
    edits: [['src/datapath/ovs/ovs-datapath.js', 'this.#pendingRemovals.delete(port.hostIfname);', '']],
    tests: ['test/datapath/ovs/replay-races.test.js'],
  },
  {
    id: 'ovs-rowless-number-kept',
    what: "OVS: a failed insert frees its port number while the failed pod's flows still use it",
    edits: [
      [
        'src/datapath/ovs/ovs-datapath.js',
        'this.#rowless.set(port.hostIfname, ofport);',
        'this.#ofports.release(ofport);',
      ],
    ],
    tests: ['test/datapath/ovs/replay-races.test.js'],
  },
  {
    id: 'lb-pod-fdb-sticky',
    what: "Linux bridge: a pod's static forwarding entry is not sticky (a frame from the uplink with the pod's MAC moves it there)",
    edits: [['src/kernel/netlink/bridge-port.js', 'NTF_MASTER | NTF_STICKY', 'NTF_MASTER']],
    tests: ['test/datapath/linux-bridge-fdb.test.js'],
  },
  {
    id: 'ovs-open-port-before-pod-side',
    what: 'OVS ADD: the port is sent to the switch only in attachPort, after the pod side',
    edits: [['src/agent/cni/cmd-add.js', 'if (datapath.openPort) {', 'if (datapath.openPort && false) {']],
    tests: ['test/agent/ovs-open-port.test.js'],
  },
  {
    id: 'gc-orphan-ports-judged-now',
    what: 'podwire gc: pod ports judged against the listing (a pod ADDed during the sweep is detached)',
    edits: [
      ['src/agent/cni/reconcile.js', 'if (claimed.has(name) || ctx.nl.linkByName(name))', 'if (false)'],
    ],
    tests: ['test/agent/gc-reconcile-races.test.js'],
  },
  {
    id: 'gc-reattach-current-claims',
    what: 'podwire gc: a kept pod re-attached with the addresses of the listing, not of its claims now',
    edits: [
      [
        'src/agent/cni/reconcile.js',
        'const ips = ctx.ipam.lookup(att).map((a) => a.ip);',
        'const ips = [att.ip];',
      ],
    ],
    tests: ['test/agent/gc-reconcile-races.test.js'],
  },
  {
    id: 'peer-vtep-mac-taken',
    what: "Cluster: a peer record may copy another peer's VTEP MAC (and pull that peer's pod traffic)",
    edits: [['src/agent/startup/peer-check.js', 'if (macOwner !== undefined)', 'if (false)']],
    tests: [
      'test/agent/peer-check.test.js',
      'test/agent/hardening/finding-02-peer-records-validated.test.js',
    ],
  },
  {
    id: 'lease-cache-only-when-unreachable',
    what: 'Cluster: any store error at start falls back to the remembered pod CIDRs (a refusal is masked)',
    edits: [
      [
        'src/agent/startup/cluster-node.js',
        "!signal.aborted && storeFailure(err) !== 'unreachable'",
        'false',
      ],
    ],
    tests: ['test/agent/cluster-lease-check.test.js'],
  },
  {
    id: 'cni-env-strict-utf8',
    what: 'CNI: an invalid UTF-8 byte in a CNI_* value silently rewritten (another interface name)',
    edits: [['src/agent/cni/cni-server.js', 'if (!isUtf8(value)) {', 'if (false) {']],
    tests: ['test/relay/relay.test.js'],
  },
  {
    id: 'lb-no-linklocal-learn',
    what: "Linux bridge: learns the source of link-local frames (a pod takes any MAC's forwarding entry)",
    edits: [
      ['src/datapath/linux-bridge/bridge-datapath.js', 'nl.setBridgeNoLinklocalLearn(link.index);', ''],
    ],
    tests: ['test/datapath/spoofing-linux-bridge.test.js'],
  },
  {
    id: 'lb-pod-static-fdb',
    what: "Linux bridge: no static forwarding entry for a pod's MAC (unicast for a silent pod is unknown unicast)",
    edits: [
      [
        'src/datapath/linux-bridge/pod-forwarding.js',
        'nl.setBridgeStaticFdb({ index: port.hostIfindex, mac, vlan });',
        '',
      ],
    ],
    tests: ['test/datapath/linux-bridge-fdb.test.js'],
  },
  {
    id: 'lb-pod-static-fdb-reattach',
    what: 'Linux bridge: a re-attached pod port (reconcile after a restart) does not get its static forwarding entry back',
    edits: [
      [
        'src/datapath/linux-bridge/pod-forwarding.js',
        'nl.setBridgeStaticFdb({ index: port.hostIfindex, mac: want.mac, vlan });',
        '{}',
      ],
    ],
    tests: ['test/datapath/linux-bridge-fdb.test.js'],
  },
  {
    id: 'lb-pod-no-unicast-flood',
    what: 'Linux bridge: unknown unicast flooded to pod ports (every pod receives unicast for a silent one)',
    edits: [
      [
        'src/datapath/linux-bridge/pod-forwarding.js',
        'nl.setBridgePortUnicastFlood(port.hostIfindex, false);',
        '',
      ],
    ],
    tests: ['test/datapath/linux-bridge-fdb.test.js'],
  },
  {
    id: 'lb-pod-fdb-check',
    what: "Linux bridge: CHECK does not look at a pod port's static forwarding entry and flooding",
    edits: [
      [
        'src/datapath/linux-bridge/bridge-datapath.js',
        'this.#forwarding.check(link, () => ({',
        '((_link, _unpinned) => undefined)(link, () => ({',
      ],
    ],
    tests: ['test/datapath/linux-bridge-fdb.test.js'],
  },
  {
    id: 'host-veth-takes-nothing',
    what: "Host veths' own IP stack open (the node takes a pod's packets from any source through it)",
    edits: [['src/agent/cni/cmd-add.js', 'hostVethTakesNothing(hostName);', '']],
    tests: ['test/datapath/spoofing-linux-bridge.test.js', 'test/datapath/spoofing-ovs.test.js'],
  },
  {
    id: 'ovs-nd-ns-no-sll-any-source',
    what: "OVS: an NS without a readable SLL passes from any source, not only from :: (a duplicated SLL rewrites the receivers' entry)",
    edits: [
      [
        'src/datapath/ovs/pipeline.js',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the text of a template literal in the compiled file
        'ipv6_src=::,icmp_type=135,icmp_code=0,nd_target=${target},nd_sll=',
        'icmp_type=135,icmp_code=0,nd_sll=',
      ],
    ],
    tests: ['test/datapath/spoofing-ovs.test.js'],
  },
  {
    id: 'ovs-ns-sll-any-source',
    what: "OVS: an NS with the pod's own SLL passes from any source, :: included (a DAD probe with an SLL option for any target)",
    edits: [
      [
        'src/datapath/ovs/pipeline.js',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the text of a template literal in the compiled file
        'icmp6,${port},ipv6_src=${src},icmp_type=135,icmp_code=0,nd_sll=${mac}',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the text of a template literal in the compiled file
        'icmp6,${port},icmp_type=135,icmp_code=0,nd_sll=${mac}',
      ],
    ],
    tests: ['test/datapath/spoofing-ovs.test.js'],
  },
  {
    id: 'ovs-rs-passes',
    what: "OVS: a router solicitation from a pod passes (its SLL option rewrites the node's entry for the pod)",
    edits: [
      ['src/datapath/ovs/pipeline.js', "flow(c, T.CLASSIFIER, 220, 'icmp6,icmp_type=133', 'drop'),", ''],
    ],
    tests: ['test/datapath/spoofing-ovs.test.js'],
  },
  {
    id: 'lb-rs-passes',
    what: "Linux bridge: a router solicitation from a pod passes (its SLL option rewrites the node's entry for the pod)",
    edits: [
      [
        'src/datapath/linux-bridge/pod-guard.js',
        "'icmpv6 type { nd-router-solicit, nd-router-advert, nd-redirect } counter name CLASSIFIER drop',",
        "'icmpv6 type { nd-router-advert, nd-redirect } counter name CLASSIFIER drop',",
      ],
    ],
    tests: ['test/datapath/spoofing-linux-bridge.test.js'],
  },
  {
    id: 'lb-dhcp-server-passes',
    what: "Linux bridge: a pod's DHCP and DHCPv6 server messages reach clients (a pod configures the underlay's hosts in bridging mode)",
    edits: [
      ['src/datapath/linux-bridge/pod-guard.js', "'udp dport 68 counter name CLASSIFIER drop',", ''],
      ['src/datapath/linux-bridge/pod-guard.js', "'udp dport 546 counter name CLASSIFIER drop',", ''],
    ],
    tests: ['test/datapath/spoofing-linux-bridge.test.js'],
  },
  {
    id: 'ovs-dhcp-server-passes',
    what: "OVS: a pod's DHCP and DHCPv6 server messages reach clients (a pod configures the underlay's hosts in bridging mode)",
    edits: [
      ['src/datapath/ovs/pipeline.js', "flow(c, T.CLASSIFIER, 220, 'udp,tp_dst=68', 'drop'),", ''],
      ['src/datapath/ovs/pipeline.js', "flow(c, T.CLASSIFIER, 220, 'udp6,tp_dst=546', 'drop'),", ''],
    ],
    tests: ['test/datapath/spoofing-ovs.test.js'],
  },
  {
    id: 'lb-dhcp-server-sport-only',
    what: 'Linux bridge: the DHCP(v6) server guard matches the source port too (a pod answers from 1067 to 68)',
    edits: [
      [
        'src/datapath/linux-bridge/pod-guard.js',
        "'udp dport 68 counter",
        "'udp sport 67 udp dport 68 counter",
      ],
      [
        'src/datapath/linux-bridge/pod-guard.js',
        "'udp dport 546 counter",
        "'udp sport 547 udp dport 546 counter",
      ],
    ],
    tests: ['test/datapath/spoofing-linux-bridge.test.js'],
  },
  {
    id: 'ovs-dhcp-server-sport-only',
    what: 'OVS: the DHCP(v6) server drop flows match the source port too (a pod answers from 1067 to 68)',
    edits: [
      ['src/datapath/ovs/pipeline.js', "'udp,tp_dst=68'", "'udp,tp_src=67,tp_dst=68'"],
      ['src/datapath/ovs/pipeline.js', "'udp6,tp_dst=546'", "'udp6,tp_src=547,tp_dst=546'"],
    ],
    tests: ['test/datapath/spoofing-ovs.test.js'],
  },
  {
    id: 'lb-arp-probe-any-target',
    what: "Linux bridge: a pod's ARP probe (sender 0.0.0.0) passes for any target (a neighbour's address)",
    edits: [
      [
        'src/datapath/linux-bridge/pod-guard.js',
        "'arp saddr ip 0.0.0.0 meta iifname . ether saddr . arp daddr ip != @pod_ip4 counter name ARP_SPOOF_GUARD drop',",
        '',
      ],
    ],
    tests: ['test/datapath/spoofing-linux-bridge.test.js'],
  },
  {
    id: 'ovs-arp-probe-any-target',
    what: "OVS: a pod's ARP probe (sender 0.0.0.0) passes for any target (a neighbour's address)",
    edits: [
      [
        'src/datapath/ovs/pipeline.js',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the text of a template literal in the compiled file
        'arp_spa=0.0.0.0,arp_tpa=${ip},arp_sha=${mac}',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the text of a template literal in the compiled file
        'arp_spa=0.0.0.0,arp_sha=${mac}',
      ],
    ],
    tests: ['test/datapath/spoofing-ovs.test.js'],
  },
  {
    id: 'egress-invalid-passes',
    what: "both datapaths: a pod's packets conntrack finds invalid (SYN+FIN, a stray ICMP error) leave for the underlay unmasqueraded",
    edits: [
      [
        'src/datapath/egress-masquerade.js',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the text of a template literal in the compiled file
        'ct state invalid ${f.match}',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the text of a template literal in the compiled file
        'ct state invalid ct state new ${f.match}',
      ],
    ],
    tests: ['test/datapath/spoofing-linux-bridge.test.js', 'test/datapath/spoofing-ovs.test.js'],
  },
  {
    id: 'host-veth-input-off',
    what: "both datapaths: a pod's datagram from 0.0.0.0 to a link-local group or broadcast MAC reaches the node's sockets on its host veth",
    edits: [
      [
        'src/agent/startup/host-veth-input.js',
        'meta iifkind "veth" counter name dropped drop`',
        'meta iifkind "veth" counter name dropped accept`',
      ],
    ],
    tests: ['test/agent/hardening/host-veth-input.test.js'],
  },
  {
    id: 'host-veth-input-off-alone',
    what: "both datapaths, with the host veth's sysctls at the defaults: forged sources reach the node's sockets on its host veth",
    edits: [
      [
        'src/agent/startup/host-veth-input.js',
        'meta iifkind "veth" counter name dropped drop`',
        'meta iifkind "veth" counter name dropped accept`',
      ],
    ],
    tests: ['test/agent/hardening/host-veth-layers.test.js'],
  },
  {
    id: 'host-veth-rp-filter-off',
    what: 'both datapaths: no strict rp_filter on the host veth (the nftables input rule switched off by the test)',
    edits: [
      [
        'src/agent/cni/host-veth-sysctls.js',
        "writeSysctl(ifaceSysctl(4, hostIfname, 'rp_filter'), '1');",
        '',
      ],
    ],
    tests: ['test/agent/hardening/host-veth-layers.test.js'],
  },
  {
    id: 'host-veth-arp-ignore-off',
    what: 'both datapaths: the host veth answers ARP probes handed to its own stack',
    edits: [
      [
        'src/agent/cni/host-veth-sysctls.js',
        "writeSysctl(ifaceSysctl(4, hostIfname, 'arp_ignore'), '8');",
        '',
      ],
    ],
    tests: ['test/agent/hardening/host-veth-layers.test.js'],
  },
  {
    id: 'host-veth-ipv6-on',
    what: 'both datapaths: IPv6 stays on on the host veth (the nftables input rule switched off by the test)',
    edits: [
      [
        'src/agent/cni/host-veth-sysctls.js',
        "name === 'accept_ra' ? '0' : '1'",
        "name === 'accept_ra' ? '0' : '0'",
      ],
    ],
    tests: ['test/agent/hardening/host-veth-layers.test.js'],
  },
  {
    id: 'lb-hairpin-off',
    what: 'Linux bridge: pod ports attached without hairpin mode (a pod behind a ClusterIP cannot reach itself)',
    edits: [
      [
        'src/datapath/linux-bridge/bridge-datapath.js',
        'if (podPort)\n            nl.setBridgePortHairpin(port.hostIfindex, true);',
        '',
      ],
    ],
    tests: ['test/multinode/services.test.js', 'test/datapath/linux-bridge-hairpin.test.js'],
  },
  {
    id: 'host-veth-input-by-name',
    what: "host veth input: the rule keys on the name pw* again (an administrator's veth named pw-adm loses its traffic to the node)",
    edits: [
      [
        'src/agent/startup/host-veth-input.js',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the text of a template literal in the compiled file
        'meta iifgroup ${HOST_VETH_GROUP} meta iifkind',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the text of a template literal in the compiled file
        'meta iifname "${HOST_VETH_PREFIX}*" meta iifkind',
      ],
    ],
    tests: ['test/agent/hardening/host-veth-input.test.js'],
  },
  {
    id: 'host-veth-input-group-unset',
    what: "host veth input: ADD creates the host veth outside podwire's group (the guard does not see it)",
    edits: [['src/agent/cni/cmd-add.js', 'group: HOST_VETH_GROUP,', '']],
    tests: ['test/agent/hardening/host-veth-input.test.js'],
  },
  {
    id: 'host-veth-input-legacy-ungrouped',
    what: "host veth input: an earlier agent's host veths (podwire's alias, group 0) are not put in the group at start",
    edits: [['src/agent/startup/host-veth-input.js', 'groupLegacyHostVeths(nl);', '']],
    tests: ['test/agent/hardening/host-veth-input.test.js'],
  },
  {
    id: 'lb-uplink-guard-out',
    what: "Linux bridge, bridging mode: a plain pod's frames for an underlay MAC, and its floods, leave the uplink",
    edits: [
      [
        'src/datapath/linux-bridge/pod-guard.js',
        "'meta iifname @pod_ports meta oifname @uplink meta iifname != @underlay_pods counter name L2_FORWARDING drop',",
        '',
      ],
    ],
    tests: ['test/agent/hardening/plain-pods-off-the-underlay.test.js'],
  },
  {
    id: 'lb-uplink-guard-in',
    what: 'Linux bridge, bridging mode: the underlay reaches a plain pod at L2 (unicast to its MAC, floods)',
    edits: [
      [
        'src/datapath/linux-bridge/pod-guard.js',
        "'meta iifname @uplink meta oifname @pod_ports meta oifname != @underlay_pods counter name L2_FORWARDING drop',",
        '',
      ],
    ],
    tests: ['test/agent/hardening/plain-pods-off-the-underlay.test.js'],
  },
  {
    id: 'lb-uplink-guard-no-host-exception',
    what: "Linux bridge, bridging mode: frames the node DNATs and bridge netfilter bridges (a masqueraded connection's replies, Services) are dropped too",
    edits: [
      [
        'src/datapath/linux-bridge/pod-guard.js',
        "'meta iifname @pod_ports meta oifname @uplink meta iifname != @underlay_pods meta pkttype host ether saddr set meta oifname map @uplink_mac accept',",
        '',
      ],
      [
        'src/datapath/linux-bridge/pod-guard.js',
        "'meta iifname @uplink meta oifname @pod_ports meta oifname != @underlay_pods meta pkttype host ether saddr set meta iifname map @uplink_mac accept',",
        '',
      ],
    ],
    tests: ['test/agent/hardening/plain-pods-off-the-underlay.test.js'],
  },
  {
    id: 'lb-bridged-dnat-keeps-pod-mac',
    what: "Linux bridge, bridging mode: a frame bridge netfilter bridges after the node's DNAT crosses the uplink with the plain pod's (or the underlay host's) MAC",
    edits: [
      [
        'src/datapath/linux-bridge/pod-guard.js',
        "'meta iifname @pod_ports meta oifname @uplink meta iifname != @underlay_pods meta pkttype host ether saddr set meta oifname map @uplink_mac accept',",
        "'meta iifname @pod_ports meta oifname @uplink meta iifname != @underlay_pods meta pkttype host accept',",
      ],
      [
        'src/datapath/linux-bridge/pod-guard.js',
        "'meta iifname @uplink meta oifname @pod_ports meta oifname != @underlay_pods meta pkttype host ether saddr set meta iifname map @uplink_mac accept',",
        "'meta iifname @uplink meta oifname @pod_ports meta oifname != @underlay_pods meta pkttype host accept',",
      ],
    ],
    tests: ['test/agent/hardening/plain-pods-off-the-underlay.test.js'],
  },
  {
    id: 'ovs-uplink-output-any-pod',
    what: 'OVS, bridging mode: unknown unicast from any pod, plain ones too, leaves the uplink',
    edits: [
      [
        'src/datapath/ovs/pipeline.js',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the text of a template literal in the compiled file
        '60, `reg1=0,${underlay}/0x${UNDERLAY.toString(16)}`',
        "60, 'reg1=0'",
      ],
    ],
    tests: ['test/agent/hardening/plain-pods-off-the-underlay.test.js'],
  },
  {
    id: 'ovs-plain-pod-takes-uplink-frames',
    what: "OVS, bridging mode: a plain pod's delivery flow takes frames from the uplink (the underlay reaches it at L2)",
    edits: [
      [
        'src/datapath/ovs/pipeline.js',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the text of a template literal in the compiled file
        "underlay ? '' : `,reg2=0/0x${FROM_UPLINK.toString(16)}`",
        "''",
      ],
    ],
    tests: ['test/agent/hardening/plain-pods-off-the-underlay.test.js'],
  },
  {
    id: 'ovs-uplink-floods',
    what: "OVS, bridging mode: the uplink is not no-flood (a plain pod's floods leave it; also after a switch restart)",
    edits: [
      ['src/datapath/ovs/ovs-datapath.js', 'await this.#readyFlows().setNoFlood(uplink.ifname);', ''],
      [
        'src/datapath/ovs/ovs-datapath.js',
        'for (const name of [...uplinks, ...vlanPorts])',
        'for (const name of vlanPorts)',
      ],
    ],
    tests: [
      'test/agent/hardening/plain-pods-off-the-underlay.test.js',
      'test/datapath/ovs/switch-restart.test.js',
    ],
  },
  {
    id: 'ovs-dad-any-target',
    what: "OVS: a DAD probe (NS from ::) passes whatever its target (a pod takes a neighbour's tentative address away)",
    edits: [
      [
        'src/datapath/ovs/pipeline.js',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the text of a template literal in the compiled file
        'ipv6_src=::,icmp_type=135,icmp_code=0,nd_target=${target},nd_sll=',
        'ipv6_src=::,icmp_type=135,icmp_code=0,nd_sll=',
      ],
    ],
    tests: ['test/datapath/spoofing-ovs.test.js'],
  },
  {
    id: 'lb-dad-any-target',
    what: "Linux bridge: a DAD probe (NS from ::) passes whatever its target (a pod takes a neighbour's tentative address away)",
    edits: [
      [
        'src/datapath/linux-bridge/pod-guard.js',
        "'ip6 saddr :: meta iifname . ether saddr . @th,64,128 @pod_nd_target return',",
        "'ip6 saddr :: return',",
      ],
    ],
    tests: ['test/datapath/spoofing-linux-bridge.test.js'],
  },
  {
    id: 'lb-dad-foreign-target-passes-bare',
    what: 'Linux bridge: a DAD probe for a foreign target falls through to the later NS rules (one without options passes)',
    edits: [['src/datapath/linux-bridge/pod-guard.js', "'ip6 saddr :: counter name ND_GUARD drop',", '']],
    tests: ['test/datapath/spoofing-linux-bridge.test.js'],
  },
  {
    id: 'vxlan-guard-input',
    what: "VXLAN guard: the node's tunnel port takes datagrams from anyone (a pod injects packets with any source into its node)",
    edits: [
      [
        'src/datapath/overlay/vxlan-guard.js',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the text of a template literal in the compiled file
        '`add rule ${T} input udp dport ${port} ip saddr != @peers4 counter name forged drop`,',
        '',
      ],
    ],
    tests: ['test/multinode/vxlan-guard.test.js'],
  },
  {
    id: 'vxlan-guard-input-own-address',
    what: "VXLAN guard: the tunnel port takes a peer's datagrams to any address of the node (a pod's, masqueraded, to the peer's second address or VIP)",
    edits: [
      [
        'src/datapath/overlay/vxlan-guard.js',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the text of a template literal in the compiled file
        '`add rule ${T} input udp dport ${port} ${own} daddr != ${underlayIP} counter name forged drop`,',
        '',
      ],
    ],
    tests: ['test/multinode/vxlan-guard.test.js'],
  },
  {
    id: 'pool-create-pod-cidr-unchecked',
    what: "pool create: a pool whose ranges are in a node's pod CIDR (or the clusterCIDRs) is created",
    edits: [['src/cli/pool-command.js', 'await refusePodCIDRs(parsed, store, clusterCIDRs);', '']],
    tests: ['test/multinode/pool-overlap.test.js'],
  },
  {
    id: 'pool-start-pod-cidr-unchecked',
    what: "agent start: a stored pool overlapping the node's pod CIDR goes unnoticed (one address for two pods)",
    edits: [['src/agent/startup/pool-start.js', 'await refuseOverlaps(pools, podCIDRs, log);', '']],
    tests: ['test/multinode/pool-overlap.test.js'],
  },
  {
    id: 'vxlan-guard-forward',
    what: "VXLAN guard: a pod's datagram to a peer's tunnel port is forwarded (masqueraded, the peer takes it as the node's)",
    edits: [
      [
        'src/datapath/overlay/vxlan-guard.js',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: the text of a template literal in the compiled file
        '`add rule ${T} forward udp dport ${port} ip daddr @peers4 counter name forged drop`,',
        '',
      ],
    ],
    tests: ['test/multinode/vxlan-guard.test.js'],
  },
  {
    id: 'vxlan-guard-peers-unset',
    what: 'VXLAN guard: the peer set is never filled (every peer is refused: no cross-node traffic)',
    edits: [['src/agent/startup/cluster-start.js', 'await vxlanGuard?.setPeers(peers);', '']],
    tests: ['test/multinode/vxlan-guard.test.js'],
  },
  {
    id: 'node-lock-off',
    what: "One agent per node: no lock, a second agent takes over the first one's socket or state",
    edits: [
      [
        'src/agent/agent.js',
        'const lock = await NodeLock.acquire({',
        'const lock = { release() {} } ?? await NodeLock.acquire({',
      ],
    ],
    tests: ['test/agent/one-agent-per-node.test.js'],
  },
  {
    id: 'unlink-any-socket',
    what: 'The agent removes whatever socket is at its path when it stops, not only its own',
    edits: [['src/agent/unix-listen.js', 'st.dev === file.dev && st.ino === file.ino', 'true']],
    tests: ['test/agent/unix-listen.test.js'],
  },

  {
    id: 'etcd-failover-from-silent-member',
    what: 'etcd: a member that does not answer stays preferred (the store stays down with healthy members)',
    edits: [
      [
        'src/cluster/etcd-gateway.js',
        'this.#preferred = (index + 1) % this.#endpoints.length;',
        'this.#preferred = index;',
      ],
    ],
    tests: ['test/cluster/etcd-failover.test.js'],
  },
  {
    id: 'ovs-replay-on-reconnect',
    what: 'OVS: no replay of the wanted state when the OpenFlow connection comes back',
    edits: [['src/datapath/ovs/ovs-datapath.js', "this.#replay('OpenFlow connection back');", '']],
    tests: ['test/datapath/ovs/switch-restart.test.js'],
  },
  {
    id: 'openflow-bundle-discard-on-add-error',
    what: 'OpenFlow: a bundle whose ADD failed is committed instead of discarded (OVS would apply the rest)',
    edits: [
      [
        'src/datapath/ovs/openflow/exchange.js',
        'failure = openFailed ?? first ?? (isError',
        'failure = openFailed ?? (isError',
      ],
    ],
    tests: ['test/datapath/ovs/openflow/real-switch.test.js'],
  },
  {
    id: 'cli-pods-cut-id',
    what: 'CLI: `podwire pods` cuts the container ID to 12 characters (not pasteable into flows --pod)',
    edits: [['src/cli/commands.js', 'p.containerId,\n', 'p.containerId.slice(0, 12),\n']],
    tests: ['test/cli/cli.test.js', 'test/cli/pods-flows.test.js'],
  },
  {
    id: 'cli-arp-audit-error-status',
    what: 'CLI: an arp audit that cannot run exits 1, as for a violation',
    edits: [['src/cli/arp-command.js', 'errorStatus: 2,', '']],
    tests: ['test/cli/operator.test.js'],
  },
  {
    id: 'identities-pod-by-attachment-key',
    what: 'identities: a pod without Kubernetes arguments is named by its attachment key (a JSON array)',
    edits: [['src/agent/ops/identities.js', 'pod: c.pod ?? c.containerId', 'pod: c.pod ?? key']],
    tests: ['test/cli/operator.test.js'],
  },
  {
    id: 'metrics-size-as-float',
    what: 'metrics: an IPv6 range size printed from a float (18446744073709552000)',
    edits: [['src/agent/ops/metrics-gauges.js', 'value: u.size }))', 'value: Number(u.size) }))']],
    tests: ['test/cli/operator.test.js'],
  },
  {
    id: 'cni-server-declared-length',
    what: 'CNI socket: a header declaring more than a request may hold waits for the deadline (the CLI at cni.sock waits 5 s)',
    edits: [['src/agent/cni/cni-server.js', '(declared ?? 0) > MAX_REQUEST', 'false']],
    tests: ['test/cli/operator.test.js'],
  },
  {
    id: 'add-twice-interface-exists',
    what: 'ADD twice in the same namespace answers 103 (eth0 exists), not 102 with the address held',
    edits: [['src/agent/cni/cmd-add.js', 'if (held.length > 0) {', 'if (false) {']],
    tests: ['test/agent/bad-input.test.js'],
  },
  {
    id: 'cni-error-echoes-version',
    what: 'CNI errors labelled with an unsupported cniVersion (the one refused)',
    edits: [['src/agent/cni/cni-dispatch.js', 'isSupportedVersion(v) ? v', "v !== '' ? v"]],
    tests: ['test/agent/bad-input.test.js'],
  },
  {
    id: 'checksum-hop-no-redirect',
    what: "the host veth's ingress is not redirected to the checksum IFB (a pending checksum is completed after the guard)",
    edits: [['src/datapath/checksum-ifb.js', 'this.#nl.addIngressRedirect(hostIfindex, ifb);', 'void ifb;']],
    tests: [
      'test/datapath/spoofing-linux-bridge.test.js',
      'test/datapath/checksum-hop.test.js',
      'test/agent/checksum-hop-restart.test.js',
      'test/multinode/checksum-forge.test.js',
      'test/multinode/bridging-spoof.test.js',
    ],
  },
  {
    id: 'checksum-hop-ifb-tx-on',
    what: 'the checksum IFB keeps transmit checksumming (it hands the pending checksum on unfinished)',
    edits: [
      [
        'src/datapath/checksum-ifb.js',
        'eth.setTxChecksumming(name, false);',
        'eth.setTxChecksumming(name, true);',
      ],
    ],
    tests: [
      'test/datapath/spoofing-linux-bridge.test.js',
      'test/datapath/checksum-hop.test.js',
      'test/multinode/checksum-forge.test.js',
    ],
  },
  {
    id: 'pod-ifb-tx-on',
    what: "a pod's own IFB (egress rate) keeps transmit checksumming: its frames pass the hop with the checksum pending",
    edits: [
      [
        'src/datapath/pod-bandwidth.js',
        'eth.setTxChecksumming(name, false);',
        'eth.setTxChecksumming(name, true);',
      ],
    ],
    tests: ['test/agent/bandwidth.test.js', 'test/datapath/spoofing-linux-bridge.test.js'],
  },
  {
    id: 'pod-bandwidth-no-egress-tbf',
    what: "a pod's egress rate is not shaped (no TBF on its IFB)",
    edits: [['src/datapath/pod-bandwidth.js', 'shapeIngress(nl, index, tbf);', 'void tbf;']],
    tests: ['test/agent/bandwidth.test.js', 'test/e2e/chain.test.js'],
  },
  {
    id: 'pod-bandwidth-no-ingress-tbf',
    what: "a pod's ingress rate is not shaped (no TBF on its host veth)",
    edits: [['src/agent/cni/cmd-add.js', 'shapeIngress(nl, hostLink.index, shaping.ingress);', 'void 0;']],
    tests: ['test/agent/bandwidth.test.js', 'test/e2e/chain.test.js'],
  },
  {
    id: 'i4-mkdir-parent-fsync',
    what: "I4: mkdirDurably's fsync of each new directory's parent dropped",
    edits: [['src/ipam/fs-durable.js', 'await syncDir(dirname(dir));', ';']],
    tests: I4,
    commands: [POWERCUT],
  },
  {
    id: 'install-cni-node-name',
    what: 'install-cni: with a cluster store the agent keeps the host name as nodeName (two nodes of one host register as one)',
    edits: [['../deploy/install-cni.mjs', "doc.has('cluster') && !doc.has('nodeName')", 'false']],
    tests: ['test/deploy/install-cni.test.js'],
  },
  {
    id: 'kube-watch-error-410-ignored',
    what: 'Kubernetes watch: a 410 (an ERROR event with code 410, or an HTTP 410) is not taken for Gone, so no relist',
    edits: [
      ['src/kube/reflector.js', 'if (status.code === 410)', 'if (false)'],
      ['src/kube/reflector.js', 'if (err instanceof KubeApiError && err.gone) {', 'if (false) {'],
    ],
    tests: ['test/kube/reflector.test.js'],
  },
  {
    id: 'kube-relist-keeps-deleted',
    what: 'Kubernetes relist: objects deleted while the watch was away stay in the cache (no delete emitted)',
    edits: [['src/kube/reflector.js', 'if (!fresh.has(key)) {', 'if (false) {']],
    tests: ['test/kube/reflector.test.js'],
  },
  {
    id: 'own-cidr-change-silent',
    what: "A change of this node's own pod CIDRs in the cluster store passes without a word (store: kubernetes, a Node re-created with another CIDR)",
    edits: [
      [
        'src/agent/startup/cluster-node.js',
        "if (ev.type === 'put' && !sameCIDRs(ev.node.podCIDRs, this.#record.podCIDRs)) {",
        'if (false) {',
      ],
    ],
    tests: ['test/multinode/kube-store.test.js'],
  },
  {
    id: 'bandwidth-keys-exact-case',
    what: "bandwidth capability: only the spec's lower-case keys read (containerd 1.6's IngressRate ignored: nothing shaped)",
    edits: [['src/cni/bandwidth.js', 'k.toLowerCase() === field.toLowerCase()', 'k === field']],
    tests: ['test/cni/bandwidth.test.js'],
  },
  {
    id: 'policy-selector-notin-as-in',
    what: 'NetworkPolicy selectors: NotIn read as In (a pod without the key or with another value no longer matches)',
    edits: [
      [
        'src/policy/label-selector.js',
        'return !has || !req.values.includes(labels[req.key]);',
        'return has && req.values.includes(labels[req.key]);',
      ],
    ],
    tests: POLICY,
  },
  {
    id: 'policy-selector-exists-ignored',
    what: 'NetworkPolicy selectors: Exists holds for every object',
    edits: [
      [
        'src/policy/label-selector.js',
        "case 'Exists':\n            return has;",
        "case 'Exists':\n            return true;",
      ],
    ],
    tests: POLICY,
  },
  {
    id: 'policy-ipblock-except-dropped',
    what: 'NetworkPolicy ipBlock: the except is not taken out of the cidr',
    edits: [['src/policy/ip-block.js', 'subtractRanges([prefixRange(cidr)], holes)', '[prefixRange(cidr)]']],
    tests: POLICY,
  },
  {
    id: 'policy-named-port-egress-wrong-pod',
    what: 'NetworkPolicy egress named ports: every destination resolved against the lowest-addressed pod, not its own ports',
    edits: [['src/policy/compile.js', 'resolve(owner.pod)', 'resolve(this.#index.owner[0].pod)']],
    tests: POLICY,
  },
  {
    id: 'policy-named-port-ingress-wrong-pod',
    what: 'NetworkPolicy ingress named ports: resolved against another pod instead of the local (destination) pod',
    edits: [
      [
        'src/policy/compile.js',
        'this.#resolver(rule.ports)(local)',
        'this.#resolver(rule.ports)(this.#peerPods.find((p) => p.pod !== local)?.pod ?? local)',
      ],
    ],
    tests: POLICY,
  },
  {
    id: 'policy-no-rules-allows-all',
    what: 'NetworkPolicy: a selecting policy without rules for the direction (`ingress: []`) allows everything',
    edits: [
      [
        'src/policy/compile.js',
        'for (const policy of selecting) {',
        "for (const policy of selecting) { if (policy[direction].length === 0) rules.push({ id: 'mutant', entries: [{ peers: 'any', ports: 'any' }] });",
      ],
    ],
    tests: POLICY,
  },
  {
    id: 'policy-fail-closed-removed',
    what: 'NetworkPolicy: a pod whose Pod object has not arrived (labels null) is not isolated',
    edits: [
      [
        'src/policy/compile.js',
        'if (policies.length === 0)\n                return null;',
        'if (true)\n                return null;',
      ],
    ],
    tests: POLICY,
  },
  {
    id: 'policy-nft-no-established',
    what: 'NetworkPolicy (Linux bridge): no ct established,related accept first (replies to an isolated pod dropped)',
    edits: [
      [
        'src/datapath/linux-bridge/policy-table.js',
        "ESTABLISHED_ACCEPT = 'ct state established,related accept'",
        "ESTABLISHED_ACCEPT = 'counter'",
      ],
    ],
    tests: ['test/datapath/linux-bridge-policy.test.js'],
  },
  {
    id: 'policy-nft-no-isolation-drop',
    what: 'NetworkPolicy (Linux bridge): an isolated pod that no element allows is not dropped',
    edits: [['src/datapath/linux-bridge/policy-table.js', '} drop`', '} accept`']],
    tests: ['test/datapath/linux-bridge-policy.test.js'],
  },
  {
    id: 'policy-nft-interval-merge',
    what: "NetworkPolicy (Linux bridge): a rule's peer ranges merged across the gaps between them (an except's hole passes)",
    edits: [['src/datapath/linux-bridge/policy-elements.js', 'last.hi + 1n === lo', 'last.hi < lo']],
    tests: ['test/datapath/linux-bridge-policy.test.js', 'test/datapath/policy-elements.test.js'],
  },
  {
    id: 'nfnetlink-batch-send-buffer',
    what: 'nf_tables batch: the send buffer is not grown to the batch (a big apply fails with EMSGSIZE)',
    edits: [
      ['src/kernel/netlink/nfnetlink-socket.js', 'if (length + 4096 <= this.#sendBuffer)', 'if (true)'],
    ],
    tests: ['test/datapath/linux-bridge-policy.test.js'],
  },
  {
    id: 'policy-nft-no-resync',
    what: 'NetworkPolicy (Linux bridge): after a failed batch the kernel is not read again (sets changed behind its back: every apply fails)',
    edits: [['src/datapath/linux-bridge/nft-policy-backend.js', '            this.#readInstalled();\n', '']],
    tests: ['test/datapath/linux-bridge-policy.test.js'],
  },
  {
    id: 'ovs-policy-no-est-pass',
    what: 'OVS NetworkPolicy: packets of known connections (+est, replies) are judged by the rules again instead of passing (an isolated client gets no replies)',
    edits: [['src/datapath/ovs/policy-flows.js', 'ct_state=-est-rel+trk,', 'ct_state=-rel+trk,']],
    tests: ['test/datapath/ovs/policy.test.js'],
  },
  {
    id: 'ovs-policy-no-isolated-drop',
    what: "OVS NetworkPolicy: an isolated pod's drop flow passes instead (isolation without effect)",
    edits: [['src/datapath/ovs/policy-flows.js', "actions: 'drop',", 'actions: goto(next),']],
    tests: ['test/datapath/ovs/policy.test.js'],
  },
  {
    id: 'ovs-policy-no-port-clause',
    what: "OVS NetworkPolicy: the conjunction's port dimension dropped (a rule allows every port of its peers)",
    edits: [
      [
        'src/datapath/ovs/policy-flows.js',
        'const n = 1 + (peers ? 1 : 0) + (ports ? 1 : 0);',
        'const n = 1 + (peers ? 1 : 0);',
      ],
      ['src/datapath/ovs/policy-flows.js', 'if (ports)', 'if (false)'],
    ],
    tests: ['test/datapath/ovs/policy.test.js'],
  },
  {
    id: 'kube-add-waits-for-pod-object',
    what: 'store kubernetes: ADD waits (up to 20 s, then fails) for the Pod object to reach the pod cache instead of wiring the pod at once',
    edits: [
      [
        'src/agent/cni/cmd-add.js',
        'podAttached(ctx, att, port.podIps);',
        "for (let i = 0; ctx.pods && att.pod && ctx.pods.pod(...att.pod.split('/')) === undefined; i++) { if (i > 100) throw new Error('no Pod object yet'); await new Promise((r) => setTimeout(r, 200)); } podAttached(ctx, att, port.podIps);",
      ],
    ],
    tests: ['test/multinode/kube-outage.test.js'],
  },
  {
    id: 'kube-remembered-cidrs-unread',
    what: 'store kubernetes: the pod CIDRs remembered in node-lease.json are not read when the API server does not answer at start',
    edits: [
      [
        'src/agent/startup/cluster-node.js',
        'const cached = readCache(o.stateDir, o.nodeName);',
        "const cached = o.store.description.startsWith('kubernetes') ? undefined : readCache(o.stateDir, o.nodeName);",
      ],
    ],
    tests: ['test/multinode/kube-outage.test.js'],
  },
  {
    id: 'kube-pod-decoder-accepts-bad-ip',
    what: 'pod cache: the Pod decoder accepts a status.podIPs entry that is not an address',
    edits: [
      [
        'src/cluster/kube-pod.js',
        "const ip = typeof text === 'string' ? normalizeIp(text) : undefined;",
        "const ip = typeof text === 'string' ? (normalizeIp(text) ?? text) : undefined;",
      ],
    ],
    tests: ['test/kube/pod-cache.test.js'],
  },
  {
    id: 'kube-local-pod-never-filled',
    what: 'pod cache: a local pod ADDed before its Pod object keeps labels null when the object arrives',
    edits: [
      [
        'src/cluster/kube-pod-cache.js',
        'if (cached && (uids.length === 0 || uids.includes(cached.uid)))',
        'if (false)',
      ],
    ],
    tests: ['test/kube/pod-cache.test.js'],
  },
  {
    id: 'kube-relist-touches-unchanged',
    what: 'Kubernetes relist: every object is emitted as modified, changed or not (a resync after an outage touches every pod)',
    edits: [['src/kube/reflector.js', 'else if (old.resourceVersion !== entry.resourceVersion) {', 'else {']],
    tests: ['test/multinode/kube-outage.test.js'],
  },
  {
    id: 'policy-add-no-wait',
    what: 'NetworkPolicy: ADD does not wait for the apply that includes its pod before the port forwards (the fail-closed window)',
    edits: [['src/agent/cni/cmd-add.js', 'await policyInForce(ctx,', 'if (false) await policyInForce(ctx,']],
    tests: ['test/multinode/kube-policy-linux-bridge.test.js'],
  },
  {
    id: 'ovs-start-drops-adopted-policy',
    what: "OVS: the datapath's start replaces the whole table without the policy flows it found (an agent restart opens every pod until the first apply)",
    edits: [
      [
        'src/datapath/ovs/ovs-datapath.js',
        'flows.replace(want, { keep: { cookie: POLICY_COOKIE, mask: POLICY_COOKIE_MASK } })',
        'flows.replace(want)',
      ],
    ],
    tests: ['test/multinode/kube-policy-ovs.test.js'],
  },
  {
    id: 'policy-snapshot-ignored',
    what: 'NetworkPolicy: an agent started while the API server is away ignores the snapshot of the last known state (every pod isolated)',
    edits: [
      [
        'src/agent/policy/policy-controller.js',
        'const s = loadSnapshot(stateDir, node);',
        'const s = undefined;',
      ],
    ],
    tests: ['test/multinode/kube-policy-linux-bridge.test.js'],
  },
  {
    id: 'ovs-replay-forgets-policy',
    what: "OVS: the replay of the switch's state after ovs-vswitchd restarts leaves the policy flows out (every pod open until the next policy change)",
    edits: [
      [
        'src/datapath/ovs/ovs-datapath.js',
        ': flows.replace([...want, ...policy]);',
        ': flows.replace(want);',
      ],
    ],
    tests: ['test/multinode/kube-policy-ovs.test.js'],
  },
  {
    id: 'ovs-switch-restart-unjudged',
    what: 'OVS: a replay that finds no policy flows (ovs-vswitchd restarted while the agent was away) forwards unjudged until the first apply instead of isolating every local pod',
    edits: [['src/datapath/ovs/ovs-datapath.js', 'this.#o.policy &&', 'false &&']],
    tests: ['test/multinode/kube-policy-ovs.test.js'],
  },
  {
    id: 'ippool-write-without-resource-version',
    what: 'IPPool claims and releases written without the resourceVersion precondition (last write wins: two nodes hand out one address, a claim is lost)',
    edits: [
      [
        'src/cluster/kube-pools.js',
        'const body = { metadata: { resourceVersion: rv }, status: decision.patch };',
        'const body = { status: decision.patch };',
      ],
    ],
    tests: ['test/kube/kube-pools-race.test.js'],
  },
  {
    id: 'ippool-range-order-unchecked',
    what: 'IP pool decoder: a range whose START is after its END is accepted (an IPPool the CRD schema cannot refuse gets through, unlogged and uncounted)',
    edits: [['src/cluster/ip-pool.js', 'if (last.value < first.value)', 'if (false)']],
    tests: ['test/kube/kube-pools.test.js'],
  },
  {
    id: 'policy-deny-no-log',
    what: 'NetworkPolicy (Linux bridge): the deny chains drop without the NFLOG rule (denied packets never logged)',
    edits: [
      [
        'src/datapath/linux-bridge/policy-table.js',
        'function denyLog(direction) {',
        "function denyLog(direction) { return 'counter';",
      ],
    ],
    tests: ['test/datapath/linux-bridge-policy-deny-log.test.js'],
  },
  {
    id: 'policy-deny-no-kernel-limit',
    what: "NetworkPolicy (Linux bridge): the deny chains' NFLOG without the kernel's rate limit (a flood reaches the agent whole)",
    edits: [
      ['src/datapath/linux-bridge/policy-table.js', 'const DENY_LIMIT = `', "const DENY_LIMIT = '' && `"],
    ],
    tests: ['test/datapath/linux-bridge-policy-deny-log.test.js'],
  },
  {
    id: 'policy-deny-no-agent-limit',
    what: "NetworkPolicy: the agent's deny log writes a line for every denied packet it reads (no token bucket)",
    edits: [['src/agent/policy/deny-logger.js', 'if (this.#tokens < 1)', 'if (false)']],
    tests: ['test/agent/deny-logger.test.js', 'test/datapath/linux-bridge-policy-deny-log.test.js'],
  },
  {
    id: 'policy-nft-cells-by-rule-id',
    what: "NetworkPolicy, Linux bridge: pods with the same rule ids share one cutting into cells even where a named port resolves differently on each (one pod gets another's ports)",
    edits: [
      [
        'src/datapath/linux-bridge/policy-elements.js',
        'const entries = JSON.stringify(dp.rules.map((r) => r.entries));',
        'const entries = JSON.stringify(dp.rules.map((r) => r.id));',
      ],
    ],
    tests: [
      'test/datapath/policy-elements.test.js',
      'test/datapath/linux-bridge-policy.test.js',
      'test/datapath/linux-bridge-policy-model.test.js',
    ],
    // Seed 1's first case has such a pair (b/p1 and b/p2, the named port `metrics`); about one case
    // in twenty does.
    env: { PODWIRE_POLICY_MODEL_SEED: '1', PODWIRE_POLICY_MODEL_CASES: '20' },
  },
  {
    id: 'agent-signals-after-start',
    what: 'The agent installs its SIGTERM handler only once started: a SIGTERM during the start kills it with the uplink still in the bridge',
    edits: [
      ['src/cli/agent-command.js', "process.once('SIGTERM', () => onSignal('SIGTERM'));", ''],
      [
        'src/cli/agent-command.js',
        'if (pending)\n            signalled(pending);',
        "process.once('SIGTERM', () => signalled?.('SIGTERM'));",
      ],
    ],
    tests: ['test/agent/hardening/finding-11-bridging-without-state-dir.test.js'],
  },
  {
    id: 'ovs-policy-no-cache-flush',
    what: "NetworkPolicy, OVS: an apply resolves once the bundle is committed, without flushing ovs-vswitchd's cached datapath flows (new connections keep the old verdict for a while)",
    edits: [
      [
        'src/datapath/ovs/policy-ovs-backend.js',
        'if (this.#flushOwed && this.#flushCache) {',
        'if (false) {',
      ],
    ],
    tests: ['test/datapath/ovs/policy-model.test.js'],
    env: { PODWIRE_POLICY_MODEL_SEED: '219660732', PODWIRE_POLICY_MODEL_CASES: '40' },
  },
  {
    id: 'nft-policy-stale-address-overlap',
    what: 'NetworkPolicy, Linux bridge: two pods with one address (a stale Pod object) both get elements; they overlap and the kernel refuses every apply',
    edits: [['src/datapath/linux-bridge/policy-elements.js', 'if (claimed.has(claim))', 'if (false)']],
    tests: ['test/datapath/nft-policy-backend-diff.test.js'],
  },
  {
    id: 'nft-policy-share-never-renewed',
    what: "NetworkPolicy, Linux bridge: a pod's share of the sets, once installed, is kept whatever its compiled policy becomes",
    edits: [
      [
        'src/datapath/linux-bridge/nft-policy-backend.js',
        'before?.signature === signature ? before',
        'before !== undefined ? before',
      ],
    ],
    tests: ['test/datapath/nft-policy-backend-diff.test.js'],
  },
  {
    id: 'pod-signature-ignores-rules',
    what: "NetworkPolicy: a pod's signature names its isolating policies but not its rules (a rule's new peers or ports leave the pod as it was)",
    edits: [['src/policy/pod-signature.js', '[d.policies, d.rules.map(ruleHash)]', '[d.policies]']],
    tests: ['test/datapath/nft-policy-backend-diff.test.js'],
  },
  {
    id: 'pod-cache-stale-address-kept',
    what: "Pod cache: an object without an attachment here keeps an address this node's attachment holds now (a stale status: two pods claim one address)",
    edits: [
      ['src/cluster/kube-pod-cache.js', 'if (!cached.pod.ips.some((ip) => held.has(ip)))', 'if (true)'],
    ],
    tests: ['test/kube/pod-cache.test.js'],
  },
  {
    id: 'ovs-policy-conj-first-pod-only',
    what: "NetworkPolicy, OVS: a rule entry's shared conjunction takes only the first pod's address as clause 1 (the rule's other pods are denied what it allows)",
    edits: [
      [
        'src/datapath/ovs/policy-flows.js',
        'if (!conj.members.has(match)) {',
        'if (conj.members.size === 0) {',
      ],
    ],
    tests: ['test/datapath/ovs/policy-flows.test.js'],
  },
  {
    id: 'ovs-policy-counting-flow-shared',
    what: "NetworkPolicy, OVS: the flow after a shared conjunction matches conj_id alone (one flow for all the rule's pods: every pod's packets counted for the first)",
    // The placeholders are the compiled code's own, not this file's: written apart.
    edits: [
      ['src/datapath/ovs/policy-flows.js', '`conj_id=$' + '{id},$' + '{member}`', '`conj_id=$' + '{id}`'],
    ],
    tests: ['test/datapath/ovs/policy-flows.test.js'],
  },
  {
    id: 'nft-policy-owners-stale',
    what: "NetworkPolicy, Linux bridge: an element that stays when its pod's policy changes keeps the rule it counted for before (counters and metrics name a rule that is gone)",
    edits: [
      [
        'src/datapath/linux-bridge/nft-policy-backend.js',
        'this.#owners.get(e.set)?.set(e.id, e.owner);\n',
        ';\n',
      ],
    ],
    tests: ['test/datapath/nft-policy-backend-diff.test.js'],
  },
  {
    id: 'ovs-policy-conj-key-has-peers',
    what: "NetworkPolicy, OVS: a rule's conjunction is keyed by its peers too (a pod joining its peers gives it a new id: its counting flows rewritten, counters back to 0)",
    edits: [['src/datapath/ovs/policy-flows.js', "ports ? contentHash(ports) : 'any'", 'contentHash(entry)']],
    tests: ['test/datapath/ovs/policy-flows.test.js'],
  },
  {
    id: 'ovs-policy-conj-ignores-peers',
    what: "NetworkPolicy, OVS: a pod whose peers differ under the same rule id joins the first pod's conjunction (and its peers)",
    edits: [['src/datapath/ovs/policy-flows.js', 'first.peersKey === c.peersKey ? c.base', 'true ? c.base']],
    tests: ['test/datapath/ovs/policy-flows.test.js'],
  },
  {
    id: 'pod-cache-stale-holder-not-told',
    what: "Pod cache: an ADD that takes an address from an unattached object's status changes that pod's view without telling its subscribers",
    edits: [
      [
        'src/cluster/kube-pod-cache.js',
        "set.add(a);\n        this.#emit({ kind: 'pod', key, pod: this.#view(key) });\n        this.#emitHolders(a.ips, key);",
        "set.add(a);\n        this.#emit({ kind: 'pod', key, pod: this.#view(key) });",
      ],
    ],
    tests: ['test/kube/pod-cache.test.js'],
  },
  {
    id: 'incremental-namespace-change-ignored',
    what: 'Incremental policy compile: a namespace whose labels changed touches no rule with a namespaceSelector',
    edits: [
      ['src/policy/incremental-compile.js', 'if (nsSelector !== null && namespacesChanged)', 'if (false)'],
    ],
    tests: ['test/policy/incremental-compile.test.js'],
  },
  {
    id: 'incremental-block-named-ignored',
    what: 'Incremental policy compile: a pod that moved into an ipBlock does not touch the egress rules with named ports towards it',
    edits: [
      [
        'src/policy/incremental-compile.js',
        'addressing.some((p) => p.ips.some((ip) => inBlock(peer.ipBlock, ip)))',
        'false',
      ],
    ],
    tests: ['test/policy/incremental-compile.test.js'],
  },
  {
    id: 'incremental-peerness-ignored',
    what: 'Incremental policy compile: a pod that stops being a peer (same addresses and ports) is not an addressing change',
    edits: [['src/policy/incremental-compile.js', 'isPeer(before) !== isPeer(after) ||', '']],
    tests: ['test/policy/incremental-compile.test.js'],
  },
  {
    id: 'incremental-policy-namespace-kept',
    what: "Incremental policy compile: a pod whose namespace's policies changed keeps its previous output",
    edits: [['src/policy/incremental-compile.js', '!policyNamespaces.has(pod.namespace) &&', '']],
    tests: ['test/policy/incremental-compile.test.js'],
  },
  {
    id: 'incremental-shared-address-kept',
    what: 'Incremental policy compile: a changed pod that shares an address with another does not fall back to a whole compile',
    edits: [['src/policy/incremental-compile.js', 'if (versions.some(shared))', 'if (false)']],
    tests: ['test/policy/incremental-compile.test.js'],
  },
  {
    id: 'incremental-selector-ignored',
    what: 'Incremental policy compile: a changed pod touches no rule whose pod selector matches it',
    edits: [
      ['src/policy/incremental-compile.js', 'if (selectorMatches(peer.podSelector, v.labels))', 'if (false)'],
    ],
    tests: ['test/policy/incremental-compile.test.js'],
  },
  {
    id: 'ovs-policy-replay-keeps-memory',
    what: 'OVS policy: after a replay of the whole table the next apply still diffs against its memory, not the switch',
    edits: [
      [
        'src/datapath/ovs/policy-ovs-backend.js',
        '    flowsInForce() {\n        // The caller replaces the whole table: what it holds next is read again, not assumed.\n        this.#trusted = false;',
        '    flowsInForce() {',
      ],
    ],
    tests: ['test/datapath/ovs/policy.test.js'],
  },
  {
    id: 'ovs-policy-recheck-never-due',
    what: "OVS policy: the switch's policy flows are never read again once the backend has installed them",
    edits: [
      [
        'src/datapath/ovs/policy-ovs-backend.js',
        'if (!this.#trusted || now - this.#readAt >= this.#recheckMs) {',
        'if (!this.#trusted) {',
      ],
    ],
    tests: ['test/datapath/ovs/policy.test.js'],
  },
  {
    id: 'ovs-policy-always-dumps',
    what: 'OVS policy: every apply dumps the switch (the seconds per change at 1000 x 1000 come back)',
    edits: [
      [
        'src/datapath/ovs/policy-ovs-backend.js',
        'if (!this.#trusted || now - this.#readAt >= this.#recheckMs) {',
        'if (true) {',
      ],
    ],
    tests: ['test/datapath/ovs/policy.test.js'],
  },
  {
    id: 'nft-batch-async-blocks',
    what: "nf_tables: batchAsync's sendto on the event loop's thread (an agent frozen for the kernel's whole commit)",
    edits: [
      [
        'src/kernel/netlink/nfnetlink-socket.js',
        'const sent = await this.#worker.sendto(fd, datagram, this.#kernel);',
        'const sent = libc.sendto(fd, datagram, 0, this.#kernel);',
      ],
    ],
    tests: ['test/kernel/netlink/nf-tables-async.test.js'],
  },
  {
    id: 'nft-policy-counters-not-queued',
    what: "Linux bridge policy: counters read the sets while an apply's batch is in flight on the same socket",
    edits: [
      [
        'src/datapath/linux-bridge/nft-policy-backend.js',
        'return this.#exclusive(async () => this.#counters());',
        'return (async () => this.#counters())();',
      ],
    ],
    tests: ['test/datapath/nft-policy-backend-diff.test.js'],
  },
  {
    id: 'ovs-kernel-hop-no-forward',
    what: "OVS kernel datapath: a pod port's checksum-hop chain gets no rule (its frames skip the IFB)",
    edits: [
      [
        'src/datapath/ovs/netdev-ingress-hop.js',
        '`add rule netdev $' + '{HOP_TABLE} $' + '{chain} fwd to $' + '{JSON.stringify(this.#ifb)}`,',
        '',
      ],
    ],
    tests: ['test/datapath/ovs/netdev-ingress-hop.test.js'],
  },
  {
    id: 'ovs-kernel-hop-check-ignores-rules',
    what: 'OVS kernel datapath: CHECK passes a pod port whose checksum-hop chain lost its forward',
    edits: [
      [
        'src/datapath/ovs/netdev-ingress-hop.js',
        ': chain.rules.length !== 1 || chain.rules[0] !== fwd',
        ': false',
      ],
    ],
    tests: ['test/datapath/ovs/netdev-ingress-hop.test.js'],
  },
  {
    id: 'ovs-kernel-hop-not-attached',
    what: 'OVS kernel datapath: ADD does not put the pod port behind the checksum hop (its frames skip the IFB; CHECK passes it)',
    edits: [['src/datapath/ovs/ovs-datapath.js', 'await this.#hop?.redirect(port.hostIfname);', '']],
    tests: [],
    commands: [VM_OVS_LIFECYCLE],
  },
  {
    id: 'flow-builder-member-kept',
    what: 'OVS flow builder: a pod that leaves a conjunction keeps its address in clause 1',
    edits: [
      [
        'src/datapath/ovs/policy-flow-builder.js',
        'this.#drop(conj.table, match, `conjunction($' + '{conj.id},1/$' + '{conj.n})`);',
        '',
      ],
    ],
    tests: ['test/datapath/ovs/policy-flow-builder.test.js'],
  },
  {
    id: 'flow-builder-orphans-kept',
    what: 'OVS flow builder: a conjunction without members keeps its peer and port clauses',
    edits: [
      [
        'src/datapath/ovs/policy-flow-builder.js',
        'if (conj === undefined || conj.members.size > 0)\n                continue;',
        'continue;',
      ],
    ],
    tests: ['test/datapath/ovs/policy-flow-builder.test.js'],
  },
  {
    id: 'flow-builder-clause-untracked',
    what: 'OVS flow builder: a clause flow that gains an action is not in the change',
    edits: [
      [
        'src/datapath/ovs/policy-flow-builder.js',
        '        const id = clauseId(table, match);\n        this.#touchClause(id);\n        let c',
        '        const id = clauseId(table, match);\n        let c',
      ],
    ],
    tests: ['test/datapath/ovs/policy-flow-builder.test.js'],
  },
  {
    id: 'flow-builder-held-peers-replaced',
    what: 'OVS flow builder: a rule entry with other peers while pods hold the old ones replaces them (not policyFlows order)',
    edits: [
      [
        'src/datapath/ovs/policy-flow-builder.js',
        'if (conj.members.size > 0)\n                    throw new NeedsWhole();',
        '',
      ],
    ],
    tests: ['test/datapath/ovs/policy-flow-builder.test.js'],
  },
  {
    id: 'flow-builder-never-withdraws',
    what: 'OVS flow builder: a changed pod keeps its old flows',
    edits: [['src/datapath/ovs/policy-flow-builder.js', 'if (next.get(key) !== share.policy)', 'if (false)']],
    tests: ['test/datapath/ovs/policy-flow-builder.test.js'],
  },
  {
    id: 'flow-builder-base-not-in-change',
    what: "OVS flow builder: the base flows' change (a new gateway port) is not sent",
    edits: [
      [
        'src/datapath/ovs/policy-flow-builder.js',
        'for (const f of this.#base)\n            if (!had.has(f))\n                add.push(f);',
        '',
      ],
    ],
    tests: ['test/datapath/ovs/policy-flow-builder.test.js'],
  },
];

function build() {
  rmSync(TREE, { recursive: true, force: true });
  mkdirSync(join(TREE, 'bin'), { recursive: true });
  const tsc = spawnSync(
    join(ROOT, 'node_modules/.bin/tsc'),
    ['-p', join(ROOT, 'tsconfig.json'), '--outDir', join(TREE, 'dist')],
    {
      stdio: 'inherit',
    },
  );
  if (tsc.status !== 0) throw new Error('tsc failed');
  // bin/podwire finds dist/ beside its own directory: a copy, not a link, so it runs the mutated tree.
  for (const f of ['podwire', 'podwire-cni']) copyFileSync(join(ROOT, 'bin', f), join(TREE, 'bin', f));
  spawnSync('chmod', ['+x', join(TREE, 'bin/podwire'), join(TREE, 'bin/podwire-cni')]);
  copyFileSync(join(ROOT, 'package.json'), join(TREE, 'package.json'));
  symlinkSync(join(ROOT, 'node_modules'), join(TREE, 'node_modules'));
  if (existsSync(join(ROOT, 'config')))
    cpSync(join(ROOT, 'config'), join(TREE, 'config'), { recursive: true });
  // deploy/: the manifests the deploy and e2e tests read (test/deploy/manifests.ts), and install-cni.mjs,
  // which a mutation edits.
  cpSync(join(ROOT, 'deploy'), join(TREE, 'deploy'), { recursive: true });
}

/** A command's program and arguments, as one line. */
function commandText(c) {
  return [c.cmd, ...(c.args ?? [])].join(' ');
}

/** Runs the test files, then each command (from the repository root); fails if any fails. */
async function runTests(tests, env, commands = []) {
  const r = await runFiles(tests, env);
  for (const c of commands) {
    const started = Date.now();
    const out = spawnSync(join(ROOT, c.cmd), c.args ?? [], {
      cwd: ROOT,
      env: { ...process.env, ...env, ...c.env },
      encoding: 'utf8',
      timeout: 15 * 60_000,
    });
    r.seconds += (Date.now() - started) / 1000;
    r.out += out.stdout + out.stderr;
    if (out.status !== 0) {
      r.code = r.code || 1;
      const last = (out.stdout + out.stderr).trim().split('\n').at(-1);
      r.failed.push(`${commandText(c)}: ${last}`);
    }
  }
  return r;
}

function runFiles(tests, env) {
  // A mutation judged by commands alone: `node --test` without files would run every test it finds.
  if (tests.length === 0) return Promise.resolve({ code: 0, failed: [], skipped: [], seconds: 0, out: '' });
  const files = tests.map((t) => join(TREE, 'dist', t));
  return new Promise((resolvePromise) => {
    const started = Date.now();
    const child = spawn(process.execPath, ['--test', '--test-concurrency=1', ...files], {
      cwd: TREE,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      out += d;
    });
    const timer = setTimeout(() => child.kill('SIGTERM'), FILE_TIMEOUT_MS * files.length);
    child.on('close', (code) => {
      clearTimeout(timer);
      // A todo test that fails is a known open gap (node:test does not fail the file for it).
      const failed = [...out.matchAll(/^\s*not ok \d+ - (.*)$/gm)]
        .map((m) => m[1])
        .filter((t) => !/ # TODO\b/.test(t));
      const skipped = [...out.matchAll(/^\s*ok \d+ - (.*) # SKIP(.*)$/gm)].map((m) => `${m[1]}:${m[2]}`);
      resolvePromise({ code, failed, skipped, seconds: (Date.now() - started) / 1000, out });
    });
  });
}

function apply(m) {
  const saved = [];
  for (const [file, find, replace] of m.edits) {
    const path = join(TREE, 'dist', file);
    const text = readFileSync(path, 'utf8');
    const count = text.split(find).length - 1;
    if (count !== 1) {
      // Newest first: two edits of one file saved it twice, and its first text is the original.
      for (const [p, t] of saved.reverse()) writeFileSync(p, t);
      throw new Error(`${m.id}: ${JSON.stringify(find)} occurs ${count} times in ${file}`);
    }
    saved.push([path, text]);
    writeFileSync(path, text.replace(find, replace));
  }
  return () => {
    for (const [p, t] of saved.reverse()) writeFileSync(p, t);
  };
}

async function main() {
  const args = process.argv.slice(2);
  const onlyAt = args.indexOf('--only');
  const only = onlyAt >= 0 ? new Set((args[onlyAt + 1] ?? '').split(',')) : undefined;
  const chosen = MUTATIONS.filter((m) => !only || only.has(m.id));
  if (args.includes('--list')) {
    for (const m of MUTATIONS)
      console.log(
        `${m.id.padEnd(28)} ${m.what}\n${''.padEnd(29)}tests: ${[...m.tests, ...(m.commands ?? []).map(commandText)].join(' ')}`,
      );
    return;
  }
  if (process.getuid?.() !== 0) throw new Error('run as root: the tests use network namespaces');
  const t0 = Date.now();
  build();
  // Baseline: every test file involved, unmutated, once per distinct environment.
  const groups = new Map();
  const commands = new Map();
  for (const m of chosen) {
    const key = JSON.stringify(m.env ?? {});
    groups.set(key, new Set([...(groups.get(key) ?? []), ...m.tests]));
    for (const c of m.commands ?? []) commands.set(commandText(c), c);
  }
  let first = true;
  for (const [env, tests] of groups) {
    const r = await runTests([...tests], JSON.parse(env), first ? [...commands.values()] : []);
    first = false;
    console.log(
      `baseline ${env === '{}' ? '' : `${env} `}(${r.seconds.toFixed(0)} s): ${r.code === 0 ? 'pass' : 'FAIL'}`,
    );
    for (const s of r.skipped) console.log(`  skipped: ${s}`);
    if (r.code !== 0) {
      console.log(r.out.slice(-4000));
      console.log(`baseline fails: ${r.failed.join('; ')}; no mutation run`);
      process.exitCode = 2;
      return;
    }
  }
  const rows = [];
  for (const m of chosen) {
    let undo;
    try {
      undo = apply(m);
    } catch (err) {
      rows.push({ m, verdict: 'NOT APPLIED', detail: err.message, seconds: 0 });
      console.log(`${m.id}: NOT APPLIED (${err.message})`);
      continue;
    }
    let r;
    try {
      r = await runTests(m.tests, m.env ?? {}, m.commands ?? []);
    } finally {
      undo();
    }
    const caught = r.code !== 0;
    const detail = caught ? r.failed.slice(0, 3).join('; ') : 'every test passed';
    rows.push({ m, verdict: caught ? 'caught' : 'SURVIVED', detail, seconds: r.seconds });
    console.log(`${m.id}: ${caught ? 'caught' : 'SURVIVED'} (${r.seconds.toFixed(0)} s) ${detail}`);
  }
  console.log('\nmutation                       result     by');
  for (const { m, verdict, detail } of rows)
    console.log(`${m.id.padEnd(30)} ${verdict.padEnd(10)} ${detail}`);
  const survivors = rows.filter((r) => r.verdict !== 'caught');
  console.log(
    `\n${rows.length} mutations, ${rows.length - survivors.length} caught, ${survivors.length} not caught; ${((Date.now() - t0) / 60000).toFixed(1)} min`,
  );
  if (survivors.length > 0) process.exitCode = 1;
}

await main();
