/**
 * `podwire arp audit --interface IF [--seconds N] [--json]`: captures ARP and neighbour discovery on
 * an interface of the namespace it runs in, asks the agent who is who (gateways, pods, node uplinks),
 * and reports every frame whose (IP, MAC) claim contradicts that, and every address two MACs claim.
 * Exit status 1 when it found any, 2 when the audit itself failed (no agent, no such interface): scripts
 * and tests can gate on it and tell the two apart.
 */

import type { NodeIdentities } from '../agent/ops/identities.js';
import type { Identity } from '../arp/audit.js';
import { auditArp } from '../arp/audit.js';
import { captureArp } from '../arp/capture.js';
import { InvalidConfigError } from '../base/errors.js';
import { Rtnetlink } from '../kernel/netlink/rtnetlink.js';
import type { CliArgs } from './args.js';
import type { Command } from './commands.js';
import { callAgent, resolveControlSocket } from './control-client.js';
import { table } from './table.js';

const DEFAULT_SECONDS = 10;
const MAX_SECONDS = 3600;

/** The identities the audit can judge by: those whose MAC is known. */
export function knownIdentities(ids: NodeIdentities): Identity[] {
  return ids.entries.flatMap((e) => (e.mac === undefined ? [] : [{ ip: e.ip, mac: e.mac, owner: e.owner }]));
}

function seconds(args: CliArgs): number {
  const text = args.values.get('--seconds');
  if (text === undefined) return DEFAULT_SECONDS;
  const n = Number(text);
  if (!Number.isFinite(n) || n <= 0 || n > MAX_SECONDS)
    throw new InvalidConfigError(
      `--seconds: ${JSON.stringify(text)} must be a number from 0 to ${MAX_SECONDS}`,
    );
  return n;
}

async function run(args: CliArgs, out: (s: string) => void): Promise<number> {
  if (args.positional[0] !== 'audit' || args.positional.length !== 1) {
    out(arpCommand.help);
    return 2;
  }
  const ifname = args.values.get('--interface');
  if (ifname === undefined) throw new InvalidConfigError('--interface: required');
  const ms = seconds(args) * 1000;
  let ifindex: number | undefined;
  {
    using nl = Rtnetlink.open();
    ifindex = nl.linkByName(ifname)?.index;
  }
  if (ifindex === undefined)
    throw new InvalidConfigError(`--interface: no interface ${ifname} in this namespace`);
  // Ask first: an agent that is down should fail the audit before the capture wastes N seconds.
  const socket = resolveControlSocket(args);
  await callAgent(socket, 'identities');
  // Promiscuous: on a bridge device, unicast replies between two ports are claims too.
  const capture = captureArp(ifindex, ms, undefined, undefined, { promiscuous: true });
  // On stderr, so that --json stays parseable: a script can start traffic once it reads this line.
  process.stderr.write(`capturing on ${ifname} for ${ms / 1000} s\n`);
  const frames = await capture;
  // Asked again after the capture: pods added meanwhile are known, not reported as strangers.
  const ids = (await callAgent(socket, 'identities')) as NodeIdentities;
  const report = auditArp(frames, knownIdentities(ids));
  if (args.json) out(`${JSON.stringify({ interface: ifname, seconds: ms / 1000, ...report }, null, 2)}\n`);
  else {
    out(
      `${ifname}: ${report.frames} ARP/ND frames in ${ms / 1000} s, ${report.violations.length} violation(s)\n`,
    );
    if (report.rows.length > 0)
      out(
        table(
          ['PROTO', 'SENDER IP', 'SENDER MAC', 'VLAN', 'FRAMES', 'VERDICT', 'KNOWN AS'],
          report.rows.map((r) => [
            r.proto.toUpperCase(),
            r.senderIp,
            r.senderMac,
            r.vlan === undefined ? '-' : String(r.vlan),
            String(r.frames),
            r.verdict,
            r.expected ? `${r.expected.owner} (${r.expected.mac})` : '-',
          ]),
        ),
      );
  }
  return report.violations.length > 0 ? 1 : 0;
}

export const arpCommand: Command = {
  summary: 'audit ARP/ND on an interface against what the cluster knows',
  help: `usage: podwire arp audit --interface IF [--seconds N] [options]

Captures ARP and IPv6 neighbour discovery (solicitations and advertisements with a link-layer
option) on IF, in the namespace the command runs in, for N seconds (default ${DEFAULT_SECONDS}). Then
judges every (IP, MAC) claim against the agent's view: gateways, pods (their MAC follows their
address), this node's uplink and, in cluster mode, every node's uplink. Verdicts:
  ok            the MAC is the known owner's
  WRONG-MAC     a known address with another MAC (a node IP with the gateway MAC: failure 2)
  SRC-MISMATCH  the Ethernet source is not the claimed sender MAC
  CONFLICT      an unknown address claimed by two or more MACs
  unknown       an address podwire does not know (another host)
Exits 0 when no claim is a violation, 1 when any is, 2 when the audit could not run (no agent, no
such interface, bad options).

options:
  --interface IF  the interface to capture on (required)
  --seconds N     capture length; default ${DEFAULT_SECONDS}
  --config FILE   the agent's configuration (finds its control socket); default /etc/podwire/agent.yaml
  --socket PATH   the control socket itself
  --json          machine-readable output
  --help          this text
`,
  run,
  errorStatus: 2,
};
