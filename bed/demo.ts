/**
 * `podwire demo`: a two-node cluster of network namespaces on this machine (static cluster file,
 * VXLAN between the nodes), an agent per node, pods created through the CNI relay, the connectivity
 * matrix (pods, and an underlay host that is not a node and has no route to the pods: egress
 * masquerade) and the ARP audit of the underlay. Everything is removed on exit or Ctrl-C, unless --keep.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { auditArp, type Identity } from '../src/arp/audit.js';
import { captureArp } from '../src/arp/capture.js';
import type { CliArgs } from '../src/cli/args.js';
import type { Command } from '../src/cli/commands.js';
import { table } from '../src/cli/table.js';
import { inNetns, NetnsHandle } from '../src/kernel/netns.js';
import { CaptureSocket } from '../src/kernel/packet-socket.js';
import { CLUSTER_V4, type ClusterMember, TestCluster } from './cluster.js';
import { ipJson } from './exec.js';
import { KubeProxy } from './kube-proxy.js';
import { netnsPath } from './namespaces.js';
import { resultIps } from './node.js';
import { pingFrom, TCP_PORT, TcpServers, tcpFrom } from './traffic.js';
import { UNDERLAY_BRIDGE, type UnderlayNode } from './underlay.js';

interface DemoPod {
  node: string;
  name: string;
  ns: string;
  ip: string;
}

async function linkOf(ns: string, ifname: string): Promise<{ mac: string; index: number }> {
  const [l] = await ipJson<Array<{ address: string; ifindex: number }>>(ns, ['link', 'show', ifname]);
  return { mac: l?.address ?? '', index: l?.ifindex ?? 0 };
}

async function addrOf(ns: string, ifname: string): Promise<string> {
  const [l] = await ipJson<Array<{ addr_info: Array<{ family: string; local: string; scope: string }> }>>(
    ns,
    ['addr', 'show', ifname],
  );
  return l?.addr_info.find((a) => a.family === 'inet' && a.scope === 'global')?.local ?? '';
}

/** Who owns which IPv4 address on the underlay and on the pod networks, for the audit. */
async function identities(
  cluster: TestCluster,
  pods: readonly DemoPod[],
  bridge: string,
  host: UnderlayNode,
): Promise<Identity[]> {
  const out: Identity[] = [
    { ip: host.ip, mac: (await linkOf(host.ns, host.uplink)).mac, owner: 'underlay host' },
  ];
  for (const m of cluster.members) {
    out.push({
      ip: m.underlay.ip,
      mac: (await linkOf(m.underlay.ns, m.underlay.uplink)).mac,
      owner: `${m.name} uplink`,
    });
    const gw = m.node.options.datapath === 'ovs' ? 'podwire-gw0' : bridge;
    out.push({
      ip: await addrOf(m.underlay.ns, gw),
      mac: (await linkOf(m.underlay.ns, gw)).mac,
      owner: `${m.name} gateway`,
    });
  }
  for (const p of pods) out.push({ ip: p.ip, mac: '', owner: `pod ${p.name}` });
  return out.filter((i) => i.mac !== '');
}

/** The demo Service's ClusterIP (in kube-proxy's usual service range). */
const SERVICE_IP = '10.96.0.10';

async function run(args: CliArgs, out: (s: string) => void): Promise<number> {
  const datapath = args.values.get('--datapath') ?? 'linux-bridge';
  if (datapath !== 'linux-bridge' && datapath !== 'ovs') {
    out(`podwire demo: --datapath must be linux-bridge or ovs\n`);
    return 2;
  }
  const keep = args.positional.includes('keep') || args.values.has('--keep');
  const cluster = new TestCluster({ nodes: 2, store: 'file', trafficMode: 'encap', datapath });
  const abort = new AbortController();
  let cleaned = false;
  const servers = new TcpServers();
  const proxies: KubeProxy[] = [];
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    out('removing everything ... ');
    await servers.stop();
    for (const kp of proxies) await kp.remove().catch(() => undefined);
    await cluster.cleanup();
    out('done\n');
  };
  const onSignal = () => {
    abort.abort();
    cleanup().then(
      () => process.exit(130),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    out(`[1/5] two nodes on an underlay bridge, ${datapath} datapath, VXLAN between them ... `);
    await cluster.setup();
    // A host on the underlay that is not a node (it stands for DNS, a registry, the internet): it has
    // no route to the pod CIDRs, so pods reach it only through the nodes' egress masquerade.
    const host = await cluster.underlay.addNode('host');
    out('ok\n');
    for (const m of cluster.members)
      out(`      ${m.name}: underlay ${m.underlay.ip}, namespace ${m.underlay.ns}\n`);
    out(`      host (not a node, no route to the pods): underlay ${host.ip}, namespace ${host.ns}\n`);

    out('[2/5] two pods per node through the CNI relay ... ');
    const pods: DemoPod[] = [];
    for (const m of cluster.members as ClusterMember[]) {
      for (let i = 0; i < 2; i++) {
        const ns = await m.node.addPod(`pod${i}`);
        const name = `${m.name}/pod-${i}`;
        const add = await m.node.cni({
          command: 'ADD',
          containerId: `demo-${m.name}-${i}`,
          netns: ns,
          env: { CNI_ARGS: `K8S_POD_NAMESPACE=demo;K8S_POD_NAME=${m.name}-pod-${i}` },
        });
        if (add.code !== 0) throw new Error(`ADD ${name}: ${add.stdout}`);
        pods.push({ node: m.name, name, ns, ip: resultIps(add)[0] as string });
      }
    }
    out('ok\n');
    out(
      table(
        ['POD', 'NODE', 'ADDRESS', 'NETNS'],
        pods.map((p) => [p.name, p.node, p.ip, p.ns]),
      ).replace(/^(?=.)/gm, '      '),
    );

    // A Service as kube-proxy (nftables mode) would install it on every node: ClusterIP SERVICE_IP,
    // TCP, backed by the first pod of each node, which runs an echo server.
    const backends = pods.filter((p) => p.name.endsWith('/pod-0'));
    await servers.start(backends.map((p) => p.ns));
    for (const m of cluster.members) {
      const kp = new KubeProxy(m.node.nodeNs, 'nftables', {
        clusterCIDR: CLUSTER_V4,
        nodeIPs: [m.underlay.ip],
      });
      proxies.push(kp);
      await kp.apply([
        {
          namespace: 'demo',
          name: 'echo',
          clusterIP: SERVICE_IP,
          protocol: 'TCP',
          port: TCP_PORT,
          endpoints: backends.map((p) => ({ ip: p.ip, port: TCP_PORT })),
        },
      ]);
    }
    out(
      `[3/5] connectivity matrix (ICMP; HOST: egress masquerade; SVC: TCP to the Service ${SERVICE_IP}), with an ARP capture on the underlay ... `,
    );
    const underlay = cluster.underlay.ns;
    using home = NetnsHandle.current();
    using ulNs = NetnsHandle.open(netnsPath(underlay));
    const bridgeIndex = (await linkOf(underlay, UNDERLAY_BRIDGE)).index;
    const frames = captureArp(
      bridgeIndex,
      4000,
      (i, t) => inNetns(ulNs, home, () => CaptureSocket.open(i, t)),
      abort.signal,
    );
    await sleep(1000); // peers' routes converge from the cluster file's watch
    const results = await Promise.all(
      pods.map((from) =>
        Promise.all([
          ...pods.map((to) => (from === to ? true : pingFrom(from.ns, to.ip, 2))),
          pingFrom(from.ns, host.ip, 2),
          tcpFrom(from.ns, [SERVICE_IP]).then((r) => r[SERVICE_IP] === true),
        ]),
      ),
    );
    out('ok\n');
    const short = (p: DemoPod) => p.name.replace('node-', 'n').replace('/pod-', 'p');
    out(
      table(
        ['FROM \\ TO', ...pods.map(short), 'HOST', 'SVC'],
        pods.map((from, i) => [
          short(from),
          ...(results[i] ?? []).map((okay, j) => (i === j ? '-' : okay ? 'ok' : 'FAIL')),
        ]),
      ).replace(/^(?=.)/gm, '      '),
    );

    out('[4/5] ARP audit of the underlay (who said which IP is at which MAC) ... ');
    const report = auditArp(await frames, await identities(cluster, pods, 'podwire0', host));
    out(`${report.frames} ARP frames\n`);
    out(
      table(
        ['SENDER IP', 'SENDER MAC', 'FRAMES', 'VERDICT', 'KNOWN AS'],
        report.rows.map((r) => [
          r.senderIp,
          r.senderMac,
          String(r.frames),
          r.verdict,
          r.expected?.owner ?? '-',
        ]),
      ).replace(/^(?=.)/gm, '      '),
    );
    out(
      report.violations.length === 0
        ? '      no identity leak on the underlay\n'
        : `      ${report.violations.length} VIOLATION(S)\n`,
    );

    const failed = results.flat().filter((x) => !x).length;
    out(
      `[5/5] ${failed === 0 ? 'every pod reaches every pod, the underlay host through egress masquerade, and the Service' : `${failed} pair(s) FAILED`}\n`,
    );
    if (keep) {
      const p = pods[0] as DemoPod;
      out(`\nleft running. Enter a pod:  ip netns exec ${p.ns} sh\n`);
      out(`  e.g.  ip netns exec ${p.ns} ping ${pods[pods.length - 1]?.ip}\n`);
      out(`        ip netns exec ${p.ns} ping ${host.ip}   (the underlay host: egress masquerade)\n`);
      out(`  agents: bin/podwire status --config ${cluster.members[0]?.node.configPath}\n`);
      out('Ctrl-C removes everything.\n');
      await new Promise<void>((resolve) => abort.signal.addEventListener('abort', () => resolve()));
      return 0;
    }
    await cleanup();
    return failed === 0 && report.violations.length === 0 ? 0 : 1;
  } catch (err) {
    out(`\nfailed: ${err instanceof Error ? err.message : String(err)}\n`);
    await cleanup();
    return 1;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

export const demoCommand: Command = {
  summary: 'a two-node cluster of namespaces on this machine, with pods, matrix and ARP audit',
  help: `usage: podwire demo [--datapath linux-bridge|ovs] [--keep]

Builds two "nodes" (network namespaces) on an underlay bridge with a static cluster file, starts an
agent in each, creates two pods per node through the CNI relay, prints the connectivity matrix (pod to
pod, and pod to an underlay host that is not a node: egress masquerade) and the ARP audit of the
underlay, and removes everything. Needs root.

options:
  --datapath D    linux-bridge (default) or ovs (a private Open vSwitch per node, userspace datapath)
  --keep          leave it running and print how to enter a pod; Ctrl-C removes everything
`,
  run,
};
