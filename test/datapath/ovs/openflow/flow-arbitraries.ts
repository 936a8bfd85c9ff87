/** fast-check arbitraries for the flow codec's structures: OXM TLVs, actions (ct nested), instructions, flows. */
import fc from 'fast-check';
import { OFPAT, type OfpAction } from '../../../../src/datapath/ovs/openflow/actions.js';
import type { FlowMod } from '../../../../src/datapath/ovs/openflow/flow-mod.js';
import type { FlowStats } from '../../../../src/datapath/ovs/openflow/flow-stats.js';
import type { OfpInstruction } from '../../../../src/datapath/ovs/openflow/instructions.js';
import { FIELDS, type OxmField } from '../../../../src/datapath/ovs/openflow/oxm.js';

/** fc.record with ordinary objects (assert.deepEqual compares prototypes). */
function rec<T>(model: { [K in keyof T]: fc.Arbitrary<T[K]> }): fc.Arbitrary<T> {
  return fc.record(model, { noNullPrototype: true }) as fc.Arbitrary<T>;
}

const bytes = (n: number) => fc.uint8Array({ minLength: n, maxLength: n }).map((b) => Buffer.from(b));

/** A TLV of a known field: the right value length, with or without a mask. */
export const knownOxm: fc.Arbitrary<OxmField> = fc.constantFrom(...FIELDS).chain((d) =>
  fc.record(
    {
      oxmClass: fc.constant(d.oxmClass),
      field: fc.constant(d.field),
      value: bytes(d.len),
      mask: bytes(d.len),
    },
    { requiredKeys: ['oxmClass', 'field', 'value'], noNullPrototype: true },
  ),
);

/** A TLV of a class no field table covers (ONF-reserved 0x0002-0x7fff), or an experimenter TLV. */
export const unknownOxm: fc.Arbitrary<OxmField> = fc.oneof(
  rec({
    oxmClass: fc.integer({ min: 2, max: 0x7fff }),
    field: fc.integer({ min: 0, max: 127 }),
    n: fc.integer({ min: 0, max: 60 }),
    masked: fc.boolean(),
  }).chain(({ oxmClass, field, n, masked }) =>
    masked
      ? rec({ oxmClass: fc.constant(oxmClass), field: fc.constant(field), value: bytes(n), mask: bytes(n) })
      : rec({ oxmClass: fc.constant(oxmClass), field: fc.constant(field), value: bytes(n) }),
  ),
  rec({
    field: fc.integer({ min: 0, max: 127 }),
    experimenter: fc.integer({ min: 0, max: 0xffffffff }),
    n: fc.integer({ min: 0, max: 40 }),
  }).chain(({ field, experimenter, n }) =>
    rec({
      oxmClass: fc.constant(0xffff),
      field: fc.constant(field),
      experimenter: fc.constant(experimenter),
      value: bytes(n),
    }),
  ),
);

export const anyOxm = fc.oneof(knownOxm, unknownOxm);

const u16 = fc.integer({ min: 0, max: 0xffff });
const u32 = fc.integer({ min: 0, max: 0xffffffff });

/** Action types decoded as 'raw' (not OUTPUT, PUSH/POP_VLAN, SET_FIELD, EXPERIMENTER). */
const rawActionType = u16.filter((t) => !(Object.values(OFPAT) as number[]).includes(t));

const actionTie = fc.letrec<{ action: OfpAction; actions: OfpAction[] }>((tie) => ({
  action: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    rec({ type: fc.constant('output' as const), port: u32, maxLen: u16 }),
    rec({ type: fc.constant('set_field' as const), field: anyOxm }),
    rec({ type: fc.constant('push_vlan' as const), ethertype: u16 }),
    rec({ type: fc.constant('pop_vlan' as const) }),
    rec({ type: fc.constant('reg_move' as const), nBits: u16, srcOfs: u16, dstOfs: u16, src: u32, dst: u32 }),
    rec({
      type: fc.constant('ct' as const),
      flags: u16,
      zoneSrc: u32,
      zone: u16,
      recircTable: fc.integer({ min: 0, max: 255 }),
      alg: u16,
      actions: tie('actions') as fc.Arbitrary<OfpAction[]>,
    }),
    rec({ actionType: rawActionType, words: fc.integer({ min: 0, max: 4 }) }).chain(({ actionType, words }) =>
      rec({
        type: fc.constant('raw' as const),
        actionType: fc.constant(actionType),
        body: bytes(4 + 8 * words),
      }),
    ),
  ),
  actions: fc.array(tie('action') as fc.Arbitrary<OfpAction>, { maxLength: 4 }),
}));

export const anyAction = actionTie.action;
export const anyActions = actionTie.actions;

export const anyInstruction: fc.Arbitrary<OfpInstruction> = fc.oneof(
  rec({ type: fc.constant('goto_table' as const), table: fc.integer({ min: 0, max: 255 }) }),
  rec({ type: fc.constant('apply_actions' as const), actions: anyActions }),
  rec({ instructionType: fc.constantFrom(2, 3, 5, 6), words: fc.integer({ min: 0, max: 3 }) }).chain(
    ({ instructionType, words }) =>
      rec({
        type: fc.constant('raw' as const),
        instructionType: fc.constant(instructionType),
        body: bytes(4 + 8 * words),
      }),
  ),
);

const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });

/** A match as the encoder writes it: small enough for a 16-bit length. */
export const anyMatch = fc.array(anyOxm, { maxLength: 8 });

export const anyFlowMod: fc.Arbitrary<FlowMod> = rec({
  cookie: u64,
  cookieMask: u64,
  table: fc.integer({ min: 0, max: 255 }),
  command: fc.integer({ min: 0, max: 255 }),
  idleTimeout: u16,
  hardTimeout: u16,
  priority: u16,
  bufferId: u32,
  outPort: u32,
  outGroup: u32,
  flags: u16,
  match: anyMatch,
  instructions: fc.array(anyInstruction, { maxLength: 4 }),
});

export const anyFlowStats: fc.Arbitrary<FlowStats> = rec({
  table: fc.integer({ min: 0, max: 255 }),
  priority: u16,
  cookie: u64,
  match: anyMatch,
  instructions: fc.array(anyInstruction, { maxLength: 4 }),
  durationSec: u32,
  durationNsec: u32,
  idleTimeout: u16,
  hardTimeout: u16,
  flags: u16,
  packetCount: u64,
  byteCount: u64,
});
