/**
 * Instructions (OpenFlow 1.3.5, 7.2.4 "Flow Instruction Structures"): what a flow does, a list of
 * TLVs (type, length, body; multiples of 8). podwire uses two: apply the actions now, then go to a
 * table (`actions=...,goto_table:N`). A flow with no instruction drops (`actions=drop`).
 */
import { decodeActions, encodeActions, type OfpAction } from './actions.js';
import { CodecReader } from './codec-reader.js';

/** enum ofp_instruction_type. */
export const OFPIT = {
  GOTO_TABLE: 1,
  WRITE_METADATA: 2,
  WRITE_ACTIONS: 3,
  APPLY_ACTIONS: 4,
  CLEAR_ACTIONS: 5,
  METER: 6,
  EXPERIMENTER: 0xffff,
} as const;

export type OfpInstruction =
  /** ofp_instruction_goto_table: `goto_table:N`. */
  | { type: 'goto_table'; table: number }
  /** ofp_instruction_actions with OFPIT_APPLY_ACTIONS: the actions before goto_table. */
  | { type: 'apply_actions'; actions: OfpAction[] }
  /** Any other instruction, kept as its type and body (after type and length). */
  | { type: 'raw'; instructionType: number; body: Buffer };

/** One instruction in its wire form. */
export function encodeInstruction(i: OfpInstruction): Buffer {
  let type: number;
  let body: Buffer;
  switch (i.type) {
    case 'goto_table':
      // table_id, pad[3].
      type = OFPIT.GOTO_TABLE;
      body = Buffer.alloc(4);
      body.writeUInt8(i.table, 0);
      break;
    case 'apply_actions':
      // pad[4], actions.
      type = OFPIT.APPLY_ACTIONS;
      body = Buffer.concat([Buffer.alloc(4), encodeActions(i.actions)]);
      break;
    case 'raw':
      type = i.instructionType;
      body = i.body;
      if ((4 + body.length) % 8 !== 0)
        throw new RangeError('a raw instruction body must make a multiple of 8');
      break;
  }
  const out = Buffer.alloc(4 + body.length);
  out.writeUInt16BE(type, 0);
  out.writeUInt16BE(out.length, 2);
  body.copy(out, 4);
  return out;
}

/** A flow's instruction list. */
export function encodeInstructions(list: readonly OfpInstruction[]): Buffer {
  return Buffer.concat(list.map(encodeInstruction));
}

/** Decodes one instruction at the reader's position. */
export function decodeInstruction(r: CodecReader): OfpInstruction {
  const type = r.u16('instruction type');
  const len = r.u16('instruction length');
  if (len < 8 || len % 8 !== 0)
    r.fail(`instruction type ${type} has length ${len}, not a multiple of 8 from 8`);
  const b = r.sub(len - 4, `instruction type ${type}`);
  switch (type) {
    case OFPIT.GOTO_TABLE:
      if (len !== 8) b.fail(`OFPIT_GOTO_TABLE has length ${len}, not 8`);
      return { type: 'goto_table', table: b.u8('table_id') };
    case OFPIT.APPLY_ACTIONS:
      b.skip(4, 'pad');
      return { type: 'apply_actions', actions: decodeActions(b) };
    default:
      return { type: 'raw', instructionType: type, body: b.bytes(b.remaining, 'body') };
  }
}

/** Decodes instructions until the reader's end. */
export function decodeInstructions(r: CodecReader): OfpInstruction[] {
  const out: OfpInstruction[] = [];
  while (r.remaining > 0) out.push(decodeInstruction(r));
  return out;
}

/** Decodes a whole buffer of instructions. */
export function decodeInstructionBytes(buf: Uint8Array): OfpInstruction[] {
  return decodeInstructions(new CodecReader(buf, 'instructions'));
}
