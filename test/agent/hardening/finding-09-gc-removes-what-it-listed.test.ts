/**
 * Issue 15, finding 9: CNI GC judged the attachments it listed, then acted on whatever held their
 * names by the time it got there. Two cases, each with a GC whose IPAM listing is held (a store at the
 * seam that hands the listing back only when the test says) while the runtime's calls go on:
 *
 * - a claim listed as invalid whose attachment was deleted and added again meanwhile (a new claim,
 *   a new veth): GC released the new one, since the attachment "still held claims";
 * - a leftover veth (an interrupted DEL: no claim, the network's alias) listed for the sweep, deleted
 *   and added again meanwhile: GC deleted the new pod's veth by name.
 *
 * Both fail on the old code, and so does the same sweep race in reconcile while serving (`podwire gc`,
 * src/agent/cni/reconcile.ts, the third case). Depends on, in src/agent/cni/cmd-gc.ts: `claimsIdentity`
 * compared on the attachment's key before `cmdDel`; the second `ctx.ipam.list()` before the sweep and
 * the index check with `ctx.nl.deleteLinkAsync(link.index)` (src/kernel/netlink/rtnetlink.ts); in
 * reconcile.ts the same listing and index check. Each case also checks that a stale claim or a
 * leftover veth that nothing touched is still removed.
 *
 * Everything runs in this process against the real kernel, in a throwaway node namespace: the real
 * cmdGc and cmdDel, the Linux bridge datapath, the node-local allocator, the scheduler as the guard.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { NamespaceSet, netnsPath } from '../../../bed/namespaces.js';
import { cmdDel } from '../../../src/agent/cni/cmd-del.js';
import { cmdGc } from '../../../src/agent/cni/cmd-gc.js';
import { attachmentKey, hostVethAlias, hostVethName } from '../../../src/agent/cni/host-veth.js';
import { PodIpam } from '../../../src/agent/cni/pod-ipam.js';
import { reconcile } from '../../../src/agent/cni/reconcile.js';
import { Scheduler } from '../../../src/agent/cni/scheduler.js';
import type { AgentConfig } from '../../../src/agent/config.js';
import { DEFAULT_CONFIG } from '../../../src/agent/config.js';
import type { AgentContext } from '../../../src/agent/context.js';
import { silentLogger } from '../../../src/agent/log.js';
import { Announcer } from '../../../src/arp/announcer.js';
import { podMac } from '../../../src/base/pod-mac.js';
import { BridgeDatapath } from '../../../src/datapath/linux-bridge/bridge-datapath.js';
import { NodeLocalAllocator } from '../../../src/ipam/allocator.js';
import { MemoryStore } from '../../../src/ipam/memory-store.js';
import type { ClaimListing } from '../../../src/ipam/store.js';
import { NfTables } from '../../../src/kernel/netlink/nf-tables.js';
import { Rtnetlink } from '../../../src/kernel/netlink/rtnetlink.js';
import { inNetns, NetnsHandle } from '../../../src/kernel/netns.js';
import { nftIn } from '../../../src/kernel/nft.js';
import { writeSysctl } from '../../../src/kernel/sysctl.js';

const NETWORK = 'podwire-f9';
const CIDR = '10.244.91.0/24';

/** A MemoryStore whose next `list` hands its (already read) answer back only when the test releases it. */
class HeldListStore extends MemoryStore {
  #hold: { reached: () => void; gate: Promise<void> } | undefined;

  /** Arms the hold; resolves `reached` once a listing is being held, `release` lets it go. */
  holdNextList(): { reached: Promise<void>; release: () => void } {
    let reached!: () => void;
    let release!: () => void;
    const reachedP = new Promise<void>((r) => {
      reached = r;
    });
    const gate = new Promise<void>((r) => {
      release = r;
    });
    this.#hold = { reached, gate };
    return { reached: reachedP, release };
  }

  override async list(rangeId: string): Promise<ClaimListing> {
    const answer = await super.list(rangeId);
    const hold = this.#hold;
    if (hold) {
      this.#hold = undefined;
      hold.reached();
      await hold.gate;
    }
    return answer;
  }
}

describe('finding 9: GC removes only what it listed', () => {
  const spaces = new NamespaceSet();
  const store = new HeldListStore();
  const scheduler = new Scheduler(8);
  const guard = {
    serial: <T>(key: string, fn: () => Promise<T>) => scheduler.run(key, fn),
    busy: () => scheduler.activeKeys(),
  };
  let home: NetnsHandle;
  let node: NetnsHandle;
  let nl: Rtnetlink;
  let nf: NfTables;
  let dp: BridgeDatapath;
  let ctx: AgentContext;
  let peers = 0;

  /** ADD as far as GC can see it, on the attachment's key: claims, the aliased host veth, its port. */
  async function add(containerId: string): Promise<number> {
    const att = { containerId, ifname: 'eth0' };
    return scheduler.run(attachmentKey(containerId, 'eth0'), async () => {
      const allocs = await ctx.ipam.allocate(att, { network: NETWORK });
      const name = hostVethName(containerId, 'eth0');
      const peer = `f9peer${peers++}`;
      const link = nl.addVeth({ name, peerName: peer, mtu: 1500 });
      nl.setLinkAlias(link.index, hostVethAlias(NETWORK) ?? '');
      const peerLink = nl.linkByName(peer);
      assert.ok(peerLink);
      nl.setLinkUp(peerLink.index);
      const ips = allocs.map((a) => a.ip);
      await dp.attachPort({
        hostIfname: name,
        hostIfindex: link.index,
        containerId,
        ifname: 'eth0',
        podMac: podMac(ips),
        podIps: ips,
      });
      return link.index;
    });
  }

  /** The real DEL, on the attachment's key. */
  const del = (containerId: string) =>
    scheduler.run(attachmentKey(containerId, 'eth0'), () =>
      cmdDel(ctx, { containerId, ifname: 'eth0' }, NETWORK, silentLogger),
    );

  const vethIndex = (containerId: string) => nl.linkByName(hostVethName(containerId, 'eth0'))?.index;
  const claimsOf = (containerId: string) => ctx.ipam.owned({ containerId, ifname: 'eth0' }).map((a) => a.ip);

  before(async () => {
    const ns = await spaces.add('f9node');
    home = NetnsHandle.current();
    node = NetnsHandle.open(netnsPath(ns));
    nl = inNetns(node, home, () => Rtnetlink.open({ asyncSockets: 2 }));
    nf = inNetns(node, home, () => NfTables.open());
    dp = new BridgeDatapath({
      nl,
      nf,
      nft: nftIn(ns),
      sysctl: (key, value) => inNetns(node, home, () => writeSysctl(key, value)),
      bridge: 'pwtbr-f9',
      mtu: 1500,
      gateways: [{ family: 4, address: '10.244.91.1', prefixLength: 24 }],
    });
    await dp.start();
    const config: AgentConfig = { ...DEFAULT_CONFIG, podCIDRs: [CIDR] };
    ctx = {
      config,
      home,
      nl,
      ipam: new PodIpam(await NodeLocalAllocator.open([CIDR], store), undefined),
      datapath: dp,
      announcer: new Announcer({ rounds: 3, intervalMs: 50 }, () => undefined),
      log: silentLogger,
      cluster: undefined,
    };
  });

  after(async () => {
    await dp?.stop();
    await nl?.deletionsSettled();
    nl?.close();
    nf?.close();
    node?.close();
    home?.close();
    await spaces.cleanup();
  });

  test('a claim deleted and added again while GC ran is the new attachment: GC keeps it', async () => {
    await add('f9-renewed');
    await add('f9-stale'); // control: listed invalid, untouched, released
    const before = claimsOf('f9-renewed');
    const hold = store.holdNextList();
    const gc = cmdGc(ctx, NETWORK, [], silentLogger, guard);
    await hold.reached;
    // The runtime deletes the pod and adds it again (same containerID and ifname) while GC holds its listing.
    assert.equal(await del('f9-renewed'), true);
    const index = await add('f9-renewed');
    const after = claimsOf('f9-renewed');
    hold.release();
    const report = await gc;
    assert.deepEqual(claimsOf('f9-renewed'), after, `the new claim stays (was ${before}, now ${after})`);
    assert.equal(vethIndex('f9-renewed'), index, "the new attachment's veth stays");
    assert.deepEqual(claimsOf('f9-stale'), [], 'an untouched invalid claim is still released');
    assert.equal(vethIndex('f9-stale'), undefined);
    assert.deepEqual(
      report.released.map((a) => a.containerId),
      ['f9-stale'],
    );
    await del('f9-renewed');
  });

  test('a leftover veth deleted and added again while GC ran is a live pod: GC keeps it', async () => {
    await add('f9-leftover');
    await add('f9-orphan'); // control: an interrupted DEL nothing touches again, removed
    // Interrupted DELs: the claims are released, the veths (with their network's alias) left behind.
    for (const id of ['f9-leftover', 'f9-orphan'])
      await ctx.ipam.release({ containerId: id, ifname: 'eth0' });
    const hold = store.holdNextList();
    const gc = cmdGc(ctx, NETWORK, [], silentLogger, guard);
    await hold.reached;
    // The runtime's DEL finishes the job, then the pod is added again: a new veth of the same name.
    await del('f9-leftover');
    const index = await add('f9-leftover');
    hold.release();
    const report = await gc;
    assert.equal(vethIndex('f9-leftover'), index, "the new pod's veth stays");
    assert.equal(claimsOf('f9-leftover').length, 1);
    assert.equal(vethIndex('f9-orphan'), undefined, 'the untouched leftover is removed');
    assert.deepEqual(report.vethsRemoved, [hostVethName('f9-orphan', 'eth0')]);
    await del('f9-leftover');
  });

  test('reconcile while serving (`podwire gc`) keeps a leftover veth that was deleted and added again meanwhile', async () => {
    await add('f9-rec');
    await add('f9-rec-orphan'); // control, as above
    for (const id of ['f9-rec', 'f9-rec-orphan']) await ctx.ipam.release({ containerId: id, ifname: 'eth0' });
    const hold = store.holdNextList();
    const sweep = reconcile(ctx, guard);
    await hold.reached;
    await del('f9-rec');
    const index = await add('f9-rec');
    hold.release();
    const report = await sweep;
    assert.equal(vethIndex('f9-rec'), index, "the new pod's veth stays");
    assert.equal(vethIndex('f9-rec-orphan'), undefined, 'the untouched leftover is removed');
    assert.deepEqual(report.vethsRemoved, [hostVethName('f9-rec-orphan', 'eth0')]);
    await del('f9-rec');
  });
});
