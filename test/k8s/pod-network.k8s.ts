/**
 * podwire on a real Kubernetes cluster (issue 26; bed/k8s/): two nodes, each with containerd, a
 * kubelet and kube-proxy, podwire installed from deploy/ as it is (the Kubernetes API as its cluster
 * store: no etcd of podwire's), driven through
 * kubectl and the API only. In order: pod addresses and pod traffic; Services through kube-proxy;
 * hostPort and bandwidth; pods kept through restarts; the DaemonSet away and back; a Node deleted
 * (the other node's route and FDB entries towards it go, read in its namespace through the bed);
 * then the teardown leaves nothing on the machine.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { KubeCluster } from '../../bed/k8s/kube-cluster.js';
import type { KubeNode } from '../../bed/k8s/kube-node.js';
import { applyDaemonSet, installPodwire, waitRollout } from '../../bed/k8s/podwire-install.js';
import {
  AGNHOST,
  apply,
  execPod,
  ipv4InCidr,
  netexecDeployment,
  type PodInfo,
  podGet,
  pods,
  UnderlayHost,
  waitDeployment,
  waitFor,
} from '../../bed/k8s/workloads.js';
import { type MachineState, machineState, processesNaming } from './leftovers.js';
import { podBasics } from './pod-basics.js';

let cluster: KubeCluster;
let host: UnderlayHost;
let before0: MachineState;

describe('podwire on a Kubernetes cluster', { timeout: 1_800_000 }, () => {
  before(async () => {
    before0 = machineState();
    cluster = new KubeCluster({ nodes: 2 });
    await cluster.setup();
    await installPodwire(cluster, { datapath: 'linux-bridge' });
    host = await new UnderlayHost(cluster).setup();
  });

  after(async () => {
    await host?.cleanup();
    await cluster?.cleanup();
  });

  // The default install: no etcd of podwire's. Each agent published itself on its own Node, the one
  // write its RBAC allows, and reads its peers from the other Nodes.
  test("every agent's cluster store is the Kubernetes API: its Node carries the podwire.io/node annotation", async () => {
    for (const a of await pods(cluster, 'app.kubernetes.io/name=podwire', 'kube-system')) {
      const cfg = await execPod(cluster, a.name, ['cat', '/etc/podwire/agent.yaml'], 'kube-system', 'agent');
      assert.equal(cfg.code, 0, cfg.stderr);
      assert.match(cfg.stdout, /^\s+store: kubernetes$/m, `${a.node}: ${cfg.stdout}`);
      assert.match(cfg.stdout, new RegExp(`^nodeName: ${a.node}$`, 'm'));
    }
    const secret = await cluster.kubectl(['-n', 'kube-system', 'get', 'secret', 'podwire-etcd']);
    assert.notEqual(secret.code, 0, 'no Secret podwire-etcd: the etcd-tls example is not installed');
    for (const n of cluster.nodes) {
      let published: { underlayIP?: string; vtepMac?: string } = {};
      await waitFor(async () => {
        const text = await cluster.kubectlOk([
          'get',
          'node',
          n.name,
          '-o',
          'jsonpath={.metadata.annotations.podwire\\.io/node}',
        ]);
        published = text.trim() === '' ? {} : (JSON.parse(text) as typeof published);
        return published.underlayIP !== undefined;
      });
      assert.equal(published.underlayIP, n.ip, n.name);
      assert.match(published.vtepMac ?? '', /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/, n.name);
    }
  });

  podBasics(() => ({ cluster, host }));

  describe('b. Services through kube-proxy', () => {
    let web: PodInfo[];
    let clusterIP: string;
    let nodePort: { tcp: number; udp: number };

    test('a ClusterIP Service and a NodePort Service (TCP and UDP) on the web pods', async () => {
      web = await pods(cluster, 'app=web');
      const ports = [
        { name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' },
        { name: 'udp', port: 90, targetPort: 8081, protocol: 'UDP' },
      ];
      await apply(cluster, [
        {
          apiVersion: 'v1',
          kind: 'Service',
          metadata: { name: 'web' },
          spec: { selector: { app: 'web' }, ports },
        },
        {
          apiVersion: 'v1',
          kind: 'Service',
          metadata: { name: 'web-np' },
          spec: { type: 'NodePort', selector: { app: 'web' }, ports },
        },
      ]);
      clusterIP = (
        await cluster.kubectlOk(['get', 'service', 'web', '-o', 'jsonpath={.spec.clusterIP}'])
      ).trim();
      const np = (
        await cluster.kubectlOk(['get', 'service', 'web-np', '-o', 'jsonpath={.spec.ports[*].nodePort}'])
      )
        .trim()
        .split(' ');
      nodePort = { tcp: Number(np[0]), udp: Number(np[1]) };
      assert.ok(ipv4InCidr(clusterIP, '10.96.0.0/16'), clusterIP);
    });

    /** Host names answering `loop` run in `pod`, over up to `rounds` runs, until every one of `want` answered. */
    async function answers(
      pod: string,
      loop: string,
      want: (seen: Set<string>) => boolean,
      rounds = 5,
    ): Promise<Set<string>> {
      const seen = new Set<string>();
      for (let round = 0; round < rounds && !want(seen); round++) {
        const r = await execPod(cluster, pod, ['sh', '-c', loop]);
        for (const l of r.stdout.split('\n')) if (l.trim() !== '') seen.add(l.trim());
      }
      return seen;
    }

    test('ClusterIP over TCP: backends on the same node, the other node, and the client itself (hairpin)', async () => {
      const from = web.find((p) => p.node === 'node-0') as PodInfo;
      // kube-proxy picks a backend at random: 40 requests per exec, until every pod has answered.
      const loop = `for i in $(seq 40); do curl -sS -m 3 http://${clusterIP}:80/hostname; echo; done`;
      const seen = await answers(from.name, loop, (s) => web.every((p) => s.has(p.name)));
      assert.ok(seen.has(from.name), `no hairpin answer from ${from.name} itself: ${[...seen]}`);
      assert.ok(
        web.some((p) => p.node === 'node-0' && p !== from && seen.has(p.name)),
        `no same-node backend: ${[...seen]}`,
      );
      assert.ok(
        web.some((p) => p.node === 'node-1' && seen.has(p.name)),
        `no other-node backend: ${[...seen]}`,
      );
    });

    test('ClusterIP over UDP', async () => {
      const from = web.find((p) => p.node === 'node-1') as PodInfo;
      const loop = `for i in $(seq 20); do echo hostname | nc -u -w 1 ${clusterIP} 90; echo; done`;
      const seen = await answers(from.name, loop, (s) => s.size >= 2, 3);
      const names = new Set(web.map((p) => p.name));
      assert.ok(seen.size >= 2 && [...seen].every((s) => names.has(s)), `UDP answers: ${[...seen]}`);
    });

    test('NodePort from a plain host on the underlay, TCP and UDP, on each node', async () => {
      const names = new Set(web.map((p) => p.name));
      for (const n of cluster.nodes) {
        const r = await host.curl(`http://${n.ip}:${nodePort.tcp}/hostname`);
        assert.equal(r.code, 0, `${n.name}: ${r.stderr}`);
        assert.ok(names.has(r.stdout.trim()), r.stdout);
        const u = await host.udp(n.ip, nodePort.udp, 'hostname');
        assert.ok(names.has(u), `${n.name} UDP: ${u}`);
      }
    });
  });

  describe("c. hostPort (portmap, chained) and the bandwidth annotations (podwire's bandwidth capability)", () => {
    test("a hostPort answers on its node's address from the underlay host", async () => {
      await apply(cluster, [netexecDeployment('hp', 1, { hostPort: 18080 })]);
      await waitDeployment(cluster, 'hp');
      const [p] = await pods(cluster, 'app=hp');
      const node = cluster.nodes.find((n) => n.name === p?.node);
      const r = await host.curl(`http://${node?.ip}:18080/hostname`);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout.trim(), p?.name);
      await cluster.kubectlOk(['delete', 'deployment', 'hp', '--wait=true']);
    });

    test("an ingress-bandwidth annotation: a TBF at that rate on the pod's host veth, and the rate holds past its burst", async (t) => {
      const rate = 1_000_000; // bits per second
      await apply(cluster, [
        netexecDeployment('bw', 1, { annotations: { 'kubernetes.io/ingress-bandwidth': '1M' } }),
        netexecDeployment('nobw', 1),
      ]);
      await waitDeployment(cluster, 'bw');
      await waitDeployment(cluster, 'nobw');
      const [bw] = (await pods(cluster, 'app=bw')) as [PodInfo];
      const [nobw] = (await pods(cluster, 'app=nobw')) as [PodInfo];
      // The runtime passed the annotation to podwire as the bandwidth capability (decision 42): a TBF
      // on a host veth of the pod's node (podwire's host veths are pw*), at 1 Mbit/s; the pod without
      // it has none.
      const node = cluster.nodes.find((n) => n.name === bw.node) as KubeNode;
      const q = await node.exec(['tc', '-j', 'qdisc', 'show']);
      const tbfs = (
        JSON.parse(q.stdout) as { kind: string; dev: string; options?: { rate?: number; burst?: number } }[]
      ).filter((x) => x.kind === 'tbf' && x.dev.startsWith('pw'));
      assert.equal(tbfs.length, 1, JSON.stringify(tbfs));
      const tbf = tbfs[0] as { options: { rate: number; burst: number } };
      assert.equal(tbf.options.rate * 8, rate, JSON.stringify(tbf));
      t.diagnostic(`tbf on ${bw.node}: rate ${tbf.options.rate} B/s, burst ${tbf.options.burst} B`);
      // Measured: an upload of the burst plus 1 MB to each pod, from a web pod of another node.
      const size = tbf.options.burst + 1_000_000;
      if (size > 64_000_000) {
        t.diagnostic(
          `burst ${tbf.options.burst} B: the runtime's burst is too large to measure the rate here`,
        );
        return;
      }
      const web = await pods(cluster, 'app=web');
      const upload = async (to: PodInfo) => {
        const from = web.find((p) => p.node !== to.node) as PodInfo;
        const cmd = `head -c ${size} /dev/zero | curl -sS -m 120 -o /dev/null -w '%{speed_upload}' -F file=@- http://${to.ip}:8080/upload`;
        const r = await execPod(cluster, from.name, ['sh', '-c', cmd]);
        assert.equal(r.code, 0, r.stderr);
        return Number(r.stdout.trim()) * 8;
      };
      const limited = await upload(bw);
      const free = await upload(nobw);
      t.diagnostic(`upload of ${size} B: ${limited} bit/s limited, ${free} bit/s unlimited`);
      assert.ok(limited < free / 2, `limited ${limited} bit/s, unlimited ${free} bit/s`);
      await cluster.kubectlOk(['delete', 'deployment', 'bw', 'nobw', '--wait=true']);
    });
  });

  describe('d. pod deletion, kubelet restart, DaemonSet rollout: pods keep their addresses', () => {
    /** Each web pod's name and address, and that each answers across nodes. */
    async function snapshot(): Promise<Map<string, string>> {
      return new Map((await pods(cluster, 'app=web')).map((p) => [p.name, p.ip]));
    }

    async function allAnswer(): Promise<void> {
      const web = await pods(cluster, 'app=web');
      const from0 = web.find((p) => p.node === 'node-0') as PodInfo;
      const from1 = web.find((p) => p.node === 'node-1') as PodInfo;
      for (const p of web) {
        assert.equal(
          await podGet(
            cluster,
            p.node === 'node-0' ? from1.name : from0.name,
            `http://${p.ip}:8080/hostname`,
          ),
          p.name,
        );
      }
    }

    /** Addresses in use on each node, from `podwire ipam` in that node's agent. */
    async function ipamUsed(): Promise<Map<string, number>> {
      const agents = await pods(cluster, 'app.kubernetes.io/name=podwire', 'kube-system');
      const out = new Map<string, number>();
      for (const a of agents) {
        const r = await execPod(cluster, a.name, ['podwire', 'ipam', '--json'], 'kube-system', 'agent');
        assert.equal(r.code, 0, r.stderr);
        const rows = JSON.parse(r.stdout) as { used: string }[];
        out.set(
          a.node,
          rows.reduce((n, row) => n + Number(row.used), 0),
        );
      }
      return out;
    }

    async function podsPerNode(): Promise<Map<string, number>> {
      const out = new Map<string, number>(cluster.nodes.map((n) => [n.name, 0]));
      for (const p of await pods(cluster, 'app', 'default')) out.set(p.node, (out.get(p.node) ?? 0) + 1);
      return out;
    }

    test('a deleted pod: the others keep address and connectivity; its address returns to the pool', async () => {
      const before = await snapshot();
      const victim = [...before.keys()][0] as string;
      await cluster.kubectlOk(['delete', 'pod', victim, '--wait=true']);
      await waitDeployment(cluster, 'web');
      const after = await snapshot();
      for (const [name, ip] of before) if (name !== victim) assert.equal(after.get(name), ip, name);
      await allAnswer();
      await waitFor(
        async () =>
          JSON.stringify([...(await ipamUsed())].sort()) ===
          JSON.stringify([...(await podsPerNode())].sort()),
      );
    });

    test('a kubelet restart: pods keep address and connectivity', async () => {
      const before = await snapshot();
      const node = cluster.nodes[0] as KubeNode;
      await node.restartKubelet();
      // Up again: its health endpoint answers in the node's namespace.
      await waitFor(
        async () => (await node.exec(['curl', '-s', 'http://127.0.0.1:10248/healthz'], 5000)).stdout === 'ok',
      );
      await waitFor(
        async () =>
          (
            await cluster.kubectl([
              'get',
              'node',
              'node-0',
              '-o',
              'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
            ])
          ).stdout === 'True',
      );
      await waitDeployment(cluster, 'web');
      assert.deepEqual(await snapshot(), before);
      await allAnswer();
    });

    test('kubectl rollout restart of the podwire DaemonSet: pods keep address and connectivity', async () => {
      const before = await snapshot();
      await cluster.kubectlOk(['-n', 'kube-system', 'rollout', 'restart', 'ds/podwire']);
      await waitRollout(cluster);
      assert.deepEqual(await snapshot(), before);
      await allAnswer();
      assert.deepEqual([...(await ipamUsed())].sort(), [...(await podsPerNode())].sort());
    });
  });

  describe('e. the podwire DaemonSet removed, then back', () => {
    test("a new pod fails with the runtime's CNI error while podwire is away, and starts once it is back", async () => {
      await cluster.kubectlOk(['-n', 'kube-system', 'delete', 'daemonset', 'podwire', '--wait=true']);
      await waitFor(
        async () => (await pods(cluster, 'app.kubernetes.io/name=podwire', 'kube-system')).length === 0,
      );
      await apply(cluster, [
        {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: 'late', labels: { app: 'late' } },
          spec: {
            terminationGracePeriodSeconds: 1,
            containers: [{ name: 'c', image: AGNHOST, args: ['pause'] }],
          },
        },
      ]);
      let message = '';
      await waitFor(async () => {
        const ev = await cluster.kubectlOk([
          'get',
          'events',
          '--field-selector',
          'involvedObject.name=late',
          '-o',
          'json',
        ]);
        const items = (JSON.parse(ev) as { items: { reason: string; message: string }[] }).items;
        message = items.find((e) => e.reason === 'FailedCreatePodSandBox')?.message ?? '';
        return message !== '';
      });
      assert.match(message, /podwire/);
      assert.equal((await pods(cluster, 'app=late')).length, 0);
      await applyDaemonSet(cluster);
      await waitRollout(cluster);
      await waitFor(async () => (await pods(cluster, 'app=late')).length === 1, 240_000);
      await cluster.kubectlOk(['delete', 'pod', 'late', '--wait=true']);
    });
  });

  // Last before the teardown: node-1 does not come back (its kubelet registers only at its start).
  describe('f. a Node deleted: the other node forgets its pods (the Kubernetes API as the cluster store)', () => {
    const VXLAN = 'podwire-vxlan';

    /** What node-0's kernel holds towards `peer`: routes to its pod CIDR, FDB entries to its address. */
    async function towards(peer: { ip: string; cidr: string }): Promise<{ routes: number; fdb: number }> {
      const n0 = cluster.nodes[0] as KubeNode;
      const r = await n0.exec(['ip', '-j', 'route', 'show', 'exact', peer.cidr]);
      assert.equal(r.code, 0, r.stderr);
      const f = await n0.exec(['bridge', '-j', 'fdb', 'show', 'dev', VXLAN]);
      assert.equal(f.code, 0, f.stderr);
      const routes = (JSON.parse(r.stdout || '[]') as { dev?: string }[]).filter((x) => x.dev === VXLAN);
      const fdb = (JSON.parse(f.stdout || '[]') as { dst?: string }[]).filter((x) => x.dst === peer.ip);
      return { routes: routes.length, fdb: fdb.length };
    }

    test('kubectl delete node node-1, its pods gone: node-0 removes the route to its pod CIDR and its FDB entries', async () => {
      const n1 = cluster.nodes[1] as KubeNode;
      const peer = {
        ip: n1.ip,
        cidr: (await cluster.kubectlOk(['get', 'node', n1.name, '-o', 'jsonpath={.spec.podCIDR}'])).trim(),
      };
      assert.ok(ipv4InCidr(peer.cidr.split('/')[0] as string, '10.244.0.0/16'), peer.cidr);
      // Before: the peer is programmed (so the check below can fail).
      const programmed = await towards(peer);
      assert.ok(programmed.routes === 1 && programmed.fdb >= 1, JSON.stringify(programmed));
      await cluster.kubectlOk(['delete', 'node', n1.name, '--wait=true']);
      // Its pods leave the API too (the pod GC would, later): what was scheduled there is gone.
      // biome-ignore format: flag/value pairs
      await cluster.kubectlOk([
        'delete', 'pods', '--all-namespaces', '--field-selector', `spec.nodeName=${n1.name}`,
        '--force', '--grace-period=0',
      ]);
      let last = { routes: -1, fdb: -1 };
      await waitFor(
        async () => {
          last = await towards(peer);
          return last.routes === 0 && last.fdb === 0;
        },
        120_000,
        `node-0 forgets ${n1.name} (${peer.cidr} via ${peer.ip})`,
      ).catch((err: Error) => {
        throw new Error(`${err.message}: ${JSON.stringify(last)}`);
      });
      // node-0's own pods still answer each other.
      const web = (await pods(cluster, 'app=web')).filter((p) => p.node === 'node-0');
      const [a, b] = web;
      if (a && b) assert.equal(await podGet(cluster, a.name, `http://${b.ip}:8080/hostname`), b.name);
    });
  });

  test('teardown leaves nothing: processes, mounts, cgroups, namespaces, kernel settings', async () => {
    const dir = cluster.dir;
    const cgroups = cluster.nodes.map((n) => n.cgroup.path.slice(1));
    await host.cleanup();
    await cluster.cleanup();
    const now = machineState();
    assert.deepEqual(processesNaming([dir, ...cgroups]), []);
    assert.deepEqual(
      now.netns.filter((n) => !before0.netns.includes(n) && n.startsWith(`pwt-${process.pid}-`)),
      [],
    );
    assert.deepEqual(
      now.cgroups.filter((c) => cgroups.some((g) => c.includes(g))),
      [],
    );
    assert.deepEqual(
      now.mounts.filter((m) => m.includes(dir)),
      [],
    );
    assert.deepEqual(now.sysctls, before0.sysctls);
  });
});
