/**
 * NetworkPolicy enforced by the agent itself (decision 49), on each datapath: two real agents on
 * `cluster: {store: kubernetes}` against a real kube-apiserver; policies, pods and namespaces
 * written through the API as the kubelet and users would (no kubelet here: the test writes each Pod
 * object and its status.podIPs); probed by TCP and UDP between pods on one node and across nodes.
 *
 * - no policy: everything passes; a policy selecting the server: only its allowed peer, port and
 *   protocol, on the same node and from the other node; a namespaceSelector peer added: followed;
 * - fail closed: a pod ADDed before its Pod object is isolated in every direction its namespace has
 *   a policy for, and opened when the object comes;
 * - an agent restart keeps the policies in force (checked while it is down and after), and one
 *   while the API server is away enforces the snapshot of the last known state; on OVS a restarted
 *   ovs-vswitchd gets the policy flows back with the agent's replay;
 * - the policy deleted: everything passes again.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type ClusterMember, TestCluster } from '../../bed/cluster.js';
import type { KubeApiServer } from '../../bed/kube-api.js';
import { metricSample, scrapeMetrics } from '../../bed/metrics.js';
import { resultIps } from '../../bed/node.js';
import { controlSocketPath } from '../../src/agent/ops/control-server.js';
import { callAgent } from '../../src/cli/control-client.js';
import { type PolicyReport, renderPolicy } from '../../src/cli/policy-command.js';
import { FaultNode } from '../agent/fault/fault-node.js';
import { type Probe, ProbeServers, probeFrom, udpHeard, udpRush } from '../datapath/policy-probe.js';

const PORT = 8080;
const OTHER_PORT = 9090;
const METRICS_PORT = 19_752;

async function until(what: string, ms: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    assert.ok(Date.now() < deadline, `not within ${ms} ms: ${what}`);
    await sleep(200);
  }
}

interface PodHandle {
  ns: string;
  name: string;
  netns: string;
  ip: string;
  member: ClusterMember;
}

/** The suite on one datapath (a file per datapath: each fits mutate.mjs's limit per test run). */
export function policyThroughAgent(datapath: 'linux-bridge' | 'ovs'): void {
  describe(`NetworkPolicy through the agent on ${datapath} (store kubernetes, a real kube-apiserver)`, () => {
    // Agents with fault seams (fault-agent.js): the test holds one policy apply to widen the window.
    const cluster = new TestCluster({
      nodes: 2,
      store: 'kubernetes',
      datapath,
      nodeClass: FaultNode,
      agentConfig: { metricsAddress: `127.0.0.1:${METRICS_PORT}` },
    });
    const servers = new ProbeServers();
    before(() => cluster.setup());
    after(async () => {
      await servers.stop();
      await cluster.cleanup();
    });

    function kube(): KubeApiServer {
      assert.ok(cluster.kube);
      return cluster.kube;
    }

    async function podObject(p: PodHandle, labels: Record<string, string>): Promise<void> {
      await kube().apply({
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { namespace: p.ns, name: p.name, labels },
        spec: {
          nodeName: p.member.name,
          automountServiceAccountToken: false,
          containers: [{ name: 'c', image: 'pause', ports: [{ name: 'http', containerPort: PORT }] }],
        },
      });
      await kube().patchStatus(`/api/v1/namespaces/${p.ns}/pods/${p.name}`, {
        podIP: p.ip,
        podIPs: [{ ip: p.ip }],
      });
    }

    async function add(member: ClusterMember, ns: string, name: string, made?: string): Promise<PodHandle> {
      const netns = made ?? (await member.node.addPod(name));
      const r = await member.node.cni({
        command: 'ADD',
        containerId: name,
        netns,
        env: { CNI_ARGS: `K8S_POD_NAMESPACE=${ns};K8S_POD_NAME=${name}` },
      });
      assert.equal(r.code, 0, `ADD ${ns}/${name}: ${r.stdout}`);
      return { ns, name, netns, ip: resultIps(r)[0] as string, member };
    }

    /** Waits until the probes from `from` give `want`, or fails naming what they gave. */
    async function expectReach(
      from: PodHandle,
      probes: Probe[],
      want: boolean[],
      what: string,
    ): Promise<void> {
      let got: boolean[] = [];
      await until(`${what}: ${JSON.stringify(want)} (last ${JSON.stringify(got)})`, 15_000, async () => {
        got = await probeFrom(from.netns, probes);
        return JSON.stringify(got) === JSON.stringify(want);
      }).catch((err: Error) => {
        throw new Error(`${err.message}; last probes ${JSON.stringify(got)}`);
      });
    }

    test('policies from the API server, enforced on the same node and across nodes; fail closed; restart', {
      timeout: 300_000,
    }, async (t) => {
      const [a, b] = cluster.members as [ClusterMember, ClusterMember];
      await kube().apply(
        { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'web', labels: { team: 'web' } } },
        { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'other', labels: { team: 'other' } } },
        // (no controller manager here to make them)
        { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { namespace: 'web', name: 'default' } },
        { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { namespace: 'other', name: 'default' } },
      );
      // The server on node-0; an allowed client on node-1, a refused one beside the server, one in
      // another namespace on node-1.
      const srv = await add(a, 'web', 'srv');
      const cli = await add(b, 'web', 'cli');
      const bad = await add(a, 'web', 'bad');
      const far = await add(b, 'other', 'far');
      await podObject(srv, { app: 'srv' });
      await podObject(cli, { app: 'cli' });
      await podObject(bad, { app: 'bad' });
      await podObject(far, { app: 'cli' });
      await servers.start([srv.netns, far.netns], [PORT, OTHER_PORT]);
      const toSrv: Probe[] = [
        ['tcp', srv.ip, PORT],
        ['udp', srv.ip, PORT],
        ['tcp', srv.ip, OTHER_PORT],
      ];

      for (const c of [cli, bad, far])
        await expectReach(c, toSrv, [true, true, true], `no policy: ${c.name}`);

      await kube().apply({
        apiVersion: 'networking.k8s.io/v1',
        kind: 'NetworkPolicy',
        metadata: { namespace: 'web', name: 'srv-from-cli' },
        spec: {
          podSelector: { matchLabels: { app: 'srv' } },
          ingress: [{ from: [{ podSelector: { matchLabels: { app: 'cli' } } }], ports: [{ port: 'http' }] }],
        },
      });
      await expectReach(cli, toSrv, [true, false, false], 'cli (node-1): TCP to the named port only');
      await expectReach(bad, toSrv, [false, false, false], 'bad (same node): nothing');
      await expectReach(far, toSrv, [false, false, false], 'far (other namespace): nothing');
      // The server's replies pass; its own egress is not isolated.
      await expectReach(srv, [['tcp', far.ip, PORT]], [true], 'srv may still open connections');

      await kube().apply({
        apiVersion: 'networking.k8s.io/v1',
        kind: 'NetworkPolicy',
        metadata: { namespace: 'web', name: 'srv-from-other' },
        spec: {
          podSelector: { matchLabels: { app: 'srv' } },
          ingress: [
            {
              from: [{ namespaceSelector: { matchLabels: { team: 'other' } }, podSelector: {} }],
              ports: [{ port: PORT, protocol: 'UDP' }],
            },
          ],
        },
      });
      await expectReach(far, toSrv, [false, true, false], 'far: the union of both policies, UDP only');

      // What `podwire policy` shows: the isolating policies, and the datapath's counters per rule and
      // for what the isolation dropped (bad's probes).
      const report = (await callAgent(controlSocketPath(a.node.socket), 'policy')) as PolicyReport;
      t.diagnostic(renderPolicy(report, 'web/srv'));
      const srvPolicy = report.pods?.find((p) => p.name === 'srv');
      assert.deepEqual(srvPolicy?.ingress?.policies, ['web/srv-from-cli', 'web/srv-from-other']);
      assert.equal(srvPolicy?.egress, null, 'srv: egress not isolated');
      const packets = (rule: string) =>
        Number(report.counters?.find((c) => c.pod === 'web/srv' && c.rule === rule)?.packets ?? 0);
      assert.ok(packets('web/srv-from-cli/ingress/0') > 0, 'the rule that let cli in counted');
      assert.ok(packets('web/srv/ingress/deny') > 0, "bad's probes counted as denied");
      // bad's denied probes in the agent's log (decision 51; the Linux bridge's deny log, NFLOG):
      // naming srv, the direction, the addresses, the port and the isolating policies.
      if (datapath === 'linux-bridge') {
        const deniedLine = () =>
          a.node.logs
            .split('\n')
            .filter((l) => l.includes('"policy-denied"'))
            .map((l) => JSON.parse(l) as Record<string, unknown>)
            .find((l) => l.src === bad.ip && l.protocol === 'TCP');
        for (let i = 0; i < 50 && !deniedLine(); i++) await sleep(200);
        const line = deniedLine();
        assert.ok(line, `a policy-denied line for bad's TCP probe in:\n${a.node.logs.slice(-4000)}`);
        assert.equal(line.pod, 'web/srv');
        assert.equal(line.direction, 'ingress');
        assert.equal(line.dst, srv.ip);
        assert.equal(line.port, PORT);
        assert.ok(
          Array.isArray(line.policies) && line.policies.includes('web/srv-from-cli'),
          `isolating policies named: ${JSON.stringify(line)}`,
        );
        const logMetrics = await scrapeMetrics(a.underlay.ns, METRICS_PORT);
        assert.ok(
          (metricSample(logMetrics, 'podwire_policy_denied_log_packets_total{outcome="logged"}') ?? 0) > 0,
          'the logged lines in the metrics',
        );
      }
      // The same counters on the metrics port.
      const metrics = await scrapeMetrics(a.underlay.ns, METRICS_PORT);
      assert.ok(
        (metricSample(metrics, 'podwire_policy_denied_packets_total{pod="web/srv",direction="ingress"}') ??
          0) > 0,
        'denied packets in the metrics',
      );
      assert.ok(
        (metricSample(
          metrics,
          'podwire_policy_allowed_packets_total{pod="web/srv",rule="web/srv-from-cli/ingress/0"}',
        ) ?? 0) > 0,
        "the rule's packets in the metrics",
      );

      // Fail closed: a pod whose object has not come is isolated in every direction a policy of its
      // namespace has (web: ingress); the object comes with labels no policy selects: open.
      const late = await add(a, 'web', 'late');
      await servers.stop();
      await servers.start([srv.netns, far.netns, late.netns], [PORT, OTHER_PORT]);
      await expectReach(cli, [['tcp', late.ip, PORT]], [false], 'late, labels unknown: isolated');
      await podObject(late, { app: 'late' });
      await expectReach(cli, [['tcp', late.ip, PORT]], [true], 'late, its object in: not selected, open');

      // The fail-closed window: a pod sending as fast as it can from before its interface exists,
      // ADDed before its Pod object (which says its egress is denied): not one datagram arrives.
      await kube().apply({
        apiVersion: 'networking.k8s.io/v1',
        kind: 'NetworkPolicy',
        metadata: { namespace: 'web', name: 'locked-no-egress' },
        spec: { podSelector: { matchLabels: { role: 'locked' } }, policyTypes: ['Egress'] },
      });
      // The apply that brings the pod in is held for 2 s (a busy node's apply of thousands of rules
      // takes that long): the port must not forward meanwhile.
      const rushNetns = await a.node.addPod('rush');
      const rush = await udpRush(rushNetns, far.ip, PORT, 6, 'rush');
      const faults = a.node as FaultNode;
      faults.setFault({ id: 'rush', op: 'policy.apply', nth: 1, when: 'hold' });
      const adding = add(a, 'web', 'rush', rushNetns);
      await sleep(2000);
      faults.setFault(undefined);
      const rushPod = await adding;
      await podObject(rushPod, { role: 'locked' });
      const rushSent = await rush.sent;
      const rushHeard = await udpHeard(cli.netns, far.ip, PORT, 'rush');
      t.diagnostic(`${datapath}: fail-closed window: ${rushSent} datagrams sent, ${rushHeard} heard`);
      assert.ok(rushSent > 100, `the pod sent once its interface was up (${rushSent})`);
      assert.equal(rushHeard, 0, 'no datagram of the isolated pod arrived');

      // The agent of the server's node stopped and started, a denied sender on it while it starts:
      // the policies stay in force throughout.
      await a.node.stopAgent('SIGTERM');
      assert.deepEqual(
        await probeFrom(bad.netns, toSrv),
        [false, false, false],
        'agent down: still enforced',
      );
      // (the sender covers the whole start: the datapath's own start, reconcile, the first apply)
      const denied = await udpRush(bad.netns, srv.ip, PORT, 10, 'restart');
      await a.node.startAgent();
      assert.deepEqual(
        await probeFrom(bad.netns, toSrv),
        [false, false, false],
        'agent back: still enforced',
      );
      const deniedSent = await denied.sent;
      // (asked from far, whose UDP to that port the second policy allows)
      const deniedHeard = await udpHeard(far.netns, srv.ip, PORT, 'restart');
      t.diagnostic(
        `${datapath}: across the restart: ${deniedSent} denied datagrams sent, ${deniedHeard} heard`,
      );
      assert.equal(deniedHeard, 0, 'nothing denied arrived across the agent restart');
      await expectReach(cli, toSrv, [true, false, false], 'agent back: cli still allowed');

      // OVS: ovs-vswitchd killed and started again with an empty flow table; the agent's replay of
      // the switch's state brings the policy flows back with the rest.
      if (datapath === 'ovs') {
        const ovs = a.node.ovs;
        assert.ok(ovs);
        await ovs.killDaemon('ovs-vswitchd');
        await ovs.startDaemon('ovs-vswitchd');
        await expectReach(cli, toSrv, [true, false, false], 'switch restarted: cli allowed, nothing more');
        assert.deepEqual(
          await probeFrom(bad.netns, toSrv),
          [false, false, false],
          'switch restarted: bad refused',
        );
      }

      // OVS: ovs-vswitchd restarted while the agent is away (the switch comes back with an empty flow
      // table and forwards nothing), then the agent started with a denied sender rushing: its replay
      // of the switch's state must not forward anything unjudged before its first policy apply.
      if (datapath === 'ovs') {
        const ovs = a.node.ovs;
        assert.ok(ovs);
        await a.node.stopAgent('SIGTERM');
        await ovs.killDaemon('ovs-vswitchd');
        await ovs.startDaemon('ovs-vswitchd');
        const rushed = await udpRush(bad.netns, srv.ip, PORT, 10, 'switch');
        await a.node.startAgent();
        await expectReach(
          cli,
          toSrv,
          [true, false, false],
          'agent and switch back: cli allowed, nothing more',
        );
        const rushedSent = await rushed.sent;
        const rushedHeard = await udpHeard(far.netns, srv.ip, PORT, 'switch');
        t.diagnostic(
          `${datapath}: switch restarted while the agent was away: ${rushedSent} denied datagrams sent, ${rushedHeard} heard`,
        );
        assert.ok(rushedSent > 100, `bad sent throughout (${rushedSent})`);
        assert.equal(rushedHeard, 0, 'nothing denied arrived while the agent replayed the switch');
      }

      // The agent restarted while the API server is away: the snapshot of the last known state.
      await kube().stop();
      await a.node.stopAgent('SIGTERM');
      await a.node.startAgent();
      const during = (await callAgent(controlSocketPath(a.node.socket), 'policy')) as PolicyReport;
      assert.equal(during.mode, 'snapshot', 'started without the API server: the snapshot in force');
      assert.deepEqual(
        await probeFrom(bad.netns, toSrv),
        [false, false, false],
        'snapshot: bad still refused',
      );
      await expectReach(cli, toSrv, [true, false, false], 'snapshot: cli still allowed');
      await kube().restart();
      await until('the agent back on the live caches', 60_000, async () => {
        const r = (await callAgent(controlSocketPath(a.node.socket), 'policy')) as PolicyReport;
        return r.mode === 'live';
      });

      await kube().kubectlOk(['delete', 'networkpolicy', '-n', 'web', 'srv-from-cli', 'srv-from-other']);
      await expectReach(bad, toSrv, [true, true, true], 'policies deleted: open again');
      t.diagnostic(
        `${datapath}: pods ${[srv, cli, bad, far, late].map((p) => `${p.name}=${p.ip}`).join(' ')}`,
      );
    });
  });
}
