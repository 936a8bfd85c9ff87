/**
 * Service rules as kube-proxy writes them, in a node namespace of the bed, from a small
 * Service/Endpoints description: the real kernel rules of the real shapes, so that a test shows what a
 * cluster running kube-proxy would see. Both of kube-proxy's Linux modes:
 *
 * - `iptables` (through iptables-nft, as `iptables-restore` of the nat table): PREROUTING and OUTPUT
 *   jump to KUBE-SERVICES, which matches each ClusterIP:port into its KUBE-SVC-* chain (masquerade
 *   mark for sources outside the cluster CIDR, then one KUBE-SEP-* per endpoint picked with
 *   `statistic --mode random`), and last, for local destinations, KUBE-NODEPORTS -> KUBE-EXT-*
 *   (mark, then the service chain). A KUBE-SEP-* marks a packet from the endpoint itself (hairpin)
 *   and DNATs; KUBE-MARK-MASQ sets 0x4000; KUBE-POSTROUTING masquerades marked packets.
 * - `nftables` (`table ip kube-proxy`): the `service-ips` and `service-nodeports` verdict maps,
 *   `service-*`, `endpoint-*` and `external-*` chains, `numgen random` over the endpoints,
 *   `mark-for-masquerade`, `masquerading`, and the nat-prerouting/nat-output/nat-postrouting hooks.
 *
 * Chain names are derived as kube-proxy derives them (sha256, base32). Only what these tests exercise
 * is written: no session affinity, traffic policies, load balancers or no-endpoint rejects. `remove`
 * takes out everything `apply` installed (and the empty nat table iptables-nft leaves, when nothing
 * else uses it), pass or fail (I7).
 */
import { createHash } from 'node:crypto';
import { must, run } from './exec.js';

export type KubeProxyMode = 'iptables' | 'nftables';

export interface ServiceEndpoint {
  ip: string;
  port: number;
}

export interface ServiceSpec {
  namespace: string;
  name: string;
  /** The Service port's name; '' for an unnamed port. */
  portName?: string;
  clusterIP: string;
  protocol: 'TCP' | 'UDP';
  port: number;
  nodePort?: number;
  endpoints: ServiceEndpoint[];
}

export interface KubeProxyOptions {
  /** kube-proxy's --cluster-cidr: traffic from outside it to a ClusterIP is masqueraded. */
  clusterCIDR: string;
  /** The node's addresses that accept NodePort traffic (nftables mode's `nodeport-ips`). */
  nodeIPs: string[];
}

const MASQ_MARK = '0x4000';

/** RFC 4648 base32 (Go's base32.StdEncoding), enough of it for kube-proxy's chain-name hashes. */
function base32(bytes: Uint8Array): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = 0;
  let value = 0;
  let out = '';
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += alphabet[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += alphabet[(value << (5 - bits)) & 31];
  return out;
}

const hash = (text: string) => base32(createHash('sha256').update(text).digest());

/** kube-proxy's ServicePortName.String(): `ns/name:port`, or `ns/name` for an unnamed port. */
export function servicePortName(s: ServiceSpec): string {
  return `${s.namespace}/${s.name}${s.portName ? `:${s.portName}` : ''}`;
}

const proto = (s: ServiceSpec) => s.protocol.toLowerCase();
const epText = (e: ServiceEndpoint) => `${e.ip}:${e.port}`;

/** iptables mode's chain names: KUBE-SVC-, KUBE-EXT- and KUBE-SEP- plus 16 base32 characters. */
export function iptablesChains(s: ServiceSpec): { svc: string; ext: string; seps: string[] } {
  const spn = servicePortName(s);
  const h = hash(spn + proto(s)).slice(0, 16);
  return {
    svc: `KUBE-SVC-${h}`,
    ext: `KUBE-EXT-${h}`,
    seps: s.endpoints.map((e) => `KUBE-SEP-${hash(spn + proto(s) + epText(e)).slice(0, 16)}`),
  };
}

/** nftables mode's chain-name bases: `HASH8-ns/name/proto/port` and `…__ip/port` per endpoint. */
export function nftablesChains(s: ServiceSpec): { service: string; external: string; endpoints: string[] } {
  const base = `${s.namespace}/${s.name}/${proto(s)}/${s.portName ?? ''}`;
  const named = (name: string) => `${hash(name).slice(0, 8)}-${name}`;
  const svc = named(base);
  return {
    service: `service-${svc}`,
    external: `external-${svc}`,
    endpoints: s.endpoints.map((e) => `endpoint-${named(`${base}__${e.ip.replaceAll(':', '.')}/${e.port}`)}`),
  };
}

/** The jumps kube-proxy adds to the nat table's built-in chains. */
const IPTABLES_JUMPS: Array<[string, string[]]> = [
  ['PREROUTING', ['-m', 'comment', '--comment', 'kubernetes service portals', '-j', 'KUBE-SERVICES']],
  ['OUTPUT', ['-m', 'comment', '--comment', 'kubernetes service portals', '-j', 'KUBE-SERVICES']],
  ['POSTROUTING', ['-m', 'comment', '--comment', 'kubernetes postrouting rules', '-j', 'KUBE-POSTROUTING']],
];

const BASE_CHAINS = ['KUBE-SERVICES', 'KUBE-NODEPORTS', 'KUBE-POSTROUTING', 'KUBE-MARK-MASQ'];

/** The input of `iptables-restore --noflush` that installs `services` (kube-proxy's full sync). */
export function iptablesRestore(services: ServiceSpec[], o: KubeProxyOptions): string {
  const chains = [...BASE_CHAINS];
  const rules: string[] = [];
  for (const [chain, args] of IPTABLES_JUMPS) rules.push(`-A ${chain} ${quote(args)}`);
  rules.push(
    `-A KUBE-POSTROUTING -m mark ! --mark ${MASQ_MARK}/${MASQ_MARK} -j RETURN`,
    `-A KUBE-POSTROUTING -j MARK --xor-mark ${MASQ_MARK}`,
    `-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE`,
    `-A KUBE-MARK-MASQ -j MARK --or-mark ${MASQ_MARK}`,
  );
  for (const s of services) {
    const spn = servicePortName(s);
    const p = proto(s);
    const { svc, ext, seps } = iptablesChains(s);
    chains.push(svc, ...seps);
    const dst = `-m ${p} -p ${p} -d ${s.clusterIP} --dport ${s.port}`;
    rules.push(`-A KUBE-SERVICES -m comment --comment "${spn} cluster IP" ${dst} -j ${svc}`);
    rules.push(
      `-A ${svc} -m comment --comment "${spn} cluster IP" ${dst} ! -s ${o.clusterCIDR} -j KUBE-MARK-MASQ`,
    );
    if (s.nodePort !== undefined) {
      chains.push(ext);
      rules.push(
        `-A KUBE-NODEPORTS -m comment --comment ${spn} -m ${p} -p ${p} --dport ${s.nodePort} -j ${ext}`,
      );
      rules.push(
        `-A ${ext} -m comment --comment "masquerade traffic for ${spn} external destinations" -j KUBE-MARK-MASQ`,
      );
      rules.push(`-A ${ext} -j ${svc}`);
    }
    s.endpoints.forEach((e, i) => {
      const sep = seps[i] as string;
      const left = s.endpoints.length - i;
      // Endpoint i of n is taken with probability 1/(n-i), the last always: uniform overall.
      const pick = left > 1 ? ` -m statistic --mode random --probability ${(1 / left).toFixed(10)}` : '';
      rules.push(`-A ${svc} -m comment --comment "${spn} -> ${epText(e)}"${pick} -j ${sep}`);
      rules.push(`-A ${sep} -m comment --comment ${spn} -s ${e.ip} -j KUBE-MARK-MASQ`);
      rules.push(
        `-A ${sep} -m comment --comment ${spn} -m ${p} -p ${p} -j DNAT --to-destination ${epText(e)}`,
      );
    });
  }
  rules.push(
    `-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`,
  );
  return ['*nat', ...chains.map((c) => `:${c} - [0:0]`), ...rules, 'COMMIT', ''].join('\n');
}

function quote(args: string[]): string {
  return args.map((a) => (/\s/.test(a) ? `"${a}"` : a)).join(' ');
}

/** The `nft -f` script that installs `services` as kube-proxy's nftables mode does. */
export function nftablesScript(services: ServiceSpec[], o: KubeProxyOptions): string {
  const t = 'ip kube-proxy';
  const out = [
    `add table ${t} { comment "rules for kube-proxy" ; }`,
    `add set ${t} cluster-ips { type ipv4_addr ; comment "Active ClusterIPs" ; }`,
    `add set ${t} nodeport-ips { type ipv4_addr ; comment "IPs that accept NodePort traffic" ; }`,
    `add map ${t} service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; comment "ClusterIP, ExternalIP and LoadBalancer IP traffic" ; }`,
    `add map ${t} service-nodeports { type inet_proto . inet_service : verdict ; comment "NodePort traffic" ; }`,
    `add chain ${t} mark-for-masquerade`,
    `add chain ${t} masquerading`,
    `add chain ${t} nat-output { type nat hook output priority -100 ; }`,
    `add chain ${t} nat-postrouting { type nat hook postrouting priority 100 ; }`,
    `add chain ${t} nat-prerouting { type nat hook prerouting priority -100 ; }`,
    `add chain ${t} services`,
    `add rule ${t} mark-for-masquerade mark set mark or ${MASQ_MARK}`,
    `add rule ${t} masquerading mark and ${MASQ_MARK} == 0 return`,
    `add rule ${t} masquerading mark set mark xor ${MASQ_MARK}`,
    `add rule ${t} masquerading masquerade fully-random`,
    `add rule ${t} nat-output jump services`,
    `add rule ${t} nat-postrouting jump masquerading`,
    `add rule ${t} nat-prerouting jump services`,
    `add rule ${t} services ip daddr . meta l4proto . th dport vmap @service-ips`,
    `add rule ${t} services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports`,
  ];
  if (o.nodeIPs.length > 0) out.push(`add element ${t} nodeport-ips { ${o.nodeIPs.join(', ')} }`);
  for (const s of services) {
    const p = proto(s);
    const { service, external, endpoints } = nftablesChains(s);
    out.push(`add chain ${t} ${service}`);
    out.push(
      `add rule ${t} ${service} ip daddr ${s.clusterIP} ip saddr != ${o.clusterCIDR} jump mark-for-masquerade`,
    );
    s.endpoints.forEach((e, i) => {
      const chain = endpoints[i] as string;
      out.push(`add chain ${t} ${chain}`);
      out.push(`add rule ${t} ${chain} ip saddr ${e.ip} jump mark-for-masquerade`);
      out.push(`add rule ${t} ${chain} meta l4proto ${p} dnat to ${epText(e)}`);
    });
    const picks = endpoints.map((chain, i) => `${i} : goto ${chain}`).join(' , ');
    out.push(`add rule ${t} ${service} numgen random mod ${endpoints.length} vmap { ${picks} }`);
    out.push(`add element ${t} cluster-ips { ${s.clusterIP} }`);
    out.push(`add element ${t} service-ips { ${s.clusterIP} . ${p} . ${s.port} : goto ${service} }`);
    if (s.nodePort !== undefined) {
      out.push(`add chain ${t} ${external}`);
      out.push(`add rule ${t} ${external} jump mark-for-masquerade`);
      out.push(`add rule ${t} ${external} goto ${service}`);
      out.push(`add element ${t} service-nodeports { ${p} . ${s.nodePort} : goto ${external} }`);
    }
  }
  return `${out.join('\n')}\n`;
}

/** kube-proxy's rules in one node namespace, in one mode. */
export class KubeProxy {
  readonly nodeNs: string;
  readonly mode: KubeProxyMode;
  readonly #o: KubeProxyOptions;
  /** The KUBE-* chains the last iptables-mode apply created. */
  #chains: string[] = [];
  #installed = false;

  constructor(nodeNs: string, mode: KubeProxyMode, options: KubeProxyOptions) {
    this.nodeNs = nodeNs;
    this.mode = mode;
    this.#o = options;
  }

  /** Replaces whatever this helper installed before with the rules of `services`. */
  async apply(services: ServiceSpec[]): Promise<void> {
    await this.remove();
    this.#installed = true;
    if (this.mode === 'nftables') {
      await this.#exec('nft', ['-f', '-'], nftablesScript(services, this.#o));
      return;
    }
    this.#chains = [
      ...BASE_CHAINS,
      ...services.flatMap((s) => {
        const c = iptablesChains(s);
        return [c.svc, ...(s.nodePort !== undefined ? [c.ext] : []), ...c.seps];
      }),
    ];
    await this.#exec('iptables-nft-restore', ['--noflush'], iptablesRestore(services, this.#o));
  }

  /** Removes every rule, chain, set and map `apply` installed; nothing to do when there are none. */
  async remove(): Promise<void> {
    if (!this.#installed) return;
    if (this.mode === 'nftables') {
      await this.#exec('nft', ['-f', '-'], 'table ip kube-proxy\ndelete table ip kube-proxy\n');
    } else {
      for (const [chain, args] of IPTABLES_JUMPS) {
        // Deleted until none is left (the rule is absent when apply failed half-way).
        while ((await this.#run('iptables-nft', ['-t', 'nat', '-D', chain, ...args])).code === 0);
      }
      if (this.#chains.length > 0) {
        const flush = this.#chains.map((c) => `:${c} - [0:0]`);
        const drop = this.#chains.map((c) => `-X ${c}`);
        await this.#exec(
          'iptables-nft-restore',
          ['--noflush'],
          ['*nat', ...flush, ...drop, 'COMMIT', ''].join('\n'),
        );
      }
      // iptables-nft leaves an empty `table ip nat` behind: drop it unless someone else has rules there.
      const save = await this.#exec('iptables-nft-save', ['-t', 'nat']);
      if (!/^-A /m.test(save)) await this.#run('nft', ['delete', 'table', 'ip', 'nat']);
      this.#chains = [];
    }
    this.#installed = false;
  }

  /** What the kernel holds now: `iptables-nft-save -t nat` or `nft list table ip kube-proxy`. */
  async dump(): Promise<string> {
    return this.mode === 'nftables'
      ? this.#exec('nft', ['list', 'table', 'ip', 'kube-proxy'])
      : this.#exec('iptables-nft-save', ['-t', 'nat']);
  }

  #run(cmd: string, args: string[], input?: string) {
    return run('ip', ['netns', 'exec', this.nodeNs, cmd, ...args], input === undefined ? {} : { input });
  }

  async #exec(cmd: string, args: string[], input?: string): Promise<string> {
    const r = await this.#run(cmd, args, input);
    if (r.code !== 0)
      throw new Error(
        `${cmd} ${args.join(' ')} in ${this.nodeNs} exited ${r.code}: ${r.stderr.trim()}${input ? `\n${input}` : ''}`,
      );
    return r.stdout;
  }
}

/** Equivalent to: `ip -n NS route replace default via GW`: a node's default route, as a real node has. */
export async function defaultRoute(ns: string, via: string): Promise<void> {
  await must('ip', ['-n', ns, 'route', 'replace', 'default', 'via', via]);
}
