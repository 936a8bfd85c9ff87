/**
 * The guest of `npm run test:vm` (scripts/vm-kernel-test.sh, which sets PODWIRE_VM_GUEST=1) runs under
 * software emulation, on a machine shared with other work: starting Node.js with the agent's modules,
 * or Python with scapy, takes seconds there (measured: 3-25 s for the agent, 6-40 s for scapy's import,
 * by how busy the machine was) where it takes well under one here. Deadlines for such starts go
 * through `patient`, so a slow guest is not a failure; deadlines that a test asserts on stay as they are.
 */
export const EMULATED = process.env.PODWIRE_VM_GUEST === '1';

/** `ms`, or ten times as long in the emulated guest. */
export function patient(ms: number): number {
  return EMULATED ? ms * 10 : ms;
}
