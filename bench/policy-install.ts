/**
 * NetworkPolicy at issue 28's scale on each datapath's policy backend (decisions 45, 46): the world of
 * bench/policy-input.ts (by default 1000 pods on the node and 1000 policies) compiled and installed
 * from nothing, then one pod's label changed and changed back, `--changes` times, each compiled and
 * applied as the agent's policy controller does (its incremental compiler, then `apply`, which
 * installs the difference). Figures: milliseconds per step (compile, apply) and what the datapath
 * holds (nftables elements; OpenFlow flows), beside the issue's budgets in the same output as ratios:
 * a full compile and install within 1 s, one change within 50 ms. On OVS every other pair of changes
 * is applied after a read of the switch (as after a replay; before decision 54 every apply read it),
 * the reference for the apply's ratio.
 *
 * Each datapath in a throwaway namespace: the Linux bridge's policy table in an empty node namespace
 * (the elements do not need the pods to exist); OVS's flows on a private ovs-vswitchd (userspace
 * datapath) with the agent's pipeline, the datapath's cache purged after each change as the agent does.
 *
 *   node dist/bench/policy-install.js [--pods 1000] [--policies 1000] [--changes 10]
 *                                     [--datapath linux-bridge|ovs|both]
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { NamespaceSet, netnsPath } from '../bed/namespaces.js';
import { TestNode } from '../bed/node.js';
import { NftPolicyBackend } from '../src/datapath/linux-bridge/nft-policy-backend.js';
import { policyElements } from '../src/datapath/linux-bridge/policy-elements.js';
import { FlowTable } from '../src/datapath/ovs/openflow/flow-table.js';
import { defaultOpenflowTarget } from '../src/datapath/ovs/ovs-datapath.js';
import { ConjunctionIds, policyFlows } from '../src/datapath/ovs/policy-flows.js';
import { OvsPolicyBackend } from '../src/datapath/ovs/policy-ovs-backend.js';
import { purgeDatapathCache } from '../src/datapath/ovs/unixctl.js';
import type { PolicyBackend } from '../src/datapath/policy-backend.js';
import { NfTables } from '../src/kernel/netlink/nf-tables.js';
import { inNetns, NetnsHandle } from '../src/kernel/netns.js';
import { nftIn } from '../src/kernel/nft.js';
import type { CompileInput, compilePolicies } from '../src/policy/compile.js';
import { IncrementalCompiler } from '../src/policy/incremental-compile.js';
import type { Pod } from '../src/policy/model.js';
import { policyInput, relabel } from './policy-input.js';
import { ratio, type Stats, summarize } from './stats.js';

const { values } = parseArgs({
  options: {
    pods: { type: 'string' },
    policies: { type: 'string' },
    changes: { type: 'string' },
    datapath: { type: 'string' },
  },
});
const PODS = Number(values.pods ?? 1000);
const POLICIES = Number(values.policies ?? 1000);
const CHANGES = Number(values.changes ?? 10);
const DATAPATHS =
  values.datapath === undefined || values.datapath === 'both' ? ['linux-bridge', 'ovs'] : [values.datapath];
const FULL_BUDGET_MS = 1000;
const CHANGE_BUDGET_MS = 50;

interface Bed {
  backend: PolicyBackend;
  /** Makes the next apply read the datapath and diff against it (OVS: as after a replay). */
  forceRead?: () => void;
  /** What the datapath holds for `compiled`: nftables elements or OpenFlow flows. */
  size: (compiled: ReturnType<typeof compilePolicies>) => number;
  close: () => Promise<void>;
}

async function linuxBridgeBed(): Promise<Bed> {
  const namespaces = new NamespaceSet();
  // What is open so far, closed in reverse on every way out (a failed start included).
  const opened: Array<{ close(): void }> = [];
  const release = async () => {
    for (const h of opened.reverse()) h.close();
    await namespaces.cleanup();
  };
  try {
    const ns = await namespaces.add('policy-bench');
    const home = NetnsHandle.current();
    opened.push(home);
    const node = NetnsHandle.open(netnsPath(ns));
    opened.push(node);
    const nf = inNetns(node, home, () => NfTables.open());
    opened.push(nf);
    const backend = new NftPolicyBackend(nftIn(ns), nf);
    await backend.start();
    return {
      backend,
      size: (compiled) => policyElements(compiled).length,
      close: async () => {
        await backend.remove().catch(() => undefined);
        await release();
      },
    };
  } catch (err) {
    await release();
    throw err;
  }
}

async function ovsBed(): Promise<Bed> {
  const node = new TestNode({ datapath: 'ovs', podCIDRs: ['10.244.60.0/24'] });
  try {
    await node.setup();
    const ovs = node.ovs;
    if (!ovs) throw new Error('the OVS node has no ovs-vswitchd');
    const ofport = Number((await ovs.vsctl('get', 'Interface', 'podwire-gw0', 'ofport')).trim());
    const flows = new FlowTable(defaultOpenflowTarget(ovs.ovsdb, node.options.bridge));
    await flows.waitUp(5000);
    const policyNode = { gatewayOfport: ofport, nodeIps: ['10.244.60.1'] };
    const backend = new OvsPolicyBackend(flows, policyNode, {
      flushCache: () => purgeDatapathCache({ socket: join(ovs.dir, 'ovs-vswitchd.ctl'), runDir: ovs.dir }),
    });
    await backend.start();
    return {
      backend,
      forceRead: () => backend.flowsInForce(),
      size: (compiled) => policyFlows(policyNode, compiled, new ConjunctionIds()).flows.length,
      close: async () => {
        await backend.remove().catch(() => undefined);
        await flows.close();
        await node.cleanup();
      },
    };
  } catch (err) {
    await node.cleanup();
    throw err;
  }
}

function elapsed(t0: bigint): number {
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

/** Compile then apply, as the policy controller's loop does; the two steps' milliseconds. */
async function step(
  bed: Bed,
  compiler: IncrementalCompiler,
  input: CompileInput,
): Promise<{ compile: number; apply: number; compiled: ReturnType<typeof compilePolicies> }> {
  const t0 = process.hrtime.bigint();
  const compiled = compiler.compile(input);
  const compile = elapsed(t0);
  const t1 = process.hrtime.bigint();
  await bed.backend.apply(compiled);
  return { compile, apply: elapsed(t1), compiled };
}

async function measure(datapath: string): Promise<object> {
  const bed = datapath === 'ovs' ? await ovsBed() : await linuxBridgeBed();
  try {
    const world = policyInput(PODS, POLICIES);
    const compiler = new IncrementalCompiler();
    const full = await step(bed, compiler, world);
    const size = bed.size(full.compiled);
    const compile: number[] = [];
    const apply: number[] = [];
    const total: number[] = [];
    /** OVS: the same changes applied after a read of the switch (the reference: every apply did that before decision 54). */
    const readApply: number[] = [];
    let input = world;
    for (let i = 0; i < CHANGES * (bed.forceRead ? 2 : 1); i++) {
      // Pod 0 moves to another app and back: each change re-selects its policies and peers.
      const original = (world.pods[0] as Pod).labels?.app ?? 'app0';
      input = relabel(input, 0, i % 2 === 0 ? `${original}-moved` : original);
      // Every other pair of changes on OVS: the reference, alternating so both see the same machine.
      if (bed.forceRead && i % 4 >= 2) {
        bed.forceRead();
        const s = await step(bed, compiler, input);
        readApply.push(s.apply);
        continue;
      }
      const s = await step(bed, compiler, input);
      compile.push(s.compile);
      if (process.env.PODWIRE_BENCH_TRACE)
        console.error(`change ${i}: compile ${s.compile.toFixed(1)} ms, apply ${s.apply.toFixed(1)} ms`);
      apply.push(s.apply);
      total.push(s.compile + s.apply);
    }
    const change: Stats = summarize(total);
    return {
      datapath,
      pods: PODS,
      policies: POLICIES,
      datapathHolds: datapath === 'ovs' ? { flows: size } : { elements: size },
      fullMs: { compile: full.compile, apply: full.apply, total: full.compile + full.apply },
      fullRatioToBudget1s: ratio(full.compile + full.apply, FULL_BUDGET_MS),
      changeMs: { compile: summarize(compile), apply: summarize(apply), total: change },
      changeRatioToBudget50ms: {
        median: ratio(change.median, CHANGE_BUDGET_MS),
        p99: ratio(change.p99, CHANGE_BUDGET_MS),
      },
      ...(readApply.length === 0
        ? {}
        : {
            applyAfterReadMs: summarize(readApply),
            applyRatioToAfterRead: ratio(summarize(apply).median, summarize(readApply).median),
          }),
    };
  } finally {
    await bed.close();
  }
}

const results: object[] = [];
for (const d of DATAPATHS) results.push(await measure(d));
console.log(JSON.stringify(results, null, 2));
