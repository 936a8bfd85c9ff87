/**
 * The neighbour audit: given ARP and neighbour-discovery frames seen on a wire and the identities
 * podwire knows (which MAC owns which address: pods, gateways, nodes' uplinks), finds every frame that
 * would teach a neighbour a wrong mapping (docs/architecture.md, failure 2: a node's IP announced with the
 * gateway's MAC), and every address that two MACs claim during the capture.
 */
import { decodeClaim, type NeighbourClaim } from './neighbour-claim.js';

export interface Identity {
  ip: string;
  mac: string;
  /** What owns it, for the report: "node node-1 uplink", "gateway", "pod web/frontend-1". */
  owner: string;
}

export type Verdict =
  /** Sender IP and MAC agree with what podwire knows. */
  | 'ok'
  /** The sender MAC is not the known owner's of that IP: neighbours would learn a wrong mapping. */
  | 'WRONG-MAC'
  /** The Ethernet source differs from the claimed sender MAC (a forged or proxied frame). */
  | 'SRC-MISMATCH'
  /** An address nobody podwire knows owns, claimed by two or more MACs during the capture. */
  | 'CONFLICT'
  /** Nobody podwire knows owns the sender IP (another host, or 0.0.0.0 of a probe). */
  | 'unknown';

export const VIOLATIONS: ReadonlySet<Verdict> = new Set(['WRONG-MAC', 'SRC-MISMATCH', 'CONFLICT']);

export interface AuditRow {
  proto: 'arp' | 'nd';
  senderIp: string;
  senderMac: string;
  frames: number;
  verdict: Verdict;
  /** The known owner of the sender IP, when there is one. */
  expected?: Identity;
  /** The 802.1Q VLAN the frames carried, when tagged. */
  vlan?: number;
}

export interface AuditReport {
  frames: number;
  /** Frames that claim no mapping (not ARP, not NS/NA with a link-layer option, or malformed). */
  undecodable: number;
  rows: AuditRow[];
  /** Rows whose verdict is a violation (WRONG-MAC, SRC-MISMATCH or CONFLICT). */
  violations: AuditRow[];
}

/** Addresses that claim nothing about a host: ARP probes (0.0.0.0). DAD (::) is never a claim. */
const UNSPECIFIED = new Set(['0.0.0.0', '::']);

function judge(
  c: NeighbourClaim,
  known: ReadonlyMap<string, Identity>,
): Pick<AuditRow, 'verdict' | 'expected'> {
  const id = known.get(c.senderIp);
  if (c.src !== c.senderMac) return { verdict: 'SRC-MISMATCH', ...(id ? { expected: id } : {}) };
  if (!id) return { verdict: 'unknown' };
  return { verdict: id.mac === c.senderMac ? 'ok' : 'WRONG-MAC', expected: id };
}

export function auditArp(frames: readonly Buffer[], identities: readonly Identity[]): AuditReport {
  const known = new Map(identities.map((i) => [i.ip, { ...i, mac: i.mac.toLowerCase() }]));
  const rows = new Map<string, AuditRow>();
  let undecodable = 0;
  for (const bytes of frames) {
    let claim: NeighbourClaim | undefined;
    try {
      claim = decodeClaim(bytes);
    } catch {
      claim = undefined; // a truncated or non-Ethernet ARP frame: counted below, not judged
    }
    if (claim === undefined) {
      undecodable++;
      continue;
    }
    const j = judge(claim, known);
    const key = `${claim.senderIp} ${claim.senderMac} ${j.verdict} ${claim.vlan ?? ''}`;
    const row = rows.get(key);
    if (row) row.frames++;
    else
      rows.set(key, {
        proto: claim.proto,
        senderIp: claim.senderIp,
        senderMac: claim.senderMac,
        frames: 1,
        ...j,
        ...(claim.vlan === undefined ? {} : { vlan: claim.vlan }),
      });
  }
  markConflicts([...rows.values()]);
  const all = [...rows.values()].sort(
    (a, b) =>
      a.senderIp.localeCompare(b.senderIp, 'en', { numeric: true }) || a.senderMac.localeCompare(b.senderMac),
  );
  return {
    frames: frames.length,
    undecodable,
    rows: all,
    violations: all.filter((r) => VIOLATIONS.has(r.verdict)),
  };
}

/**
 * Two MACs claiming one unknown address (in one VLAN) make each other's claims suspect: neighbours
 * flap between them. For a known address the wrong MAC is already WRONG-MAC.
 */
function markConflicts(rows: AuditRow[]): void {
  const macs = new Map<string, Set<string>>();
  for (const r of rows) {
    if (UNSPECIFIED.has(r.senderIp)) continue;
    const key = `${r.senderIp} ${r.vlan ?? ''}`;
    const set = macs.get(key) ?? new Set<string>();
    set.add(r.senderMac);
    macs.set(key, set);
  }
  for (const r of rows) {
    if (r.verdict !== 'unknown') continue;
    if ((macs.get(`${r.senderIp} ${r.vlan ?? ''}`)?.size ?? 0) > 1) r.verdict = 'CONFLICT';
  }
}
