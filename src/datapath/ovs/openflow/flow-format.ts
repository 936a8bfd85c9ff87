/**
 * A Flow back to text in ovs-ofctl's flow syntax (`table=T,priority=P,cookie=0xC,MATCH
 * actions=ACTIONS`), for messages and the `podwire flows` report. The text parses back
 * (flow-parse.ts) to a flow with the same key (flow-key.ts), for every flow podwire writes.
 */
import { formatIpBytes } from '../../../base/ip.js';
import { formatMac } from '../../../base/mac.js';
import type { FlowEntry } from '../flow-text.js';
import { NX_CT_F, NX_CT_RECIRC_NONE, OFPP, type OfpAction } from './actions.js';
import type { Flow } from './flow.js';
import type { FlowStats } from './flow-stats.js';
import type { OfpInstruction } from './instructions.js';
import { FIELDS, type FieldDef, fieldByName, fieldDef, type OxmField } from './oxm.js';

const hex = (b: Buffer) => b.toString('hex');

function uint(b: Buffer): bigint {
  return b.length === 0 ? 0n : BigInt(`0x${hex(b)}`);
}

/** The shorthands of the transport protocols (IPv4; the IPv6 ones add "6"). */
const TRANSPORT_SHORTHAND: Record<number, string> = { 6: 'tcp', 17: 'udp', 132: 'sctp' };

const CT_STATE_NAMES = ['new', 'est', 'rel', 'rpl', 'inv', 'trk', 'snat', 'dnat'];

/** A value of `def`'s kind as ovs-ofctl writes it. */
export function formatFieldValue(def: FieldDef, value: Buffer): string {
  switch (def.kind) {
    case 'mac':
      return formatMac(value);
    case 'ipv4':
    case 'ipv6':
      return formatIpBytes(value);
    case 'dec':
      return uint(value).toString();
    case 'ct_state':
    case 'hex': {
      const v = uint(value);
      return v === 0n ? '0' : `0x${v.toString(16)}`;
    }
  }
}

function formatCtState(value: Buffer, mask: Buffer | undefined): string {
  const v = Number(uint(value));
  const m = mask === undefined ? 0xffffffff : Number(uint(mask));
  if ((m & ~0xff) !== 0 && mask !== undefined) return `0x${v.toString(16)}/0x${m.toString(16)}`;
  const flags = CT_STATE_NAMES.map((name, i) =>
    (m >> i) & 1 ? `${(v >> i) & 1 ? '+' : '-'}${name}` : '',
  ).join('');
  return flags === '' ? '0' : flags;
}

/** One match field as `name=value[/mask]`. */
export function formatMatchField(f: OxmField): string {
  const def = fieldDef(f.oxmClass, f.field);
  if (!def || f.experimenter !== undefined) {
    const exp = f.experimenter === undefined ? '' : `:0x${f.experimenter.toString(16)}`;
    return `oxm(0x${f.oxmClass.toString(16)}:${f.field}${exp})=0x${hex(f.value)}${f.mask ? `/0x${hex(f.mask)}` : ''}`;
  }
  if (def.kind === 'ct_state') return `ct_state=${formatCtState(f.value, f.mask)}`;
  if (def.name === 'vlan_vid') {
    // What OVS prints for a VLAN_VID match: the TCI with OFPVID_PRESENT as the CFI bit.
    const v = f.value.readUInt16BE(0);
    const m = f.mask ? f.mask.readUInt16BE(0) : 0x1fff;
    return `vlan_tci=0x${v.toString(16).padStart(4, '0')}/0x${m.toString(16).padStart(4, '0')}`;
  }
  const value = formatFieldValue(def, f.value);
  if (f.mask && (def.kind === 'ipv4' || def.kind === 'ipv6')) {
    // A prefix mask as its length, as ovs-ofctl prints it; any other mask as an address.
    const m = uint(f.mask);
    const bits = f.mask.length * 8;
    const ones = m.toString(2).replace(/0+$/, '');
    const len = m === 0n ? 0 : ones.length;
    const prefix = m === 0n || (/^1+$/.test(ones) && m.toString(2).length === bits);
    return `${def.matchName}=${value}/${prefix ? len : formatFieldValue(def, f.mask)}`;
  }
  if (f.mask && def.kind === 'dec') {
    // A masked number: both in hex (tp_dst=0x3e8/0xfff8).
    return `${def.matchName}=0x${uint(f.value).toString(16)}/0x${uint(f.mask).toString(16)}`;
  }
  return `${def.matchName}=${value}${f.mask ? `/${formatFieldValue(def, f.mask)}` : ''}`;
}

const exactUint = (match: readonly OxmField[], name: string): number | undefined => {
  const d = fieldByName(name);
  const f = match.find((x) => d && x.oxmClass === d.oxmClass && x.field === d.field && !x.mask);
  return f ? Number(uint(f.value)) : undefined;
};

/** The match as ovs-ofctl writes it: a shorthand (arp, ip, icmp6, ...) for eth_type and ip_proto. */
export function formatMatch(match: readonly OxmField[]): string[] {
  const ethType = exactUint(match, 'eth_type');
  const proto = exactUint(match, 'ip_proto');
  const l4 = proto === undefined ? undefined : TRANSPORT_SHORTHAND[proto];
  const shorthand =
    ethType === 0x0806
      ? ['arp']
      : ethType === 0x0800
        ? proto === 1
          ? ['icmp', 'ip_proto']
          : l4 !== undefined
            ? [l4, 'ip_proto']
            : ['ip']
        : ethType === 0x86dd
          ? proto === 58
            ? ['icmp6', 'ip_proto']
            : l4 !== undefined
              ? [`${l4}6`, 'ip_proto']
              : ['ipv6']
          : [];
  const hidden = new Set(shorthand.length > 0 ? ['eth_type', ...shorthand.slice(1)] : []);
  const rest = match.filter((f) => {
    const def = fieldDef(f.oxmClass, f.field);
    return !(def && hidden.has(def.name) && !f.mask);
  });
  return [...shorthand.slice(0, 1), ...rest.map(formatMatchField)];
}

const PORTS = new Map<number, string>([
  [OFPP.IN_PORT, 'IN_PORT'],
  [OFPP.TABLE, 'TABLE'],
  [OFPP.NORMAL, 'NORMAL'],
  [OFPP.FLOOD, 'FLOOD'],
  [OFPP.ALL, 'ALL'],
  [OFPP.LOCAL, 'LOCAL'],
]);

/** The name move:...[] uses for a field header: its NXM name (as OVS prints), else its OVS name. */
function subfieldName(header: number): string {
  const def = fieldDef(header >>> 16, (header >>> 9) & 0x7f);
  if (!def) return `oxm(0x${(header >>> 16).toString(16)}:${(header >>> 9) & 0x7f})`;
  const nxm = FIELDS.find((d) => d.name === def.name && d.nxmName !== undefined);
  return nxm?.nxmName ?? def.name;
}

function subfield(header: number, ofs: number, nBits: number): string {
  const def = fieldDef(header >>> 16, (header >>> 9) & 0x7f);
  const name = subfieldName(header);
  if (def && ofs === 0 && nBits === def.len * 8) return `${name}[]`;
  return nBits === 1 ? `${name}[${ofs}]` : `${name}[${ofs}..${ofs + nBits - 1}]`;
}

/** One action as ovs-ofctl writes it. */
export function formatAction(a: OfpAction): string {
  switch (a.type) {
    case 'output':
      // max_len only means something for CONTROLLER (OpenFlow 1.3.5, 7.2.5.1).
      if (a.port === OFPP.CONTROLLER) return `CONTROLLER:${a.maxLen}`;
      return PORTS.get(a.port) ?? `output:${a.port}`;
    case 'set_field': {
      const def = fieldDef(a.field.oxmClass, a.field.field);
      if (!def || a.field.mask) return `set_field:${formatMatchField(a.field)}`;
      return `set_field:${formatFieldValue(def, a.field.value)}->${def.name}`;
    }
    case 'push_vlan':
      return `push_vlan:0x${a.ethertype.toString(16)}`;
    case 'pop_vlan':
      return 'pop_vlan';
    case 'reg_move':
      return `move:${subfield(a.src, a.srcOfs, a.nBits)}->${subfield(a.dst, a.dstOfs, a.nBits)}`;
    case 'ct': {
      const args: string[] = [];
      if (a.flags & NX_CT_F.COMMIT) args.push('commit');
      if (a.flags & NX_CT_F.FORCE) args.push('force');
      const otherFlags = a.flags & ~(NX_CT_F.COMMIT | NX_CT_F.FORCE);
      if (otherFlags) args.push(`flags=0x${otherFlags.toString(16)}`);
      if (a.recircTable !== NX_CT_RECIRC_NONE) args.push(`table=${a.recircTable}`);
      if (a.zoneSrc === 0) {
        if (a.zone !== 0) args.push(`zone=${a.zone}`);
      } else {
        args.push(`zone=${subfield(a.zoneSrc, a.zone >> 6, (a.zone & 0x3f) + 1)}`);
      }
      if (a.actions.length > 0) args.push(`exec(${a.actions.map(formatAction).join(',')})`);
      if (a.alg !== 0) args.push(`alg=${a.alg}`);
      return `ct(${args.join(',')})`;
    }
    case 'conjunction':
      return `conjunction(${a.id},${a.clause}/${a.nClauses})`;
    case 'raw':
      return `raw(type=0x${a.actionType.toString(16)},0x${hex(a.body)})`;
  }
}

/** Instructions as the `actions=` text: apply-actions, then goto_table; none is `drop`. */
export function formatInstructions(list: readonly OfpInstruction[]): string {
  const parts: string[] = [];
  for (const i of list) {
    if (i.type === 'apply_actions') parts.push(...i.actions.map(formatAction));
    else if (i.type === 'goto_table') parts.push(`goto_table:${i.table}`);
    else parts.push(`instruction(type=${i.instructionType},0x${hex(i.body)})`);
  }
  return parts.length === 0 ? 'drop' : parts.join(',');
}

/** Equivalent to one line of `ovs-ofctl dump-flows` without statistics, in add-flow syntax. */
export function formatFlow(flow: Flow): string {
  const match = formatMatch(flow.match);
  const head = [
    `table=${flow.table}`,
    `priority=${flow.priority}`,
    `cookie=0x${flow.cookie.toString(16)}`,
    ...match,
  ];
  return `${head.join(',')} actions=${formatInstructions(flow.instructions)}`;
}

/**
 * A flow stats entry as flow-text.ts's FlowEntry, what `podwire flows` shows: equivalent to one line
 * of `ovs-ofctl dump-flows` parsed by parseDump (counters past 2^53 lose precision, as there).
 */
export function toFlowEntry(s: FlowStats): FlowEntry {
  return {
    table: s.table,
    priority: s.priority,
    cookie: s.cookie,
    match: formatMatch(s.match),
    actions: formatInstructions(s.instructions),
    packets: Number(s.packetCount),
    bytes: Number(s.byteCount),
  };
}
