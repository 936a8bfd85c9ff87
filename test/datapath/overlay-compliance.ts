/**
 * The compliance suite of the Overlay seam (src/datapath/overlay/overlay.ts), run against every
 * implementation on the real kernel: two node namespaces on a veth underlay, one pod behind each
 * (overlay-bed.ts). An implementation states what its documentation promises for a list of peers
 * (`expected`); the suite checks the kernel holds exactly that, through every change of the list,
 * and that podwire's objects (routes with proto 250, the overlay's neighbours and FDB entries) are
 * the only ones it ever touches.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { must } from '../../bed/exec.js';
import type { Overlay, OverlayStatus, PeerNode } from '../../src/datapath/overlay/overlay.js';
import { type BedNode, type KernelView, OverlayBed, UPLINK, underlayAddress } from './overlay-bed.js';

export interface Expected {
  routes: string[];
  neighbours: string[];
  fdb: string[];
  /** Names of the peers `setPeers` reports as skipped (at least one CIDR not programmed). */
  skipped: string[];
}

export interface OverlayImpl {
  name: string;
  /** The device podwire's peer routes leave by, and where its neighbours and FDB entries live. */
  device: string;
  make(node: BedNode): Overlay;
  /** What the implementation documents for `peers`, seen from `self`. */
  expected(self: BedNode, peers: readonly PeerNode[]): Expected;
  /** Address families the pods of two nodes can talk in, over an underlay of `underlay`. */
  families(underlay: 4 | 6): Array<4 | 6>;
  /** Checks what `start` made (and what it returned) on `node`. */
  checkStarted(node: BedNode, started: { vtepMac?: string }): Promise<void>;
}

/** A node as its peers see it (the store's record). */
export function peerOf(node: BedNode): PeerNode {
  return { name: node.name, underlayIP: node.underlayIP, podCIDRs: [...node.podCIDRs] };
}

/** Kernel objects that are not podwire's, put in place before the overlay runs; they must survive. */
async function addForeign(node: BedNode, device: string): Promise<void> {
  const ip = (...args: string[]) => must('ip', ['-n', node.ns, ...args]);
  await ip(
    'route',
    'add',
    '10.99.0.0/16',
    'via',
    '192.168.77.254',
    'dev',
    UPLINK,
    'onlink',
    'proto',
    'static',
  );
  await ip('route', 'add', '10.98.0.0/16', 'dev', device, 'proto', 'boot');
  await ip('-6', 'route', 'add', 'fd00:99::/48', 'dev', device, 'proto', 'static');
  await ip('neigh', 'add', '192.168.77.50', 'lladdr', '02:00:00:00:00:50', 'dev', UPLINK, 'nud', 'permanent');
}
const FOREIGN_NEIGHBOUR = '192.168.77.50 lladdr 02:00:00:00:00:50';

/**
 * Link, route and neighbour (FDB included) changes in `ns` while `fn` runs, as `ip monitor` prints
 * them. A marker route before and after `fn` bounds the window, so that a slow monitor start or a
 * late line cannot hide a change.
 */
async function changesDuring(ns: string, fn: () => Promise<unknown>): Promise<string[]> {
  const mon: ChildProcess = spawn('ip', ['-n', ns, 'monitor', 'link', 'route', 'neigh'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  let out = '';
  mon.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const marker = async (n: number): Promise<string> => {
    const dst = `198.18.0.${n}`;
    const deadline = Date.now() + 5000;
    for (;;) {
      // Re-added until the monitor shows it: the first ones may come before it subscribed.
      await must('ip', ['-n', ns, 'route', 'replace', dst, 'dev', 'lo', 'proto', 'static']);
      await must('ip', ['-n', ns, 'route', 'del', dst, 'dev', 'lo']);
      for (let i = 0; i < 10 && !out.includes(`Deleted ${dst}`); i++) await sleep(10);
      if (out.includes(`Deleted ${dst}`)) return dst;
      if (Date.now() > deadline) throw new Error(`ip monitor never showed ${dst}: ${out}`);
    }
  };
  let lines: string[];
  try {
    const start = await marker(1);
    await fn();
    const end = await marker(2);
    const all = out.split('\n');
    let from = all.length - 1;
    while (from >= 0 && !(all[from] as string).includes(start)) from--;
    lines = all.slice(
      from + 1,
      all.findIndex((l) => l.includes(end)),
    );
  } finally {
    const exited = new Promise((res) => mon.once('exit', res));
    mon.kill('SIGTERM');
    await exited;
  }
  // The kernel's own ARP/ND traffic and IPv6 link-local configuration are not the overlay's doing.
  return lines
    .filter((l) => l.trim() !== '' && !/\bfe80:/.test(l))
    .filter(
      (l) => !/\b(STALE|REACHABLE|DELAY|PROBE|INCOMPLETE|FAILED|NOARP)\b/.test(l) || /proto 250/.test(l),
    );
}

export function overlayCompliance(impl: OverlayImpl, underlay: 4 | 6): void {
  const u = (n: number) => underlayAddress(underlay, n);
  /** A peer with no namespace behind it: its routes exist, nothing answers. */
  const GHOST: PeerNode = {
    name: 'node-9',
    underlayIP: u(9),
    podCIDRs: ['10.246.9.0/24', 'fd00:246:9::/64'],
  };

  describe(`Overlay compliance: ${impl.name}, IPv${underlay} underlay`, () => {
    let bed: OverlayBed;
    let a: BedNode;
    let b: BedNode;
    let overlayA: Overlay;
    let overlayB: Overlay;
    let foreignA: string[];

    /** Node A's kernel holds exactly what `peers` documents, and no foreign object changed. */
    async function assertConverged(peers: readonly PeerNode[], status: OverlayStatus): Promise<KernelView> {
      const want = impl.expected(a, peers);
      const have = await bed.view(a, impl.device);
      assert.deepEqual(have.routes, [...want.routes].sort(), 'routes with proto 250');
      const foreignNeighbours = impl.device === UPLINK ? [FOREIGN_NEIGHBOUR] : [];
      assert.deepEqual(
        have.neighbours,
        [...want.neighbours, ...foreignNeighbours].sort(),
        'permanent neighbours',
      );
      assert.deepEqual(have.fdb, [...want.fdb].sort(), 'FDB entries with a remote');
      assert.deepEqual(have.foreignRoutes, foreignA, 'every other route unchanged');
      const onUplink = await bed.view(a, UPLINK);
      assert.ok(onUplink.neighbours.includes(FOREIGN_NEIGHBOUR), 'the foreign neighbour on the uplink stays');
      assert.deepEqual([...status.peers].sort(), peers.map((p) => p.name).sort(), 'status.peers');
      assert.deepEqual([...new Set(status.skipped.map((s) => s.name))].sort(), [...want.skipped].sort());
      return have;
    }

    before(async () => {
      bed = await OverlayBed.create(underlay);
      [a, b] = bed.nodes as [BedNode, BedNode];
      overlayA = impl.make(a);
      overlayB = impl.make(b);
      const started = await overlayA.start();
      await impl.checkStarted(a, started);
      await overlayB.start();
      await overlayB.setPeers([peerOf(a)]);
      await addForeign(a, impl.device);
      foreignA = (await bed.view(a, impl.device)).foreignRoutes;
    });
    after(async () => {
      await overlayA?.stop();
      await overlayB?.stop();
      await bed?.cleanup();
    });

    test('start again adopts what is there, changes nothing, and programs no peer', async () => {
      const before = await bed.view(a, impl.device);
      const changes = await changesDuring(a.ns, async () => {
        const again = await overlayA.start();
        await impl.checkStarted(a, again);
      });
      assert.deepEqual(changes, []);
      assert.deepEqual(await bed.view(a, impl.device), before);
      assert.deepEqual(before.routes, []);
    });

    test('peers set: routes, neighbours and FDB exactly as documented, every peer named in the status', async () => {
      const peers = [peerOf(b), GHOST];
      await assertConverged(peers, await overlayA.setPeers(peers));
    });

    test('peers changed, added and removed: the kernel converges to exactly each new list', async () => {
      const lists: PeerNode[][] = [
        [peerOf(b), GHOST],
        // B renumbered (another v4 CIDR), the ghost moved to another underlay address.
        [
          { ...peerOf(b), podCIDRs: ['10.246.22.0/24', b.podCIDRs[1] as string] },
          { ...GHOST, underlayIP: u(19) },
        ],
        // The ghost with another VTEP MAC than its name gives, and a new peer.
        [
          { ...GHOST, vtepMac: '0a:58:00:00:00:09' },
          { name: 'node-8', underlayIP: u(8), podCIDRs: ['10.246.8.0/24', 'fd00:246:8::/64'] },
        ],
        [GHOST],
        [],
        [peerOf(b)],
      ];
      for (const peers of lists) await assertConverged(peers, await overlayA.setPeers(peers));
    });

    test('the same peers again change nothing in the kernel', async () => {
      const peers = [peerOf(b), GHOST];
      await overlayA.setPeers(peers);
      const before = await bed.view(a, impl.device);
      const changes = await changesDuring(a.ns, () => overlayA.setPeers(peers));
      assert.deepEqual(changes, [], 'no route or neighbour was replaced');
      assert.deepEqual(await bed.view(a, impl.device), before);
    });

    test('no peers: every podwire object goes, nothing else does', async () => {
      await overlayA.setPeers([peerOf(b), GHOST]);
      const have = await assertConverged([], await overlayA.setPeers([]));
      assert.deepEqual(have.routes, []);
      assert.deepEqual(have.fdb, []);
    });

    test("this node's own pod CIDRs are never routed, even when a (stale) peer record claims them", async () => {
      // A record of a removed node whose CIDR this node has leased since, or a misconfigured file.
      const stale: PeerNode = {
        name: 'node-7',
        underlayIP: u(7),
        podCIDRs: [a.podCIDRs[0] as string, '10.246.7.0/24', 'fd00:246::/56'],
      };
      const peers = [stale, peerOf(b)];
      const status = await overlayA.setPeers(peers);
      await assertConverged(peers, status);
      assert.ok(
        status.skipped.some((s) => s.name === 'node-7' && s.reason.includes(a.podCIDRs[0] as string)),
        JSON.stringify(status.skipped),
      );
      for (const cidr of a.podCIDRs) {
        const family = cidr.includes(':') ? '-6' : '-4';
        const probe = cidr.replace(/\.0\/24$/, '.2').replace(/::\/64$/, '::2');
        const route = await must('ip', ['-n', a.ns, family, 'route', 'get', probe]);
        assert.match(route, /\bdev pv0\b/, `${probe} stays local: ${route}`);
      }
      const have = await bed.view(a, impl.device);
      for (const cidr of a.podCIDRs)
        assert.ok(!have.routes.some((r) => r.startsWith(`${cidr} `)), `no proto 250 route for ${cidr}`);
    });

    test('the pods of two nodes reach each other', async () => {
      await overlayA.setPeers([peerOf(b)]);
      await overlayB.setPeers([peerOf(a)]);
      for (const family of impl.families(underlay)) {
        const [ipA, ipB] = [a, b].map((n) => n.podIps.find((ip) => ip.includes(':') === (family === 6)));
        assert.ok(ipA && ipB);
        assert.equal(await bed.ping(a, ipB), true, `pod A -> pod B ${ipB}`);
        assert.equal(await bed.ping(b, ipA), true, `pod B -> pod A ${ipA}`);
      }
      await overlayA.setPeers([]);
      for (const family of impl.families(underlay)) {
        const ipB = b.podIps.find((ip) => ip.includes(':') === (family === 6)) as string;
        assert.equal(await bed.ping(a, ipB, 1), false, `no route to ${ipB} once B is no peer`);
      }
    });

    test('stop leaves the kernel as it is (pods keep talking); a new instance adopts it without a change', async () => {
      const peers = [peerOf(b)];
      await overlayA.setPeers(peers);
      await overlayB.setPeers([peerOf(a)]);
      const before = await bed.view(a, impl.device);
      await overlayA.stop();
      assert.deepEqual(await bed.view(a, impl.device), before);
      for (const family of impl.families(underlay)) {
        const ipB = b.podIps.find((ip) => ip.includes(':') === (family === 6)) as string;
        assert.equal(await bed.ping(a, ipB), true, `traffic to ${ipB} after stop`);
      }
      // The agent restarts: a new overlay over the same kernel state.
      overlayA = impl.make(a);
      const changes = await changesDuring(a.ns, async () => {
        await overlayA.start();
        await overlayA.setPeers(peers);
      });
      assert.deepEqual(changes, []);
      await assertConverged(peers, await overlayA.setPeers(peers));
    });
  });
}
