/**
 * deploy/install-cni.mjs, the DaemonSet's init container, run as in the pod but against temp
 * directories and a fake API server: podCIDRs from the Node, the agent's parser as the gate, the
 * chained reference plugins (the real ones, /usr/lib/cni, standing for the image's) checked with
 * VERSION and installed, the conflist last, nothing half-installed on failure, upgrades by rename.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parseDocument } from 'yaml';
import { must, run } from '../../bed/exec.js';
import { NamespaceSet } from '../../bed/namespaces.js';
import { parseAgentConfig } from '../../src/agent/config.js';
import { DEPLOY_DIR, findOne, type K8sObject, loadManifests } from './manifests.js';

const SCRIPT = join(DEPLOY_DIR, 'install-cni.mjs');
const TOKEN = 'test-token';
const configMap = findOne<K8sObject & { data: Record<string, string> }>(loadManifests(), 'ConfigMap');
const AGENT_YAML = configMap.data['agent.yaml'] as string;
const CONFLIST = configMap.data['10-podwire.conflist'] as string;
/** Where Debian's containernetworking-plugins puts the reference plugins; the image carries the same. */
const REFERENCE_DIR = '/usr/lib/cni';
const CHAINED = ['portmap'];

/** Nodes the fake API server knows, by name: their spec. */
const nodes: Record<string, Record<string, unknown>> = {
  'node-a': { podCIDRs: ['10.244.7.0/24', 'fd00:10:244:7::/64'] },
  'node-old': { podCIDR: '10.244.8.0/24' },
  'node-bare': {},
  'node-two-v4': { podCIDRs: ['10.244.9.0/24', '10.244.10.0/24'] },
};
let requests: string[] = [];
let server: Server;
let apiUrl = '';

before(async () => {
  server = createServer((req, res) => {
    requests.push(req.url ?? '');
    if (req.headers.authorization !== `Bearer ${TOKEN}`) {
      res.writeHead(401).end('{"kind":"Status","code":401}');
      return;
    }
    const name = /^\/api\/v1\/nodes\/([^/]+)$/.exec(req.url ?? '')?.[1];
    const spec = name === undefined ? undefined : nodes[decodeURIComponent(name)];
    if (spec === undefined) {
      res.writeHead(404).end('{"kind":"Status","code":404}');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Node', metadata: { name }, spec }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((resolve) => server.close(() => resolve())));

interface Bed {
  dir: string;
  env: NodeJS.ProcessEnv;
  path(sub: string): string;
}

function bed(opts: { conflist?: string; token?: string } = {}): Bed {
  const dir = mkdtempSync(join(tmpdir(), 'pwt-install-'));
  for (const sub of ['in', 'out', 'bin', 'net', 'sa']) mkdirSync(join(dir, sub));
  writeFileSync(join(dir, 'in', 'agent.yaml'), AGENT_YAML);
  writeFileSync(join(dir, 'in', '10-podwire.conflist'), opts.conflist ?? CONFLIST);
  writeFileSync(join(dir, 'sa', 'token'), `${opts.token ?? TOKEN}\n`);
  writeFileSync(join(dir, 'relay'), '#!/bin/sh\n# the relay, new build\n');
  requests = [];
  return {
    dir,
    path: (sub) => join(dir, sub),
    env: {
      PATH: process.env.PATH,
      PODWIRE_CONFIG_IN: join(dir, 'in'),
      PODWIRE_CONFIG_OUT: join(dir, 'out'),
      CNI_BIN_DIR: join(dir, 'bin'),
      CNI_NET_DIR: join(dir, 'net'),
      PODWIRE_RELAY: join(dir, 'relay'),
      PODWIRE_PLUGIN_DIR: REFERENCE_DIR,
      PODWIRE_API_SERVER: apiUrl,
      PODWIRE_SERVICE_ACCOUNT_DIR: join(dir, 'sa'),
    },
  };
}

const install = (b: Bed, env: NodeJS.ProcessEnv) =>
  run(process.execPath, [SCRIPT], { env: { ...b.env, ...env } });

/** An agent.yaml without its cluster: section (and the keys that only go with one): one node on its own. */
function withoutCluster(agentYaml: string): string {
  const doc = parseDocument(agentYaml);
  for (const key of ['cluster', 'uplink', 'trafficMode', 'nodeName']) doc.delete(key);
  assert.equal(parseAgentConfig(`${doc}podCIDRs: ["10.244.3.0/24"]\n`).cluster, undefined);
  return doc.toString();
}

/** Every file under the bed's output directories. */
function installed(b: Bed): string[] {
  return ['out', 'bin', 'net'].flatMap((d) => readdirSync(b.path(d)).map((f) => `${d}/${f}`)).sort();
}

describe('install-cni.mjs', () => {
  test("mode node: the Node's podCIDRs, the agent's other keys unchanged, relay, plugins and conflist installed", async () => {
    const b = bed();
    try {
      // An older install is replaced, as in a DaemonSet upgrade.
      writeFileSync(b.path('bin/podwire'), 'old relay');
      writeFileSync(b.path('bin/portmap'), 'old portmap');
      writeFileSync(b.path('net/10-podwire.conflist'), 'old conflist');
      const r = await install(b, { NODE_NAME: 'node-a' });
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(requests, ['/api/v1/nodes/node-a']);
      const rendered = parseAgentConfig(readFileSync(b.path('out/agent.yaml'), 'utf8'));
      // With deploy/'s cluster: section, the agent's nodeName becomes the Node's too (not the host name).
      const shipped = parseAgentConfig(AGENT_YAML);
      assert.ok(shipped.cluster);
      assert.deepEqual(rendered, {
        ...shipped,
        podCIDRs: nodes['node-a']?.podCIDRs,
        cluster: { ...shipped.cluster, nodeName: 'node-a' },
      });
      assert.equal(readFileSync(b.path('bin/podwire'), 'utf8'), readFileSync(b.path('relay'), 'utf8'));
      assert.equal(statSync(b.path('bin/podwire')).mode & 0o777, 0o755);
      for (const p of CHAINED) {
        assert.ok(readFileSync(b.path(`bin/${p}`)).equals(readFileSync(join(REFERENCE_DIR, p))), p);
        assert.equal(statSync(b.path(`bin/${p}`)).mode & 0o777, 0o755);
      }
      assert.equal(readFileSync(b.path('net/10-podwire.conflist'), 'utf8'), CONFLIST);
      assert.deepEqual(
        installed(b),
        ['bin/podwire', 'bin/portmap', 'net/10-podwire.conflist', 'out/agent.yaml'],
        'no temp file left',
      );
      assert.match(r.stderr, /"msg":"installed"/);
      assert.doesNotMatch(r.stderr, /"level":"warn"/);
    } finally {
      rmSync(b.dir, { recursive: true, force: true });
    }
  });

  // Depends on configsBefore (install-cni.mjs): the old installer said nothing, and the runtime went
  // on using the other file.
  test("another CNI configuration that sorts before podwire's: installed, with a warning naming it", async () => {
    const b = bed();
    try {
      for (const f of ['05-other.conflist', '00-flannel.conf', '00-readme.txt', '99-late.conflist'])
        writeFileSync(b.path(`net/${f}`), '{}');
      const r = await install(b, { PODWIRE_POD_CIDRS: 'config' });
      assert.equal(r.code, 0, r.stderr);
      const warn = r.stderr
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { level: string; msg: string; before?: string[]; dir?: string })
        .find((l) => l.level === 'warn');
      assert.ok(warn, r.stderr);
      assert.match(
        warn.msg,
        /^CNI configuration that sorts before 10-podwire\.conflist: runtimes use the first file/,
      );
      assert.deepEqual(warn.before, ['00-flannel.conf', '05-other.conflist']);
      assert.equal(warn.dir, b.path('net'));
      assert.equal(readFileSync(b.path('net/10-podwire.conflist'), 'utf8'), CONFLIST);
    } finally {
      rmSync(b.dir, { recursive: true, force: true });
    }
  });

  test('PODWIRE_PLUGINS=keep: a plugin the host has stays, a missing one is installed', async () => {
    // Two chained plugins (the shipped conflist chains one): portmap the host has, tuning it lacks.
    const b = bed({
      conflist: JSON.stringify({
        cniVersion: '1.0.0',
        name: 'podwire',
        plugins: [{ type: 'podwire' }, { type: 'portmap' }, { type: 'tuning' }],
      }),
    });
    try {
      // The host's own build: a copy of the reference plugin (it must answer VERSION), told apart by
      // its inode.
      copyFileSync(join(REFERENCE_DIR, 'portmap'), b.path('bin/portmap'));
      const hostInode = statSync(b.path('bin/portmap')).ino;
      const r = await install(b, { PODWIRE_POD_CIDRS: 'config', PODWIRE_PLUGINS: 'keep' });
      assert.equal(r.code, 0, r.stderr);
      assert.equal(statSync(b.path('bin/portmap')).ino, hostInode, "the host's portmap was replaced");
      assert.ok(readFileSync(b.path('bin/tuning')).equals(readFileSync(join(REFERENCE_DIR, 'tuning'))));
      assert.match(r.stderr, /"keptHostPlugins":\["portmap"\]/);
    } finally {
      rmSync(b.dir, { recursive: true, force: true });
    }
  });

  test('PODWIRE_PLUGINS=keep fails on a host plugin that does not answer VERSION, and installs nothing', async () => {
    const b = bed();
    try {
      writeFileSync(b.path('bin/portmap'), '#!/bin/sh\nexit 3\n', { mode: 0o755 });
      const r = await install(b, { NODE_NAME: 'node-a', PODWIRE_PLUGINS: 'keep' });
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /the host's portmap: VERSION failed/);
      assert.deepEqual(installed(b), ['bin/portmap']);
    } finally {
      rmSync(b.dir, { recursive: true, force: true });
    }
  });

  test('mode node: the older single spec.podCIDR is taken too', async () => {
    const b = bed();
    try {
      const r = await install(b, { NODE_NAME: 'node-old' });
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(parseAgentConfig(readFileSync(b.path('out/agent.yaml'), 'utf8')).podCIDRs, [
        '10.244.8.0/24',
      ]);
    } finally {
      rmSync(b.dir, { recursive: true, force: true });
    }
  });

  // deploy/'s ConfigMap writes no podCIDRs (they are each Node's); a single node on its own may.
  test('mode config: the ConfigMap podCIDRs as written, no API call', async () => {
    const b = bed();
    try {
      writeFileSync(b.path('in/agent.yaml'), `${withoutCluster(AGENT_YAML)}podCIDRs: ["10.244.3.0/24"]\n`);
      const r = await install(b, { PODWIRE_POD_CIDRS: 'config' });
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(requests, []);
      assert.deepEqual(parseAgentConfig(readFileSync(b.path('out/agent.yaml'), 'utf8')).podCIDRs, [
        '10.244.3.0/24',
      ]);
    } finally {
      rmSync(b.dir, { recursive: true, force: true });
    }
  });

  const chainedList = (version: string, types: string[]) =>
    JSON.stringify({
      cniVersion: version,
      name: 'podwire',
      plugins: [{ type: 'podwire' }, ...types.map((type) => ({ type }))],
    });
  const failures: Array<{
    name: string;
    opts?: Parameters<typeof bed>[0];
    env: NodeJS.ProcessEnv;
    error: RegExp;
  }> = [
    {
      name: 'a Node without podCIDRs',
      env: { NODE_NAME: 'node-bare' },
      error: /node node-bare has no spec\.podCIDRs.*PODWIRE_POD_CIDRS=config/,
    },
    {
      name: "podCIDRs the agent's parser refuses",
      env: { NODE_NAME: 'node-two-v4' },
      error: /agent config: podCIDRs: more than one IPv4 CIDR/,
    },
    { name: 'an unknown Node', env: { NODE_NAME: 'node-missing' }, error: /HTTP 404/ },
    {
      name: 'a token the API refuses',
      opts: { token: 'wrong' },
      env: { NODE_NAME: 'node-a' },
      error: /HTTP 401/,
    },
    { name: 'no NODE_NAME', env: {}, error: /NODE_NAME is unset/ },
    {
      name: 'an unknown mode',
      env: { PODWIRE_POD_CIDRS: 'dhcp' },
      error: /PODWIRE_POD_CIDRS=dhcp: must be node or config/,
    },
    {
      name: "a conflist whose socket is not the agent's",
      opts: {
        conflist:
          '{"cniVersion":"1.0.0","name":"podwire","plugins":[{"type":"podwire","socket":"/run/other.sock"}]}',
      },
      env: { NODE_NAME: 'node-a' },
      error: /socket \/run\/other\.sock is not the agent's \(\/run\/podwire\/cni\.sock\)/,
    },
    {
      name: 'a conflist the CNI layer refuses',
      opts: { conflist: '{"cniVersion":"0.1.0","name":"podwire","plugins":[{"type":"podwire"}]}' },
      env: { NODE_NAME: 'node-a' },
      error: /cniVersion: "0\.1\.0" is not supported/,
    },
    {
      name: 'a conflist chaining a plugin the image lacks',
      opts: { conflist: chainedList('1.0.0', ['portmap', 'no-such-plugin']) },
      env: { NODE_NAME: 'node-a' },
      error: /plugin no-such-plugin is not in the image/,
    },
    {
      // The conflist deploy/ shipped before podwire shaped bandwidth itself (decision 42).
      name: 'a conflist that chains the reference bandwidth plugin after podwire',
      opts: {
        conflist: JSON.stringify({
          cniVersion: '1.0.0',
          name: 'podwire',
          plugins: [
            { type: 'podwire', socket: '/run/podwire/cni.sock' },
            { type: 'portmap', capabilities: { portMappings: true }, snat: true },
            { type: 'bandwidth', capabilities: { bandwidth: true } },
          ],
        }),
      },
      env: { NODE_NAME: 'node-a' },
      error:
        /bandwidth is chained after podwire: podwire shapes bandwidth itself.*create ingress qdisc: file exists.*"capabilities": \{"bandwidth": true\} on podwire's/,
    },
    {
      name: 'a conflist whose plugins do not come after podwire',
      opts: {
        conflist: JSON.stringify({
          cniVersion: '1.0.0',
          name: 'podwire',
          plugins: [{ type: 'portmap' }, { type: 'podwire' }],
        }),
      },
      env: { NODE_NAME: 'node-a' },
      error: /podwire must come first/,
    },
    {
      name: 'an unknown PODWIRE_PLUGINS',
      env: { NODE_NAME: 'node-a', PODWIRE_PLUGINS: 'sometimes' },
      error: /PODWIRE_PLUGINS=sometimes: must be replace or keep/,
    },
  ];
  // A version podwire speaks and the installed portmap does not (Debian 12's 1.1.1 stops at 1.0.0).
  const portmapVersions = JSON.parse(
    execFileSync(join(REFERENCE_DIR, 'portmap'), {
      env: { CNI_COMMAND: 'VERSION' },
      stdio: ['ignore', 'pipe', 'pipe'],
    }).toString(),
  ) as { supportedVersions: string[] };
  if (!portmapVersions.supportedVersions.includes('1.1.0')) {
    failures.push({
      name: 'a conflist version a chained plugin does not speak',
      opts: { conflist: chainedList('1.1.0', ['portmap']) },
      env: { NODE_NAME: 'node-a' },
      error: /cniVersion 1\.1\.0 is not one portmap speaks/,
    });
  }
  for (const f of failures) {
    test(`fails on ${f.name}, and installs nothing`, async () => {
      const b = bed(f.opts);
      try {
        const r = await install(b, f.env);
        assert.equal(r.code, 1, r.stderr);
        const line = JSON.parse(r.stderr.trim().split('\n').at(-1) as string) as {
          level: string;
          error: string;
        };
        assert.equal(line.level, 'error');
        assert.match(line.error, f.error);
        assert.deepEqual(installed(b), []);
      } finally {
        rmSync(b.dir, { recursive: true, force: true });
      }
    });
  }
});

/**
 * PODWIRE_UPLINK=node, against a host's real interfaces: the installer runs in a throwaway network
 * namespace (as the init container runs in the host's) that has an uplink named `ul7` holding the
 * Node's InternalIP; the fake API server runs there too, so that the installer reaches it on loopback.
 */
describe('install-cni.mjs: the uplink from the Node', () => {
  const ETCD_TLS = findOne<K8sObject & { data: Record<string, string> }>(
    loadManifests(join(DEPLOY_DIR, 'etcd-tls')),
    'ConfigMap',
  );
  const namespaces = new NamespaceSet();
  let ns = '';
  let api: ChildProcess | undefined;
  let url = '';
  const NODES = {
    'node-ul7': {
      spec: { podCIDRs: ['10.244.7.0/24'] },
      status: {
        addresses: [
          { type: 'Hostname', address: 'node-ul7' },
          { type: 'InternalIP', address: '192.0.2.7' },
        ],
      },
    },
    'node-elsewhere': {
      spec: { podCIDRs: ['10.244.8.0/24'] },
      status: { addresses: [{ type: 'InternalIP', address: '192.0.2.99' }] },
    },
  };
  before(async () => {
    ns = await namespaces.add('install-uplink');
    await must('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    await must('ip', ['-n', ns, 'link', 'add', 'ul7', 'type', 'veth', 'peer', 'name', 'ul7-peer']);
    await must('ip', ['-n', ns, 'addr', 'add', '192.0.2.7/24', 'dev', 'ul7']);
    await must('ip', ['-n', ns, 'link', 'set', 'ul7', 'up']);
    // Running (its peer up too): Node.js lists only the addresses of running interfaces.
    await must('ip', ['-n', ns, 'link', 'set', 'ul7-peer', 'up']);
    const server = `
      const nodes = ${JSON.stringify(NODES)};
      require('node:http').createServer((req, res) => {
        const name = decodeURIComponent((/^\\/api\\/v1\\/nodes\\/([^/]+)$/.exec(req.url) ?? [])[1] ?? '');
        const node = nodes[name];
        if (req.headers.authorization !== 'Bearer ${TOKEN}' || !node) return res.writeHead(404).end('{}');
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Node', metadata: { name }, ...node }));
      }).listen(0, '127.0.0.1', function () { console.log(this.address().port); });`;
    const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', server], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    api = child;
    const port = await new Promise<string>((resolve, reject) => {
      child.stdout?.once('data', (d: Buffer) => resolve(d.toString().trim()));
      child.once('exit', (code) => reject(new Error(`fake API server exited ${code}`)));
    });
    url = `http://127.0.0.1:${port}`;
  });
  after(async () => {
    api?.kill();
    await namespaces.cleanup();
  });

  const installIn = (b: Bed, env: NodeJS.ProcessEnv) =>
    run('ip', [
      'netns',
      'exec',
      ns,
      'env',
      ...Object.entries({ ...b.env, PODWIRE_API_SERVER: url, ...env }).map(([k, v]) => `${k}=${v}`),
      process.execPath,
      SCRIPT,
    ]);

  // Depends on nodeUplink (install-cni.mjs): the old installer kept the ConfigMap's one uplink for
  // every node (eth0 here, which this namespace does not have).
  for (const [name, cm] of [
    ['deploy/configmap.yaml (store kubernetes)', configMap],
    ['deploy/etcd-tls/', ETCD_TLS],
  ] as const) {
    test(`PODWIRE_UPLINK=node: uplink is the interface holding the Node's InternalIP, ${name}`, async () => {
      const b = bed({ conflist: cm.data['10-podwire.conflist'] });
      try {
        writeFileSync(b.path('in/agent.yaml'), cm.data['agent.yaml'] as string);
        const r = await installIn(b, { NODE_NAME: 'node-ul7', PODWIRE_UPLINK: 'node' });
        assert.equal(r.code, 0, r.stderr);
        const rendered = parseAgentConfig(readFileSync(b.path('out/agent.yaml'), 'utf8'));
        assert.equal(rendered.cluster?.uplink, 'ul7');
        assert.deepEqual(rendered.podCIDRs, ['10.244.7.0/24']);
        assert.match(r.stderr, /"msg":"uplink from the node".*"uplink":"ul7"/);
      } finally {
        rmSync(b.dir, { recursive: true, force: true });
      }
    });
  }

  // Depends on the nodeName step (install-cni.mjs): without it every agent registered in the store
  // under the host name, and two nodes of one host (the Kubernetes bed's) were one node to etcd.
  test("with a cluster store: nodeName is the Node's name, unless the ConfigMap names one", async () => {
    const b = bed({ conflist: ETCD_TLS.data['10-podwire.conflist'] });
    try {
      writeFileSync(b.path('in/agent.yaml'), ETCD_TLS.data['agent.yaml'] as string);
      const r = await installIn(b, { NODE_NAME: 'node-ul7', PODWIRE_UPLINK: 'node' });
      assert.equal(r.code, 0, r.stderr);
      const rendered = parseAgentConfig(readFileSync(b.path('out/agent.yaml'), 'utf8'));
      assert.equal(rendered.cluster?.nodeName, 'node-ul7');
      writeFileSync(b.path('in/agent.yaml'), `${ETCD_TLS.data['agent.yaml']}nodeName: chosen-name\n`);
      const kept = await installIn(b, { NODE_NAME: 'node-ul7', PODWIRE_UPLINK: 'node' });
      assert.equal(kept.code, 0, kept.stderr);
      assert.equal(
        parseAgentConfig(readFileSync(b.path('out/agent.yaml'), 'utf8')).cluster?.nodeName,
        'chosen-name',
      );
    } finally {
      rmSync(b.dir, { recursive: true, force: true });
    }
  });

  test('PODWIRE_UPLINK=node and no interface with the InternalIP: fails naming it, installs nothing', async () => {
    const b = bed({ conflist: ETCD_TLS.data['10-podwire.conflist'] });
    try {
      writeFileSync(b.path('in/agent.yaml'), ETCD_TLS.data['agent.yaml'] as string);
      const r = await installIn(b, { NODE_NAME: 'node-elsewhere', PODWIRE_UPLINK: 'node' });
      assert.equal(r.code, 1, r.stderr);
      assert.match(
        r.stderr,
        /PODWIRE_UPLINK=node: no interface of this host holds node node-elsewhere's InternalIP 192\.0\.2\.99/,
      );
      assert.deepEqual(installed(b), []);
      // Without a cluster: section there is no uplink to set.
      writeFileSync(b.path('in/agent.yaml'), withoutCluster(AGENT_YAML));
      const single = await installIn(b, { NODE_NAME: 'node-ul7', PODWIRE_UPLINK: 'node' });
      assert.equal(single.code, 1);
      assert.match(single.stderr, /PODWIRE_UPLINK=node: agent\.yaml has no cluster: section/);
    } finally {
      rmSync(b.dir, { recursive: true, force: true });
    }
  });
});
