/**
 * Flow text to a structured Flow: the subset of ovs-ofctl(8) "Flow Syntax" that pipeline.ts writes
 * (`table=T,priority=P,cookie=0xC,MATCH actions=ACTIONS`), and nothing else: any other token is a
 * DecodeError naming it. Shorthands (arp, ip, ipv6, icmp, icmp6) become their eth_type / ip_proto
 * fields, and every field's prerequisites must be present; the match is ordered prerequisites first,
 * as OVS checks them (OpenFlow 1.3.5, 7.2.3.6).
 */
import { DecodeError } from '../../../base/errors.js';
import { parseIp } from '../../../base/ip.js';
import { isMac, parseMac } from '../../../base/mac.js';
import { NX_CT_F, NX_CT_RECIRC_NONE, nxmHeader, OFPP, type OfpAction } from './actions.js';
import { type Flow, OFP_DEFAULT_PRIORITY } from './flow.js';
import type { OfpInstruction } from './instructions.js';
import {
  FIELDS,
  type FieldDef,
  fieldByName,
  fieldByNxmName,
  type OxmField,
  oxm,
  prerequisiteOrder,
} from './oxm.js';

const ETH_TYPE_IP = 0x0800;
const ETH_TYPE_ARP = 0x0806;
const ETH_TYPE_IPV6 = 0x86dd;
const IPPROTO_ICMP = 1;
const IPPROTO_ICMPV6 = 58;
const IPPROTO_TCP = 6;
const IPPROTO_UDP = 17;
const IPPROTO_SCTP = 132;
/** The protocol-specific fields behind tp_src and tp_dst. */
const TRANSPORT: Record<number, string> = {
  [IPPROTO_TCP]: 'tcp',
  [IPPROTO_UDP]: 'udp',
  [IPPROTO_SCTP]: 'sctp',
};

/** Shorthands (ovs-fields(7)): the fields each stands for. */
const SHORTHANDS: Record<string, [number, number?]> = {
  ip: [ETH_TYPE_IP],
  ipv6: [ETH_TYPE_IPV6],
  arp: [ETH_TYPE_ARP],
  icmp: [ETH_TYPE_IP, IPPROTO_ICMP],
  icmp6: [ETH_TYPE_IPV6, IPPROTO_ICMPV6],
  tcp: [ETH_TYPE_IP, IPPROTO_TCP],
  tcp6: [ETH_TYPE_IPV6, IPPROTO_TCP],
  udp: [ETH_TYPE_IP, IPPROTO_UDP],
  udp6: [ETH_TYPE_IPV6, IPPROTO_UDP],
  sctp: [ETH_TYPE_IP, IPPROTO_SCTP],
  sctp6: [ETH_TYPE_IPV6, IPPROTO_SCTP],
};

/** Match names ovs-ofctl accepts for a field, beside the field's own name. */
const MATCH_ALIASES: Record<string, string> = {
  dl_src: 'eth_src',
  dl_dst: 'eth_dst',
  dl_type: 'eth_type',
  nw_proto: 'ip_proto',
  nw_src: 'ipv4_src',
  ip_src: 'ipv4_src',
  nw_dst: 'ipv4_dst',
  ip_dst: 'ipv4_dst',
};

/** Reserved port names (ovs-ofctl(8) "Port names"). */
export const PORT_NAMES: Record<string, number> = {
  IN_PORT: OFPP.IN_PORT,
  TABLE: OFPP.TABLE,
  NORMAL: OFPP.NORMAL,
  FLOOD: OFPP.FLOOD,
  ALL: OFPP.ALL,
  CONTROLLER: OFPP.CONTROLLER,
  LOCAL: OFPP.LOCAL,
};

const fail = (what: string, token: string, why: string): never => {
  throw new DecodeError(`flow text: ${what} "${token}": ${why}`);
};

/** Splits at commas outside parentheses. */
export function splitTopLevel(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '(') depth++;
    else if (c === ')') {
      depth--;
      if (depth < 0) fail('token', text, 'unbalanced ")"');
    } else if (c === ',' && depth === 0) {
      out.push(text.slice(start, i).trim());
      start = i + 1;
    }
  }
  if (depth !== 0) fail('token', text, 'unbalanced "("');
  out.push(text.slice(start).trim());
  return out.filter((t) => t !== '');
}

/** An unsigned integer in decimal or 0x hex, at most `bits` wide. */
function parseUint(text: string, bits: number, token: string): bigint {
  if (!/^(0x[0-9a-f]+|\d+)$/i.test(text)) fail('number', token, `"${text}" is not a decimal or 0x number`);
  const v = BigInt(text);
  if (v >= 1n << BigInt(bits)) fail('number', token, `${text} is wider than ${bits} bits`);
  return v;
}

function uintBytes(v: bigint, len: number): Buffer {
  const out = Buffer.alloc(len);
  for (let i = len - 1; i >= 0; i--) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

const CT_STATE_FLAGS: Record<string, number> = {
  new: 0x01,
  est: 0x02,
  rel: 0x04,
  rpl: 0x08,
  inv: 0x10,
  trk: 0x20,
  snat: 0x40,
  dnat: 0x80,
};

/** ct_state=+new+trk-est: value and mask. */
function parseCtState(text: string, token: string): [Buffer, Buffer | undefined] {
  if (!/^[+-]/.test(text)) {
    const [v, m] = text.split('/');
    return [
      uintBytes(parseUint(v ?? '', 32, token), 4),
      m === undefined ? undefined : uintBytes(parseUint(m, 32, token), 4),
    ];
  }
  let value = 0;
  let mask = 0;
  for (const m of text.matchAll(/([+-])([a-z]+)|(.)/g)) {
    const bit = m[2] === undefined ? undefined : CT_STATE_FLAGS[m[2]];
    if (bit === undefined) fail('ct_state', token, `unknown flag in "${text}"`);
    mask |= bit as number;
    if (m[1] === '+') value |= bit as number;
  }
  return [uintBytes(BigInt(value), 4), uintBytes(BigInt(mask), 4)];
}

/** A field value (no mask) of `def`'s kind. */
export function parseFieldValue(def: FieldDef, text: string, token: string): Buffer {
  switch (def.kind) {
    case 'mac':
      if (!isMac(text)) fail('MAC', token, `"${text}" is not a MAC address`);
      return parseMac(text);
    case 'ipv4':
    case 'ipv6': {
      const ip = parseIp(text);
      const family = def.kind === 'ipv4' ? 4 : 6;
      if (ip?.family !== family) fail('address', token, `"${text}" is not an IPv${family} address`);
      return uintBytes((ip as { value: bigint }).value, def.len);
    }
    case 'ct_state':
      return parseCtState(text, token)[0];
    default:
      return uintBytes(parseUint(text, def.len * 8, token), def.len);
  }
}

/** `value[/mask]` of `def`'s kind; a prefix length is accepted for addresses. */
function parseMasked(def: FieldDef, text: string, token: string): [Buffer, Buffer | undefined] {
  if (def.kind === 'ct_state') return parseCtState(text, token);
  const slash = text.indexOf('/');
  if (slash < 0) return [parseFieldValue(def, text, token), undefined];
  const value = parseFieldValue(def, text.slice(0, slash), token);
  const maskText = text.slice(slash + 1);
  if ((def.kind === 'ipv4' || def.kind === 'ipv6') && /^\d+$/.test(maskText)) {
    const bits = Number(maskText);
    if (bits > def.len * 8) fail('prefix', token, `/${bits} is longer than the address`);
    const all = (1n << BigInt(def.len * 8)) - 1n;
    return [value, uintBytes(all ^ ((1n << BigInt(def.len * 8 - bits)) - 1n), def.len)];
  }
  return [value, parseFieldValue(def, maskText, token)];
}

interface MatchState {
  fields: OxmField[];
  names: Map<string, OxmField>;
}

function put(s: MatchState, def: FieldDef, value: Buffer, mask: Buffer | undefined, token: string): void {
  if (s.names.has(def.name)) fail('match field', token, `${def.name} is given twice`);
  const f = oxm(def, value, mask);
  s.fields.push(f);
  s.names.set(def.name, f);
}

const exact = (s: MatchState, name: string): number | undefined => {
  const f = s.names.get(name);
  return f && f.mask === undefined ? f.value.readUIntBE(0, f.value.length) : undefined;
};

function matchToken(s: MatchState, token: string): void {
  const short = SHORTHANDS[token];
  if (short) {
    const [ethType, proto] = short;
    put(s, fieldByName('eth_type') as FieldDef, uintBytes(BigInt(ethType), 2), undefined, token);
    if (proto !== undefined)
      put(s, fieldByName('ip_proto') as FieldDef, uintBytes(BigInt(proto), 1), undefined, token);
    return;
  }
  const eq = token.indexOf('=');
  if (eq < 0)
    fail(
      'match token',
      token,
      'not a shorthand podwire knows (arp, ip, ipv6, icmp, icmp6, tcp, tcp6, udp, udp6, sctp, sctp6)',
    );
  let name = token.slice(0, eq);
  const text = token.slice(eq + 1);
  if (name === 'vlan_tci') {
    // OpenFlow 1.2+ has no TCI field: vlan_tci=V/M with no PCP bits is VLAN_VID (CFI = OFPVID_PRESENT).
    const [v, m] = text.split('/');
    const value = Number(parseUint(v ?? '', 16, token));
    const mask = m === undefined ? 0xffff : Number(parseUint(m, 16, token));
    if ((mask & 0xe000) !== 0)
      fail('match token', token, 'only the VID and CFI bits of vlan_tci can be matched');
    const def = fieldByName('vlan_vid') as FieldDef;
    const full = mask === 0x1fff;
    put(s, def, uintBytes(BigInt(value & mask), 2), full ? undefined : uintBytes(BigInt(mask), 2), token);
    return;
  }
  if (name === 'icmp_type' || name === 'icmp_code') {
    const which = name.slice(5);
    name = exact(s, 'eth_type') === ETH_TYPE_IPV6 ? `icmpv6_${which}` : `icmpv4_${which}`;
  }
  if (name === 'tp_src' || name === 'tp_dst') {
    // The field of the protocol matched before it (tcp, udp, sctp); none: a missing prerequisite.
    const proto = TRANSPORT[exact(s, 'ip_proto') ?? -1];
    if (proto === undefined)
      fail('match field', token, 'needs tcp, udp or sctp (or their IPv6 forms) before it');
    name = `${proto}_${name.slice(3)}`;
  }
  const def = fieldByName(MATCH_ALIASES[name] ?? name);
  if (!def) fail('match field', token, 'not a field podwire knows');
  const [value, mask] = parseMasked(def as FieldDef, text, token);
  put(s, def as FieldDef, value, mask, token);
}

/** Each field's prerequisites (ovs-fields(7)), checked against the whole match. */
function checkPrerequisites(s: MatchState, flowText: string): void {
  const ethType = exact(s, 'eth_type');
  const proto = exact(s, 'ip_proto');
  const icmp6Type = exact(s, 'icmpv6_type');
  const need = (ok: boolean, name: string, what: string) => {
    if (s.names.has(name) && !ok) fail('match field', name, `needs ${what} (in: ${flowText})`);
  };
  for (const n of ['arp_op', 'arp_spa', 'arp_tpa', 'arp_sha', 'arp_tha'])
    need(ethType === ETH_TYPE_ARP, n, 'arp');
  for (const n of ['ipv4_src', 'ipv4_dst']) need(ethType === ETH_TYPE_IP, n, 'ip');
  for (const n of ['ipv6_src', 'ipv6_dst']) need(ethType === ETH_TYPE_IPV6, n, 'ipv6');
  need(ethType === ETH_TYPE_IP || ethType === ETH_TYPE_IPV6, 'ip_proto', 'ip or ipv6');
  for (const n of ['icmpv4_type', 'icmpv4_code'])
    need(ethType === ETH_TYPE_IP && proto === IPPROTO_ICMP, n, 'icmp');
  for (const n of ['icmpv6_type', 'icmpv6_code'])
    need(ethType === ETH_TYPE_IPV6 && proto === IPPROTO_ICMPV6, n, 'icmp6');
  const isIp = ethType === ETH_TYPE_IP || ethType === ETH_TYPE_IPV6;
  for (const [p, n] of Object.entries(TRANSPORT)) {
    for (const f of [`${n}_src`, `${n}_dst`]) need(isIp && proto === Number(p), f, `${n} or ${n}6`);
  }
  const nd = exact(s, 'icmpv6_code') === 0;
  need(nd && (icmp6Type === 135 || icmp6Type === 136), 'nd_target', 'icmp6,icmp_type=135 or 136,icmp_code=0');
  need(nd && icmp6Type === 135, 'nd_sll', 'icmp6,icmp_type=135,icmp_code=0');
  need(nd && icmp6Type === 136, 'nd_tll', 'icmp6,icmp_type=136,icmp_code=0');
}

function portNumber(text: string, token: string): number {
  const named = PORT_NAMES[text.toUpperCase()];
  if (named !== undefined) return named;
  return Number(parseUint(text, 32, token));
}

/** `NAME[]`, `NAME[a]`, `NAME[a..b]` of move: the field's header, offset and width. */
function parseSubfield(text: string, token: string): { header: number; ofs: number; nBits: number } {
  const m = /^([A-Za-z0-9_]+)\[(?:(\d+)(?:\.\.(\d+))?)?\]$/.exec(text);
  if (!m) fail('move', token, `"${text}" is not FIELD[], FIELD[N] or FIELD[A..B]`);
  const [, name, a, b] = m as RegExpExecArray;
  // OVS writes move's fields with their NXM header where one exists (nx_put_header, version 0).
  const def =
    fieldByNxmName(name as string) ??
    FIELDS.find((f) => f.name === name && f.nxmName !== undefined) ??
    fieldByName(name as string);
  if (!def) fail('move', token, `unknown field ${name}`);
  const d = def as FieldDef;
  const width = d.len * 8;
  const lo = a === undefined ? 0 : Number(a);
  const hi = a === undefined ? width - 1 : b === undefined ? lo : Number(b);
  if (hi < lo || hi >= width) fail('move', token, `bits ${lo}..${hi} are outside ${name}'s ${width}`);
  return { header: nxmHeader(d.oxmClass, d.field, d.len), ofs: lo, nBits: hi - lo + 1 };
}

function parseCt(args: string, token: string): OfpAction {
  const ct: Extract<OfpAction, { type: 'ct' }> = {
    type: 'ct',
    flags: 0,
    zoneSrc: 0,
    zone: 0,
    recircTable: NX_CT_RECIRC_NONE,
    alg: 0,
    actions: [],
  };
  for (const arg of splitTopLevel(args)) {
    const m = /^(\w+)(?:=(.*)|\((.*)\))?$/s.exec(arg);
    const key = m?.[1];
    if (key === 'commit' && m?.[2] === undefined) ct.flags |= NX_CT_F.COMMIT;
    else if (key === 'force' && m?.[2] === undefined) ct.flags |= NX_CT_F.FORCE;
    else if (key === 'zone' && m?.[2] !== undefined) ct.zone = Number(parseUint(m[2], 16, token));
    else if (key === 'table' && m?.[2] !== undefined) ct.recircTable = Number(parseUint(m[2], 8, token));
    else if (key === 'exec' && m?.[3] !== undefined) ct.actions = parseActionList(m[3]);
    else
      fail(
        'ct argument',
        arg,
        `not one podwire knows (commit, force, zone=N, table=N, exec(...)) in ${token}`,
      );
  }
  return ct;
}

function parseAction(token: string): OfpAction {
  const named = PORT_NAMES[token];
  if (named !== undefined) return { type: 'output', port: named, maxLen: 0 };
  if (/^\d+$/.test(token)) return { type: 'output', port: portNumber(token, token), maxLen: 0 };
  if (token.startsWith('output:')) {
    const port = portNumber(token.slice(7), token);
    return { type: 'output', port, maxLen: port === OFPP.CONTROLLER ? 0xffff : 0 };
  }
  if (token === 'pop_vlan') return { type: 'pop_vlan' };
  if (token.startsWith('push_vlan:')) {
    return { type: 'push_vlan', ethertype: Number(parseUint(token.slice(10), 16, token)) };
  }
  if (token.startsWith('set_field:')) {
    const arrow = token.lastIndexOf('->');
    if (arrow < 0) fail('action', token, 'set_field needs VALUE->FIELD');
    const name = token.slice(arrow + 2);
    const def = fieldByName(name);
    if (!def) fail('set_field', token, `unknown field ${name}`);
    const text = token.slice(10, arrow);
    if (text.includes('/'))
      fail('set_field', token, 'a masked set_field is not OFPAT_SET_FIELD in OpenFlow 1.3');
    return { type: 'set_field', field: oxm(def as FieldDef, parseFieldValue(def as FieldDef, text, token)) };
  }
  if (token.startsWith('move:')) {
    const arrow = token.indexOf('->');
    if (arrow < 0) fail('action', token, 'move needs SRC[..]->DST[..]');
    const src = parseSubfield(token.slice(5, arrow), token);
    const dst = parseSubfield(token.slice(arrow + 2), token);
    if (src.nBits !== dst.nBits)
      fail('move', token, `source has ${src.nBits} bits, destination ${dst.nBits}`);
    return {
      type: 'reg_move',
      nBits: src.nBits,
      srcOfs: src.ofs,
      dstOfs: dst.ofs,
      src: src.header,
      dst: dst.header,
    };
  }
  const conj = /^conjunction\((\d+),(\d+)\/(\d+)\)$/.exec(token);
  if (conj) {
    const [, id, k, n] = conj as unknown as [string, string, string, string];
    const clause = Number(k);
    const nClauses = Number(n);
    if (nClauses < 2 || nClauses > 64 || clause < 1 || clause > nClauses)
      fail('conjunction', token, 'needs 1 <= K <= N and 2 <= N <= 64');
    return { type: 'conjunction', id: Number(parseUint(id, 32, token)), clause, nClauses };
  }
  const ct = /^ct\((.*)\)$/s.exec(token);
  if (ct) return parseCt(ct[1] as string, token);
  if (token === 'ct') return parseCt('', token);
  return fail('action', token, 'not an action podwire knows');
}

/** A comma-separated action list (no goto_table), as in ct's exec(...). */
function parseActionList(text: string): OfpAction[] {
  return splitTopLevel(text).map(parseAction);
}

/** `actions=` text: actions then an optional goto_table:N last; `drop` alone is no instruction. */
export function parseInstructions(text: string): OfpInstruction[] {
  const tokens = splitTopLevel(text);
  if (tokens.length === 1 && tokens[0] === 'drop') return [];
  if (tokens.length === 0) fail('actions', text, 'empty (write drop)');
  const actions: OfpAction[] = [];
  let gotoTable: number | undefined;
  for (const token of tokens) {
    if (gotoTable !== undefined) fail('action', token, 'comes after goto_table, which must be last');
    if (token === 'drop') fail('action', token, 'drop must be the only action');
    if (token.startsWith('goto_table:')) gotoTable = Number(parseUint(token.slice(11), 8, token));
    else actions.push(parseAction(token));
  }
  const out: OfpInstruction[] = [];
  if (actions.length > 0) out.push({ type: 'apply_actions', actions });
  if (gotoTable !== undefined) out.push({ type: 'goto_table', table: gotoTable });
  return out;
}

/** Parses one flow in add-flow syntax, as pipeline.ts writes it. Equivalent to: `ovs-ofctl parse-flow FLOW`. */
export function parseFlowText(text: string): Flow {
  const at = text.indexOf(' actions=');
  const actionsAt = at >= 0 ? at + 1 : text.startsWith('actions=') ? 0 : -1;
  if (actionsAt < 0) throw new DecodeError(`flow text: no " actions=" in "${text}"`);
  const flow: Flow = { table: 0, priority: OFP_DEFAULT_PRIORITY, cookie: 0n, match: [], instructions: [] };
  const s: MatchState = { fields: [], names: new Map() };
  for (const token of splitTopLevel(text.slice(0, actionsAt))) {
    const eq = token.indexOf('=');
    const key = eq < 0 ? token : token.slice(0, eq);
    const value = token.slice(eq + 1);
    if (key === 'table' && eq > 0) flow.table = Number(parseUint(value, 8, token));
    else if (key === 'priority' && eq > 0) flow.priority = Number(parseUint(value, 16, token));
    else if (key === 'cookie' && eq > 0) flow.cookie = parseUint(value, 64, token);
    else matchToken(s, token);
  }
  checkPrerequisites(s, text);
  flow.match = prerequisiteOrder(s.fields);
  flow.instructions = parseInstructions(text.slice(actionsAt + 'actions='.length).trim());
  return flow;
}
