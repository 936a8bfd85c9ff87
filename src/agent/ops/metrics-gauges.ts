/** The agent's state as Prometheus samples, read at each scrape. */

import { VXLAN_GUARD_TABLE } from '../../datapath/overlay/vxlan-guard.js';
import { attachmentKey } from '../../ipam/store.js';
import { namedCounterPackets, nftIn } from '../../kernel/nft.js';
import type { Scheduler } from '../cni/scheduler.js';
import type { AgentContext } from '../context.js';
import { HOST_VETH_INPUT_TABLE } from '../startup/host-veth-input.js';
import type { Sampled } from './metrics.js';
import { openDescriptors } from './open-fds.js';

/** The node guards' counters: label, inet table, counter. */
const NODE_GUARDS: ReadonlyArray<[string, string, string]> = [
  ['host_veth_input', HOST_VETH_INPUT_TABLE, 'dropped'],
  ['vxlan_forged', VXLAN_GUARD_TABLE, 'forged'],
];

export function agentGauges(ctx: AgentContext, scheduler: Scheduler): Sampled[] {
  return [
    // First: the scrape reads every gauge at once, and later ones (the Linux bridge's guard counters)
    // run `nft`, whose pipes would otherwise be counted as the agent's.
    {
      name: 'podwire_open_fds',
      help: "The agent's open file descriptors.",
      type: 'gauge',
      read: () => [{ labels: {}, value: openDescriptors() }],
    },
    {
      name: 'podwire_cni_requests_in_flight',
      help: 'CNI calls being served or waiting for a slot.',
      type: 'gauge',
      read: () => [{ labels: {}, value: scheduler.inFlight }],
    },
    {
      name: 'podwire_pods',
      help: 'Attachments (container, interface) holding addresses on this node.',
      type: 'gauge',
      read: async () => {
        const owners = new Set((await ctx.ipam.list()).map(attachmentKey));
        return [{ labels: {}, value: owners.size }];
      },
    },
    {
      name: 'podwire_ipam_addresses_used',
      help: 'Addresses held in each pod CIDR.',
      type: 'gauge',
      read: () => ctx.ipam.usage().map((u) => ({ labels: { range: u.rangeId }, value: u.used })),
    },
    {
      name: 'podwire_ipam_addresses_size',
      help: 'Addresses pods can receive in each pod CIDR.',
      type: 'gauge',
      read: () => ctx.ipam.usage().map((u) => ({ labels: { range: u.rangeId }, value: u.size })),
    },
    {
      name: 'podwire_ipam_unreadable_claims',
      help: 'Claims the IPAM store holds but cannot read (torn or foreign files), by range: taken, owner unknown, never released automatically.',
      type: 'gauge',
      read: async () => {
        await ctx.ipam.list(); // refreshes what the stores cannot read
        const byRange = new Map<string, number>();
        for (const c of ctx.ipam.unreadable()) byRange.set(c.rangeId, (byRange.get(c.rangeId) ?? 0) + 1);
        // Every node range, 0 included, so an alert sees the series before anything goes wrong.
        for (const u of ctx.ipam.usage()) if (!byRange.has(u.rangeId)) byRange.set(u.rangeId, 0);
        return [...byRange].map(([range, value]) => ({ labels: { range }, value }));
      },
    },
    {
      name: 'podwire_gratuitous_announcements_sent_total',
      help: 'Gratuitous ARPs and unsolicited neighbour advertisements sent for pods.',
      type: 'counter',
      read: () => [{ labels: {}, value: ctx.announcer.framesSent }],
    },
    {
      name: 'podwire_datapath_dropped_packets_total',
      help: "Packets the datapath's guards dropped, by guard (both: CLASSIFIER, ARP_SPOOF_GUARD, ND_GUARD, IP_SPOOF_GUARD, L2_FORWARDING; OVS: its other tables; Linux bridge: GATEWAY_ARP_GUARD).",
      type: 'counter',
      read: async () =>
        ((await ctx.datapath.dropCounters?.()) ?? []).map((d) => ({
          labels: { guard: d.guard },
          value: d.packets,
        })),
    },
    {
      name: 'podwire_policy_allowed_packets_total',
      help: 'NetworkPolicy (store kubernetes): packets each rule let through, by local pod and rule (NAMESPACE/POLICY/DIRECTION/INDEX), read from the datapath (OVS counts the packets that opened connections). A rule re-installed starts from 0.',
      type: 'counter',
      read: async () =>
        ((await ctx.policy?.counters()) ?? [])
          .filter((c) => !c.rule.endsWith('/deny'))
          .map((c) => ({ labels: { pod: c.pod, rule: c.rule }, value: c.packets })),
    },
    {
      name: 'podwire_policy_denied_packets_total',
      help: 'NetworkPolicy (store kubernetes): packets dropped because no rule allows them, by local pod and direction.',
      type: 'counter',
      read: async () =>
        ((await ctx.policy?.counters()) ?? [])
          .filter((c) => c.rule.endsWith('/deny'))
          .map((c) => ({
            labels: { pod: c.pod, direction: c.rule.split('/').at(-2) ?? '' },
            value: c.packets,
          })),
    },
    {
      name: 'podwire_policy_denied_log_packets_total',
      help: "NetworkPolicy, Linux bridge: denied packets the kernel's rate limit passed to the agent's deny log, by outcome (logged: a policy-denied line; suppressed: held back by the agent's own limit and counted in a later line).",
      type: 'counter',
      read: () => {
        const s = ctx.denyLog?.stats;
        if (!s) return [];
        return [
          { labels: { outcome: 'logged' }, value: s.lines },
          { labels: { outcome: 'suppressed' }, value: s.suppressed },
        ];
      },
    },
    {
      name: 'podwire_policy_denied_log_overruns_total',
      help: "NetworkPolicy, Linux bridge: times the kernel's queue of denied-packet log messages overflowed before the agent read it (messages lost).",
      type: 'counter',
      read: () => (ctx.denyLog ? [{ labels: {}, value: ctx.denyLog.stats.overruns }] : []),
    },
    {
      name: 'podwire_datapath_reconnects_total',
      help: 'Connections to the switch daemon made again after one was lost, by connection (OVS: openflow, ovsdb).',
      type: 'counter',
      read: () =>
        Object.entries(ctx.datapath.switchCounters?.().reconnects ?? {}).map(([connection, value]) => ({
          labels: { connection },
          value,
        })),
    },
    {
      name: 'podwire_datapath_replays_total',
      help: "Replays of the datapath's whole wanted state into a switch that came back (OVS).",
      type: 'counter',
      read: () => {
        const c = ctx.datapath.switchCounters?.();
        return c ? [{ labels: {}, value: c.replays }] : [];
      },
    },
    {
      name: 'podwire_datapath_replayed_flows_total',
      help: 'Flows those replays had to add, change or delete (0 when the switch kept its table).',
      type: 'counter',
      read: () => {
        const c = ctx.datapath.switchCounters?.();
        return c ? [{ labels: {}, value: c.replayedFlows }] : [];
      },
    },
    {
      name: 'podwire_node_guard_dropped_packets_total',
      help: "Packets the node's own guards dropped, by guard (host_veth_input: a packet that entered the node on a host veth itself, decision 31; vxlan_forged: VXLAN from a non-peer, or sent to a peer from here, decision 28); absent where a guard is not installed.",
      type: 'counter',
      read: async () => {
        const counters = await namedCounterPackets(nftIn()); // one `nft` for both
        const out = [];
        for (const [guard, table, counter] of NODE_GUARDS) {
          const value = counters.get(`inet ${table} ${counter}`);
          if (value !== undefined) out.push({ labels: { guard }, value });
        }
        return out;
      },
    },
    {
      name: 'podwire_egress_masqueraded_packets_total',
      help: "Packets from this node's pods that left with the node's address (egress masquerade), by family.",
      type: 'counter',
      read: async () =>
        ((await ctx.egress?.counters()) ?? []).map((c) => ({
          labels: { family: c.family },
          value: c.packets,
        })),
    },
    {
      name: 'podwire_egress_masqueraded_bytes_total',
      help: "Bytes of the packets from this node's pods that left with the node's address, by family.",
      type: 'counter',
      read: async () =>
        ((await ctx.egress?.counters()) ?? []).map((c) => ({ labels: { family: c.family }, value: c.bytes })),
    },
    {
      name: 'podwire_egress_masqueraded_connections_total',
      help: "Connections from this node's pods masqueraded with the node's address, by family.",
      type: 'counter',
      read: async () =>
        ((await ctx.egress?.counters()) ?? []).map((c) => ({
          labels: { family: c.family },
          value: c.connections,
        })),
    },
    {
      name: 'podwire_egress_masquerade_repairs_total',
      help: 'Times the egress masquerade table was found missing or different (an outside nft flush) and put back; absent when the masquerade is off.',
      type: 'counter',
      read: () => (ctx.egress ? [{ labels: {}, value: ctx.egress.repairs }] : []),
    },
    {
      name: 'podwire_cluster_store_healthy',
      help: '1 when the cluster store answers, 0 when not; absent on a single node.',
      type: 'gauge',
      read: () => (ctx.cluster ? [{ labels: {}, value: ctx.cluster.status().health.ok ? 1 : 0 }] : []),
    },
    {
      name: 'podwire_peer_records_refused_total',
      help: 'Peer node records refused before they became routes (CIDR outside clusterCIDRs, overlapping another node, covering an underlay address; VTEP MAC used by another node or not unicast); absent on a single node.',
      type: 'counter',
      read: () => (ctx.cluster ? [{ labels: {}, value: ctx.cluster.refusedTotal }] : []),
    },
    {
      name: 'podwire_cluster_invalid_records_total',
      help: 'Node records the cluster store holds that are not valid and were skipped, each version once (store: kubernetes: a Node whose podwire.io/node annotation, pod CIDRs or InternalIP is malformed or missing; with pools: true, an IPPool the decoder refuses, e.g. a range whose start is after its end); absent on a single node.',
      type: 'counter',
      read: () => (ctx.cluster ? [{ labels: {}, value: ctx.cluster.invalidRecordsTotal }] : []),
    },
  ];
}
