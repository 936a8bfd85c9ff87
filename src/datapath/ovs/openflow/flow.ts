/**
 * A flow as OpenFlow carries it: the identity of a flow entry (table, priority, match) with its cookie
 * and instructions. What the text parser produces (flow-parse.ts), what FLOW_MOD encodes
 * (flow-mod.ts) and what a flow stats reply decodes to (flow-stats.ts).
 */
import type { OfpInstruction } from './instructions.js';
import type { OxmField } from './oxm.js';

export interface Flow {
  table: number;
  priority: number;
  cookie: bigint;
  /** OXM TLVs, prerequisites first. */
  match: OxmField[];
  /** No instruction: the flow drops. */
  instructions: OfpInstruction[];
}

/** OpenFlow's default priority (OFP_DEFAULT_PRIORITY). */
export const OFP_DEFAULT_PRIORITY = 0x8000;
