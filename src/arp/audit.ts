/**
 * The ARP audit: given ARP frames seen on a wire and the identities podwire knows (which MAC owns
 * which IPv4 address: pods, gateways, nodes' uplinks), finds every frame that would teach a neighbour
 * a wrong mapping (DESIGN.md, failure 2: a node's IP announced with the gateway's MAC).
 */
import { type ArpFrame, decodeArpFrame } from './arp-frame.js';

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
  /** The Ethernet source differs from the ARP sender MAC (a forged or proxied frame). */
  | 'SRC-MISMATCH'
  /** Nobody podwire knows owns the sender IP (another host, or 0.0.0.0 of a probe). */
  | 'unknown';

export interface AuditRow {
  senderIp: string;
  senderMac: string;
  frames: number;
  verdict: Verdict;
  /** The known owner of the sender IP, when there is one. */
  expected?: Identity;
}

export interface AuditReport {
  frames: number;
  undecodable: number;
  rows: AuditRow[];
  /** Rows whose verdict is a violation (WRONG-MAC or SRC-MISMATCH). */
  violations: AuditRow[];
}

function judge(
  frame: ArpFrame,
  known: ReadonlyMap<string, Identity>,
): Pick<AuditRow, 'verdict' | 'expected'> {
  const { sha, spa } = frame.arp;
  if (frame.src !== sha) return { verdict: 'SRC-MISMATCH', ...withExpected(known.get(spa)) };
  const id = known.get(spa);
  if (!id) return { verdict: 'unknown' };
  return { verdict: id.mac === sha ? 'ok' : 'WRONG-MAC', expected: id };
}

function withExpected(id: Identity | undefined): { expected?: Identity } {
  return id ? { expected: id } : {};
}

export function auditArp(frames: readonly Buffer[], identities: readonly Identity[]): AuditReport {
  const known = new Map(identities.map((i) => [i.ip, { ...i, mac: i.mac.toLowerCase() }]));
  const rows = new Map<string, AuditRow>();
  let undecodable = 0;
  for (const bytes of frames) {
    let frame: ArpFrame;
    try {
      frame = decodeArpFrame(bytes);
    } catch {
      undecodable++; // not an Ethernet/IPv4 ARP frame: counted, not judged
      continue;
    }
    const j = judge(frame, known);
    const key = `${frame.arp.spa} ${frame.arp.sha} ${j.verdict}`;
    const row = rows.get(key);
    if (row) row.frames++;
    else rows.set(key, { senderIp: frame.arp.spa, senderMac: frame.arp.sha, frames: 1, ...j });
  }
  const all = [...rows.values()].sort((a, b) =>
    a.senderIp.localeCompare(b.senderIp, 'en', { numeric: true }),
  );
  return {
    frames: frames.length,
    undecodable,
    rows: all,
    violations: all.filter((r) => r.verdict === 'WRONG-MAC' || r.verdict === 'SRC-MISMATCH'),
  };
}
