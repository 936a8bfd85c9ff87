/**
 * A canonical key for a flow, under which a flow podwire wants (parsed from text) and the same flow
 * read back from the switch (a flow stats reply) are equal, and the diff of two flow sets by key:
 * what CHECK compares and what a native replace-flows deletes and adds.
 *
 * How OVS normalises a flow between FLOW_MOD and flow stats, and what the key does about it:
 * - match order: OVS stores a match as a struct, not a TLV list, and writes it back in its own order
 *   (nx_put_raw): the key sorts fields by (class, field);
 * - masks: a field with an all-ones mask comes back unmasked, one with an all-zero mask is not
 *   there, and a masked value comes back with the bits outside the mask cleared: the key applies the
 *   mask to the value and drops all-ones and all-zero masks (normalizeOxm);
 * - NXM and OXM forms of one field (NXM_OF_ETH_SRC and OXM ETH_SRC, NXM_NX_IPV6_SRC and IPV6_SRC):
 *   OVS keeps which field it is, not which header named it: the key names a field by its OVS name;
 * - vlan_tci=0x1000/0x1000 is VLAN_VID 0x1000/0x1000 on the wire in OpenFlow 1.2+ both ways
 *   (OFPVID_PRESENT stands for the CFI bit); the parser already writes it so;
 * - drop: a flow without actions has no instruction, or an empty apply-actions: both are `drop`;
 * - instruction order: OVS executes apply-actions before goto_table whatever the order on the wire
 *   and writes them in that order: the key does too;
 * - output max_len is kept by OVS as sent, but only means something for CONTROLLER: the key ignores
 *   it elsewhere;
 * - ct: the nested actions and their length are re-encoded by OVS; the key compares ct by its
 *   fields (flags, zone, table, alg) and its nested actions' keys, not by bytes;
 * - set_field to a register stays OFPAT_SET_FIELD with NXM_NX_REGn (OVS remembers that it came as
 *   set_field, not reg_load, and encodes it back the same way).
 */

import type { Flow } from './flow.js';
import { formatInstructions } from './flow-format.js';
import type { OfpInstruction } from './instructions.js';
import { FIELDS, fieldDef, normalizeOxm, type OxmField } from './oxm.js';

/** One match field's key: `name=hexvalue[/hexmask]`, with its sort position. */
function fieldKey(f: OxmField): { order: number; text: string } {
  const def = fieldDef(f.oxmClass, f.field);
  const preferred = def ? FIELDS.find((d) => d.name === def.name) : undefined;
  const name = preferred?.name ?? `oxm(0x${f.oxmClass.toString(16)}:${f.field}:${f.experimenter ?? ''})`;
  const cls = preferred?.oxmClass ?? f.oxmClass;
  const field = preferred?.field ?? f.field;
  const mask = f.mask ? `/${f.mask.toString('hex')}` : '';
  return { order: cls * 128 + field, text: `${name}=${f.value.toString('hex')}${mask}` };
}

/** The match's key: normalised fields sorted by (class, field). */
export function matchKey(match: readonly OxmField[]): string {
  return match
    .map(normalizeOxm)
    .filter((f): f is OxmField => f !== null)
    .map(fieldKey)
    .sort((a, b) => a.order - b.order || (a.text < b.text ? -1 : a.text > b.text ? 1 : 0))
    .map((k) => k.text)
    .join(',');
}

/** OVS's execution order of instruction types: meter, apply, clear, write-actions, write-metadata, goto. */
const INSTRUCTION_ORDER: Record<string, number> = { apply_actions: 1, goto_table: 5, raw: 3 };

/** The instructions in OVS's order, an empty apply-actions dropped. */
export function canonicalInstructions(list: readonly OfpInstruction[]): OfpInstruction[] {
  return list
    .filter((i) => !(i.type === 'apply_actions' && i.actions.length === 0))
    .map((i, n) => ({ i, n }))
    .sort((a, b) => (INSTRUCTION_ORDER[a.i.type] ?? 3) - (INSTRUCTION_ORDER[b.i.type] ?? 3) || a.n - b.n)
    .map(({ i }) => i);
}

/** The key of a flow: table, priority, cookie, match, instructions (statistics aside). */
export function flowKey(flow: Flow): string {
  const head = `table=${flow.table},priority=${flow.priority},cookie=0x${flow.cookie.toString(16)}`;
  return `${head},${matchKey(flow.match)} actions=${formatInstructions(canonicalInstructions(flow.instructions))}`;
}

/** The identity of a flow entry in the switch (what DELETE_STRICT names): table, priority, match. */
export function flowIdentityKey(flow: Pick<Flow, 'table' | 'priority' | 'match'>): string {
  return `table=${flow.table},priority=${flow.priority},${matchKey(flow.match)}`;
}

export interface FlowSetDiff<W extends Flow, H extends Flow> {
  /** Wanted, not in the switch: to add. */
  missing: W[];
  /** In the switch, not wanted: to delete (DELETE_STRICT) before the adds. */
  unexpected: H[];
}

/**
 * The flows only in `want` and only in `have`, by flowKey; both empty: the switch holds exactly the
 * wanted flows. Like flow-text.ts's diffFlows, on decoded flows. A flow whose actions changed is in
 * both lists (same identity, different key).
 */
export function diffFlowSets<W extends Flow, H extends Flow>(
  want: readonly W[],
  have: readonly H[],
): FlowSetDiff<W, H> {
  const w = new Map(want.map((f) => [flowKey(f), f]));
  const h = new Map(have.map((f) => [flowKey(f), f]));
  return {
    missing: [...w].filter(([k]) => !h.has(k)).map(([, f]) => f),
    unexpected: [...h].filter(([k]) => !w.has(k)).map(([, f]) => f),
  };
}
