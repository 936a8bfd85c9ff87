/**
 * A port range as OpenFlow matches: the fewest value/mask pairs on a 16-bit transport port that
 * together cover exactly [first, last] (each pair an aligned power-of-two block), as `tp_dst=V/M`
 * writes them. One conjunctive clause takes them all: a packet matches the clause if it matches one.
 */

export interface PortMask {
  value: number;
  /** 0xffff: the exact port. */
  mask: number;
}

/** The aligned blocks covering [first, last] (0 <= first <= last <= 65535), lowest first. */
export function portMasks(first: number, last: number): PortMask[] {
  if (!Number.isInteger(first) || !Number.isInteger(last) || first < 0 || last > 0xffff || first > last) {
    throw new RangeError(`port range ${first}-${last} is not within 0-65535 in order`);
  }
  const out: PortMask[] = [];
  let at = first;
  while (at <= last) {
    // The largest block that starts at `at` (aligned to its size) and ends by `last`.
    let size = at === 0 ? 0x10000 : at & -at;
    while (at + size - 1 > last) size >>= 1;
    out.push({ value: at, mask: 0xffff & ~(size - 1) });
    at += size;
  }
  return out;
}

/** `tp_dst=V` or `tp_dst=V/M` (hex mask), nothing for the whole port space. */
export function portMatch(m: PortMask): string {
  if (m.mask === 0) return '';
  return m.mask === 0xffff ? `tp_dst=${m.value}` : `tp_dst=${m.value}/0x${m.mask.toString(16)}`;
}
