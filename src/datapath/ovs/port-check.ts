/**
 * CNI CHECK of one pod port on OVS: the host veth exists and is up, it is a port of the bridge with
 * podwire's record of the pod (port-record.ts) and an OpenFlow number, the switch holds exactly the
 * pod's flows (by cookie: none missing, none extra), and a pod of a VLAN keeps its no-flood mark.
 */
import { CheckFailedError, type PodwireError } from '../../base/errors.js';
import type { Prefix } from '../../base/ip.js';
import type { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import { formatFlow } from './openflow/flow-format.js';
import { diffFlowSets } from './openflow/flow-key.js';
import { parseFlowText } from './openflow/flow-parse.js';
import type { FlowTable } from './openflow/flow-table.js';
import { podCookie, podFlows } from './pipeline.js';
import { parsePodExternalIds, recordOnUnderlay } from './port-record.js';
import type { VswitchDb } from './vswitch-db.js';

function checkFailed(message: string): PodwireError {
  return new CheckFailedError(message);
}

/** Throws ERR_CHECK_FAILED naming the first thing that differs from what ADD left. */
export async function checkPodPort(
  on: { nl: Rtnetlink; vs: VswitchDb; flows: FlowTable; bridge: string; podCidrs: readonly Prefix[] },
  hostIfname: string,
): Promise<void> {
  const { nl, vs, flows, bridge } = on;
  const link = nl.linkByName(hostIfname);
  if (!link) throw checkFailed(`host veth ${hostIfname} does not exist`);
  const row = await vs.port(hostIfname);
  if (!row) throw checkFailed(`host veth ${hostIfname} is not a port of ${bridge}`);
  const rec = parsePodExternalIds(row.externalIds);
  if (!rec) throw checkFailed(`port ${hostIfname} of ${bridge} is not a podwire pod port`);
  if (row.ofport === undefined || row.ofport < 1) {
    throw checkFailed(`port ${hostIfname} has no OpenFlow port: ${row.error ?? 'not opened'}`);
  }
  if (!link.up) throw checkFailed(`host veth ${hostIfname} is down`);
  const cookie = podCookie(hostIfname);
  const want = podFlows({
    ofport: row.ofport,
    mac: rec.mac,
    ips: rec.ips,
    cookie,
    vlan: rec.vlan ?? 0,
    underlay: recordOnUnderlay(rec, on.podCidrs),
  }).map(parseFlowText);
  const { missing, unexpected } = diffFlowSets(want, await flows.dump(cookie));
  if (missing.length > 0 || unexpected.length > 0) {
    const list = (l: typeof want) => l.map(formatFlow).join('; ');
    throw checkFailed(
      `flows of ${hostIfname} differ: missing [${list(missing)}], unexpected [${list(unexpected)}]`,
    );
  }
  // A restarted ovs-vswitchd forgets no-flood (its own reload restores flows, not port settings):
  // the node's untagged floods would then reach this pod of a VLAN.
  if (rec.vlan && !(await flows.noFlood(hostIfname)))
    throw checkFailed(`port ${hostIfname} of VLAN ${rec.vlan} is not marked no-flood`);
}
