/**
 * A real container runtime end to end: podman 4.3 (CNI backend, runc, busybox `--rootfs`) runs two
 * containers on a podwire network served by an agent in a throwaway node namespace. podman's whole
 * configuration and state live in a temp directory (podman-bed.ts); nothing of the machine's
 * /etc/containers, /etc/cni, /var/lib/containers, /var/lib/cni or /run/runc is read or written.
 *
 * Proves: podman sees the network; the containers get addresses from the agent's pod CIDRs, as the
 * agent's IPAM records them; they reach each other and the gateway over IPv4 and IPv6; `podman rm -f`
 * makes the agent release everything (no host veth, no claim, no netns, no cached result); and
 * afterwards no container, conmon, podman process, cgroup, namespace or directory is left, pass or fail.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { ipJson, run } from '../../bed/exec.js';
import { netnsPath } from '../../bed/namespaces.js';
import { RELAY, TestNode } from '../../bed/node.js';
import { parseCidr } from '../../src/ipam/cidr.js';
import { findBusybox, isStaticElf } from './busybox-rootfs.js';
import { type ContainerInfo, NETWORK, PodmanBed } from './podman-bed.js';

/** Another relay build may be tried in place of bin/podwire-cni. */
const RELAY_UNDER_TEST = process.env.PODWIRE_E2E_RELAY ?? RELAY;
const CIDR4 = parseCidr('10.244.21.0/24');
const CIDR6 = parseCidr('fd00:10:244:21::/64');
const BRIDGE = 'podwire0';

async function has(cmd: string): Promise<boolean> {
  return (await run('sh', ['-c', `command -v ${cmd}`])).code === 0;
}

/** Why podman cannot run here, or undefined. Each reason names what to install or change. */
async function unavailable(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'needs root (podman as root, network namespaces)';
  for (const cmd of ['podman', 'runc', 'conmon', 'unshare', 'nsenter']) {
    if (!(await has(cmd))) return `${cmd} is not installed (setup.sh installs podman and runc)`;
  }
  const busybox = findBusybox();
  if (busybox === undefined) return 'busybox is not installed (setup.sh installs busybox-static)';
  if (!isStaticElf(busybox)) return `${busybox} is dynamically linked: install busybox-static`;
  return undefined;
}

interface BridgePort {
  ifname: string;
}

test('podman runs containers on a podwire network and leaves nothing behind', {
  timeout: 300_000,
}, async (t) => {
  const why = await unavailable();
  if (why !== undefined) {
    t.skip(why);
    return;
  }
  const node = new TestNode({ podCIDRs: [CIDR4.text, CIDR6.text] });
  let bed: PodmanBed | undefined;
  let problems: string[] = [];
  try {
    await node.setup();
    bed = await PodmanBed.create({
      agentSocket: node.socket,
      relay: RELAY_UNDER_TEST,
      busybox: findBusybox() as string,
    });
    const podman = bed;
    let a: ContainerInfo | undefined;
    let b: ContainerInfo | undefined;

    await t.test('the relay answers VERSION from a stdin without a socket key', async () => {
      // libcni's ValidateNetworkList probes every plugin with VERSION and stdin {"cniVersion"} only;
      // podman 4.3 drops a network whose plugin fails the probe ("Error validating CNI config file").
      const r = await run(RELAY_UNDER_TEST, [], {
        env: { PATH: process.env.PATH, CNI_COMMAND: 'VERSION', CNI_PATH: '/opt/cni/bin' },
        input: '{"cniVersion":"1.0.0"}',
      });
      assert.equal(r.code, 0, `VERSION failed: ${r.stdout} ${r.stderr}`);
      const info = JSON.parse(r.stdout) as { supportedVersions: string[] };
      assert.ok(info.supportedVersions.includes('1.0.0'), r.stdout);
    });

    await t.test('podman network ls and inspect see the podwire network', async () => {
      const ls = await podman.podman(['network', 'ls', '--format={{.Name}} {{.Driver}}']);
      assert.equal(ls.code, 0, ls.stderr);
      assert.ok(ls.stdout.split('\n').includes(`${NETWORK} podwire`), `${ls.stdout}\n${ls.stderr}`);
      const [net] = JSON.parse(await podman.mustPodman(['network', 'inspect', NETWORK])) as Array<{
        name: string;
        driver: string;
      }>;
      assert.equal(net?.name, NETWORK);
      assert.equal(net?.driver, 'podwire');
    });

    await t.test('two containers get addresses from the pod CIDRs, as the agent records them', async () => {
      a = await podman.runContainer('pw-e2e-a');
      b = await podman.runContainer('pw-e2e-b');
      for (const c of [a, b]) {
        // The CNI_NETNS podman passed: a bind mount the agent, in its own mount namespace, opened.
        assert.match(c.sandboxKey, /^\/run\/netns\/netns-/, c.name);
        assert.ok(CIDR4.contains(c.ipv4), `${c.name}: ${c.ipv4} not in ${CIDR4.text}`);
        assert.ok(CIDR6.contains(c.ipv6), `${c.name}: ${c.ipv6} not in ${CIDR6.text}`);
        assert.equal(c.ipv4PrefixLen, CIDR4.prefixLength);
        assert.equal(c.gateway, CIDR4.format(CIDR4.gateway));
        assert.equal(c.ipv6Gateway, CIDR6.format(CIDR6.gateway));
        const addr = await podman.exec(c.name, ['ip', '-o', 'addr', 'show', 'dev', 'eth0']);
        assert.equal(addr.code, 0, addr.stderr);
        assert.match(addr.stdout, new RegExp(`inet ${c.ipv4}/${CIDR4.prefixLength} `));
        assert.match(addr.stdout, new RegExp(`inet6 ${c.ipv6}/${CIDR6.prefixLength} `));
        const link = await podman.exec(c.name, ['ip', '-o', 'link', 'show', 'dev', 'eth0']);
        assert.match(link.stdout, new RegExp(`link/ether ${c.mac} `));
      }
      assert.notEqual(a.ipv4, b.ipv4);
      assert.notEqual(a.ipv6, b.ipv6);
      const claims = node.claims().sort((x, y) => x.ip.localeCompare(y.ip));
      const expected = [a, b]
        .flatMap((c) => [
          { ip: c.ipv4, containerId: c.id, ifname: 'eth0' },
          { ip: c.ipv6, containerId: c.id, ifname: 'eth0' },
        ])
        .sort((x, y) => x.ip.localeCompare(y.ip));
      assert.deepEqual(claims, expected);
      const ports = await ipJson<BridgePort[]>(node.nodeNs, ['link', 'show', 'master', BRIDGE]);
      assert.equal(ports.length, 2, JSON.stringify(ports));
      assert.equal(podman.cachedResults().length, 2, 'libcni caches one result per container');
    });

    await t.test('the containers reach each other and the gateway, over IPv4 and IPv6', async (st) => {
      if (a === undefined || b === undefined) {
        st.skip('no containers: the previous step failed');
        return;
      }
      const pings: Array<[ContainerInfo, string]> = [
        [a, b.ipv4],
        [b, a.ipv4],
        [a, CIDR4.format(CIDR4.gateway)],
        [a, b.ipv6],
        [b, a.ipv6],
        [b, CIDR6.format(CIDR6.gateway)],
      ];
      for (const [from, to] of pings) {
        const r = await podman.exec(from.name, ['ping', '-c', '2', '-W', '3', to]);
        assert.equal(r.code, 0, `${from.name} -> ${to}: ${r.stdout}${r.stderr}`);
        assert.match(r.stdout, / 0% packet loss/, `${from.name} -> ${to}`);
      }
    });

    await t.test('podman rm -f releases everything', async (st) => {
      if (a === undefined || b === undefined) {
        st.skip('no containers: the previous step failed');
        return;
      }
      await podman.mustPodman(['rm', '--force', '--time=0', a.name, b.name]);
      assert.equal((await podman.mustPodman(['ps', '--all', '--quiet'])).trim(), '');
      assert.deepEqual(await podman.settle(), [], 'processes after podman rm');
      assert.deepEqual(node.claims(), [], 'IPAM claims');
      assert.deepEqual(await ipJson<BridgePort[]>(node.nodeNs, ['link', 'show', 'type', 'veth']), []);
      for (const c of [a, b]) assert.equal(existsSync(c.sandboxKey), false, `${c.sandboxKey} remains`);
      assert.deepEqual(podman.cachedResults(), [], 'libcni cached results');
      assert.equal(node.agent?.exitCode, null, 'the agent keeps running');
    });
  } finally {
    if (bed !== undefined) problems = await bed.cleanup();
    await node.cleanup();
  }
  assert.deepEqual(problems, [], 'problems met while cleaning up');
  assert.deepEqual(bed.leftovers(), [], 'left on the machine');
  assert.equal(existsSync(node.dir), false, `${node.dir} remains`);
  assert.equal(existsSync(netnsPath(node.nodeNs)), false, `node namespace ${node.nodeNs} remains`);
});
