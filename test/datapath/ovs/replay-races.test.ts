/**
 * Three interleavings of pod operations with switch outages that left pods broken (found in review,
 * each reproduced first against a real OVS). The datapath reaches ovsdb-server and the bridge's
 * OpenFlow socket through proxies (bed/socket-proxy.ts), so a test can cut, delay or answer them on
 * cue; everything else is real: a private OVS, veths in throwaway namespaces.
 *
 * 1. A replay that finished while another was queued said "ready": an ADD then ran during the second
 *    replay, which deleted its flows as unexpected. Depends on the replay generation check in
 *    `#replay` (src/datapath/ovs/ovs-datapath.ts: `generation === this.#replayGeneration`).
 * 2. A port removal queued by a DEL during an OVSDB outage removed the row of the same attachment
 *    added again meanwhile. Depends on `#attachPort` taking the queued removal over
 *    (`this.#pendingRemovals.delete(port.hostIfname)`).
 * 3. An ADD whose OVSDB insert failed left its flows behind and freed their port number: the next pod
 *    got the number, and with it the failed pod's guards and forwarding. Depends on `#rowless`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { must } from '../../../bed/exec.js';
import { NamespaceSet, netnsPath } from '../../../bed/namespaces.js';
import { OVS_DATAPATH, OvsInstance } from '../../../bed/ovs.js';
import { SocketProxy } from '../../../bed/socket-proxy.js';
import { NotAvailableError } from '../../../src/base/errors.js';
import type { PodPort } from '../../../src/datapath/datapath.js';
import { OvsDatapath } from '../../../src/datapath/ovs/ovs-datapath.js';
import { cookieText, podCookie } from '../../../src/datapath/ovs/pipeline.js';
import { Rtnetlink } from '../../../src/kernel/netlink/rtnetlink.js';
import { inNetns, NetnsHandle } from '../../../src/kernel/netns.js';
import { nftIn } from '../../../src/kernel/nft.js';
import { writeSysctl } from '../../../src/kernel/sysctl.js';

const BRIDGE = 'br-races';

async function until(what: string, ms: number, fn: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await fn())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await sleep(20);
  }
}

describe(`OVS datapath: pod operations racing switch outages (${OVS_DATAPATH})`, () => {
  const spaces = new NamespaceSet();
  const handles: NetnsHandle[] = [];
  const proxies: SocketProxy[] = [];
  let ovs: OvsInstance;
  let nl: Rtnetlink;
  let node: NetnsHandle;
  let home: NetnsHandle;
  let pod: NetnsHandle;
  let nodeNs: string;
  let seq = 0;

  before(async () => {
    nodeNs = await spaces.add('races');
    const podNs = await spaces.add('racespod');
    home = NetnsHandle.current();
    node = NetnsHandle.open(netnsPath(nodeNs));
    pod = NetnsHandle.open(netnsPath(podNs));
    handles.push(home, node, pod);
    nl = inNetns(node, home, () => Rtnetlink.open());
    ovs = await OvsInstance.start(nodeNs);
  });
  after(async () => {
    for (const p of proxies) p.close();
    await ovs?.stop();
    nl?.close();
    for (const h of handles) h.close();
    await spaces.cleanup();
  });

  /** A started datapath behind fresh proxies, and what the tests ask of it; stopped by `end`. */
  async function datapath() {
    const id = ++seq;
    const db = new SocketProxy(`${ovs.dir}/races-db-${id}.sock`, ovs.ovsdb.slice('unix:'.length));
    const of = new SocketProxy(`${ovs.dir}/races-of-${id}.sock`, ovs.target(BRIDGE).slice('unix:'.length));
    proxies.push(db, of);
    await db.up();
    const infos: Array<{ message: string; ready: boolean }> = [];
    const dp: OvsDatapath = new OvsDatapath({
      nl,
      sysctl: (key, value) => inNetns(node, home, () => writeSysctl(key, value)),
      nft: nftIn(nodeNs),
      gateways: [{ family: 4, address: '10.252.0.1', prefixLength: 24 }],
      mtu: 1500,
      bridge: BRIDGE,
      gateway: `pwtrgw${id}`,
      ovsdb: `unix:${db.path}`,
      openflow: `unix:${of.path}`,
      datapathType: OVS_DATAPATH,
      info: (message) => infos.push({ message, ready: dp.status().ready }),
    });
    // The bridge's .mgmt socket exists once the datapath has made the bridge: the proxy listens then.
    const started = dp.start();
    await until('the bridge is made', 10_000, async () => (await ovs.vsctl('list-br')).includes(BRIDGE));
    await of.up();
    await started;
    const port = (name: string, i: number): PodPort => {
      const link = nl.addVeth({ name, peerName: `eth${i}`, mtu: 1500, peerNetnsFd: pod.fd });
      return {
        hostIfname: name,
        hostIfindex: link.index,
        containerId: `c-${name}`,
        ifname: `eth${i}`,
        podMac: `0a:58:0a:fc:00:${i.toString(16).padStart(2, '0')}`,
        podIps: [`10.252.0.${i}`],
      };
    };
    const flowsOf = async (name: string) =>
      (
        await must('ovs-ofctl', [
          '-O',
          'OpenFlow13',
          '--no-stats',
          'dump-flows',
          ovs.target(BRIDGE),
          `cookie=${cookieText(podCookie(name))}/-1`,
        ])
      )
        .split('\n')
        .filter((l) => l.includes('actions='));
    const ports = async () => (await ovs.vsctl('list-ports', BRIDGE)).split('\n').filter(Boolean);
    const end = async (names: string[]) => {
      for (const n of names) {
        await dp.detachPort(n).catch(() => undefined);
        nl.deleteLinkByName(n);
      }
      await dp.stop();
      await ovs.vsctl('--if-exists', 'del-br', BRIDGE);
      db.close();
      of.close();
    };
    return { dp, db, of, infos, port, flowsOf, ports, end };
  }

  test('1: while a second replay is queued, the first one does not say ready; an ADD meanwhile answers 50', async () => {
    const h = await datapath();
    try {
      const y = h.port('pwtry0', 30);
      h.db.down(); // ovsdb-server unreachable; the OpenFlow connection is cut next
      await sleep(300);
      // When the bridge takes the OpenFlow connection again, OVSDB is back too, slowly.
      h.of.onAccept = () => {
        h.db.delayMs = 50;
        void h.db.up();
      };
      let during: Promise<unknown> | undefined;
      const replayed = () => h.infos.filter((i) => i.message === 'OVS switch state replayed');
      const watcher = setInterval(() => {
        if (!during && replayed().length === 1)
          during = h.dp.attachPort(y).then(
            () => 'added',
            (e) => e,
          );
      }, 1);
      h.of.cut();
      try {
        await until('two replays', 10_000, () => replayed().length >= 2 && h.dp.status().ready);
      } finally {
        clearInterval(watcher);
      }
      const r = replayed();
      assert.equal(r[0]?.ready, false, 'the first replay, with another queued, left the datapath not ready');
      assert.equal(r.at(-1)?.ready, true, 'the last one made it ready');
      const outcome = await during;
      assert.ok(outcome instanceof NotAvailableError, `an ADD during the second replay: ${String(outcome)}`);
      await h.dp.detachPort(y.hostIfname); // its undo, as cmd-add does
      await h.dp.attachPort(y);
      assert.equal((await h.flowsOf(y.hostIfname)).length, 4, 'the ADD retried after it has its flows');
      await sleep(300);
      assert.equal((await h.flowsOf(y.hostIfname)).length, 4, 'and keeps them');
    } finally {
      await h.end(['pwtry0']);
    }
  });

  test('2: a DEL queued during an OVSDB outage does not remove the same attachment added again', async () => {
    const h = await datapath();
    try {
      const x = h.port('pwtrx0', 20);
      await h.dp.attachPort(x);
      h.db.down();
      await sleep(100);
      await h.dp.detachPort(x.hostIfname); // succeeds; the row's removal waits for OVSDB
      nl.deleteLinkByName(x.hostIfname);
      // The runtime adds the attachment again; this ADD is what reconnects OVSDB.
      const again = h.port('pwtrx0', 20);
      await h.db.up();
      await h.dp.attachPort(again);
      await until('the replay after the outage is done', 5000, () => h.dp.status().ready);
      await sleep(300);
      assert.ok((await h.ports()).includes(x.hostIfname), 'the port of the ADD is still there');
      assert.equal((await h.flowsOf(x.hostIfname)).length, 4, 'with its flows');
    } finally {
      await h.end(['pwtrx0']);
    }
  });

  test('3: an ADD whose insert failed leaves no flows, and its port number is not given out before they are gone', async () => {
    const h = await datapath();
    try {
      h.db.intercept = (m) => {
        if (m.method !== 'transact') return undefined;
        const insert = (m.params ?? []).find(
          (op) =>
            (op as { op?: string; table?: string; row?: { name?: string } })?.op === 'insert' &&
            (op as { row?: { name?: string } }).row?.name === 'pwtrc0',
        );
        return insert
          ? { id: m.id, result: [{ error: 'resources exhausted', details: 'injected' }], error: null }
          : undefined;
      };
      const c = h.port('pwtrc0', 10);
      await assert.rejects(h.dp.attachPort(c), /resources exhausted/);
      // Before its undo: another pod must not get the failed one's number.
      const d = h.port('pwtrd0', 11);
      await h.dp.attachPort(d);
      const dPort = (await ovs.vsctl('get', 'Interface', d.hostIfname, 'ofport')).trim();
      const cFlows = await h.flowsOf(c.hostIfname);
      for (const f of cFlows) assert.doesNotMatch(f, new RegExp(`(in_port=|output:)${dPort}\\b`), f);
      // The undo (cmd-add's): the failed pod's flows go.
      await h.dp.detachPort(c.hostIfname);
      nl.deleteLinkByName(c.hostIfname);
      h.db.intercept = undefined;
      assert.deepEqual(await h.flowsOf(c.hostIfname), [], 'no flows of the failed pod');
    } finally {
      await h.end(['pwtrc0', 'pwtrd0']);
    }
  });
});
