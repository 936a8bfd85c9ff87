/** Actions (ct nested), instructions: round trips, wire layouts OVS checks, and corrupted input. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { DecodeError } from '../../../../src/base/errors.js';
import {
  decodeAction,
  decodeActionBytes,
  encodeAction,
  encodeActions,
  NX_CT_RECIRC_NONE,
  OFPP,
} from '../../../../src/datapath/ovs/openflow/actions.js';
import { CodecReader } from '../../../../src/datapath/ovs/openflow/codec-reader.js';
import { parseInstructions } from '../../../../src/datapath/ovs/openflow/flow-parse.js';
import {
  decodeInstructionBytes,
  encodeInstruction,
  encodeInstructions,
} from '../../../../src/datapath/ovs/openflow/instructions.js';
import { anyAction, anyActions, anyInstruction } from './flow-arbitraries.js';

test('an action decodes to what was encoded, ct with nested actions included; every action is a multiple of 8', () => {
  fc.assert(
    fc.property(anyAction, (a) => {
      const bytes = encodeAction(a);
      assert.equal(bytes.length % 8, 0);
      assert.equal(bytes.readUInt16BE(2), bytes.length);
      const r = new CodecReader(bytes, 'test');
      assert.deepEqual(decodeAction(r), a);
      assert.equal(r.remaining, 0);
    }),
    { numRuns: 500 },
  );
});

test('an instruction list decodes to what was encoded', () => {
  fc.assert(
    fc.property(fc.array(anyInstruction, { maxLength: 5 }), (list) => {
      assert.deepEqual(decodeInstructionBytes(encodeInstructions(list)), list);
    }),
    { numRuns: 300 },
  );
});

test('wire layouts: output 16 bytes, set_field padded to 8, push_vlan, NXAST_REG_MOVE 24 bytes, NXAST_CT 24 + nested', () => {
  const [apply, goto] = parseInstructions(
    'ct(commit,zone=65520,exec(set_field:0x1->ct_mark)),move:NXM_OF_VLAN_TCI[0..11]->NXM_NX_REG1[0..11],push_vlan:0x8100,output:7,IN_PORT,goto_table:50',
  );
  assert.ok(apply?.type === 'apply_actions' && goto?.type === 'goto_table');
  const [ct, move, push, out, inPort] = apply.actions.map(encodeAction);
  // ct: type ffff, len 40, NX vendor, subtype 35, flags commit, zone_src 0, zone 65520, recirc none, alg 0;
  // then set_field ct_mark (NXM_NX_CT_MARK, 4 bytes) padded to 16.
  assert.equal(
    ct?.toString('hex'),
    'ffff0028000023200023000100000000fff0ff0000000000001900100001d6040000000100000000',
  );
  assert.equal(move?.toString('hex'), 'ffff0018000023200006000c000000000000080200010204');
  assert.equal(push?.toString('hex'), '0011000881000000');
  assert.equal(out?.toString('hex'), '00000010000000070000000000000000');
  assert.equal(inPort?.subarray(4, 8).readUInt32BE(0), OFPP.IN_PORT);
  assert.equal(encodeInstruction(goto).toString('hex'), '0001000832000000');
  const plain = parseInstructions('ct(table=46,zone=65520)')[0];
  assert.ok(plain?.type === 'apply_actions');
  const ctPlain = plain.actions[0];
  assert.ok(ctPlain?.type === 'ct');
  assert.equal(ctPlain.recircTable, 46);
  assert.equal(
    parseInstructions('ct(zone=1)')[0]?.type === 'apply_actions' &&
      (parseInstructions('ct(zone=1)')[0] as { actions: { recircTable: number }[] }).actions[0]?.recircTable,
    NX_CT_RECIRC_NONE,
  );
});

test('truncated actions and instructions are a DecodeError naming what was cut', () => {
  fc.assert(
    fc.property(
      anyActions.filter((l) => l.length > 0),
      fc.nat(),
      (list, cut) => {
        const bytes = encodeActions(list);
        // Cut inside the last action: every TLV carries its length, so the cut is always seen.
        const last = encodeAction(list[list.length - 1] as (typeof list)[number]).length;
        const n = bytes.length - 1 - (cut % (last - 1));
        assert.throws(() => decodeActionBytes(bytes.subarray(0, n)), DecodeError);
      },
    ),
    { numRuns: 300 },
  );
  assert.throws(() => decodeActionBytes(Buffer.from('0000001000000007', 'hex')), /truncated/);
  assert.throws(() => decodeActionBytes(Buffer.from('00000003', 'hex')), /length 3/);
  assert.throws(() => decodeInstructionBytes(Buffer.from('0001001032000000', 'hex')), /truncated/);
});

test('random corruption of actions or instructions decodes or is a DecodeError, never another error', () => {
  fc.assert(
    fc.property(
      fc.array(anyInstruction, { minLength: 1, maxLength: 4 }),
      fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 6 }),
      (list, edits) => {
        const bytes = Buffer.from(encodeInstructions(list));
        for (const [at, b] of edits) bytes[at % bytes.length] = b;
        try {
          decodeInstructionBytes(bytes);
        } catch (e) {
          if (!(e instanceof DecodeError)) throw e;
        }
      },
    ),
    { numRuns: 500 },
  );
});
