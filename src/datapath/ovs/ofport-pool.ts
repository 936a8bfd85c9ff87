/**
 * The OpenFlow port numbers podwire gives pod ports (Interface `ofport_request`), so a pod's flows
 * can go out while ovs-vswitchd is still opening its port. Numbers start at a base above what
 * ovs-vswitchd picks for the gateway and the uplink (it never picks a number a row has asked for);
 * a number is free again only once its port's row and flows are both gone.
 */
import { DatapathError } from '../../base/errors.js';
import type { PortRow } from './vswitch-db.js';

/** The largest OpenFlow 1.3 port number a switch port may have (OFPP_MAX). */
const OFPP_MAX = 0xffffff00;

export class OfportPool {
  readonly #base: number;
  readonly #used = new Set<number>();

  constructor(base: number) {
    this.#base = base;
  }

  /** Forgets what it knew: the numbers in use are those `rows` have or have asked for. */
  reset(rows: Iterable<PortRow>): void {
    this.#used.clear();
    for (const row of rows) this.mark(row.ofport, row.ofportRequest);
  }

  /** The lowest number from the base up that no port has or has asked for; taken until released. */
  take(bridge: string): number {
    let n = this.#base;
    while (this.#used.has(n)) n++;
    if (n > OFPP_MAX) throw new DatapathError(`OVS bridge ${bridge} has no OpenFlow port number left`);
    this.#used.add(n);
    return n;
  }

  /** Records numbers as in use (valid ones only). */
  mark(...numbers: Array<number | undefined>): void {
    for (const n of numbers) if (n !== undefined && n > 0) this.#used.add(n);
  }

  release(...numbers: Array<number | undefined>): void {
    for (const n of numbers) if (n !== undefined) this.#used.delete(n);
  }
}
