/**
 * The legacy ethtool ioctl (SIOCETHTOOL, linux/ethtool.h) for the one offload podwire changes:
 * transmit checksumming. The request names an interface, which the kernel looks up in the namespace
 * of the socket it arrives on: create the socket with `inNetns` for a pod interface (I1).
 */
import koffi from 'koffi';
import { InternalError } from '../base/errors.js';
import { OwnedFd } from '../base/owned-fd.js';
import { AF_INET, close, ioctl, KernelError, SOCK_DGRAM, socket } from './libc.js';

/** linux/sockios.h */
export const SIOCETHTOOL = 0x8946;
/** linux/ethtool.h: get / set transmit checksumming (struct ethtool_value). */
export const ETHTOOL_GTXCSUM = 0x16;
export const ETHTOOL_STXCSUM = 0x17;

/** sizeof(struct ifreq) on 64-bit Linux: IFNAMSIZ name, then a union whose ifr_data is a pointer. */
const IFREQ_SIZE = 40;
const IFNAMSIZ = 16;

/** An AF_INET datagram socket used only to carry ethtool requests; one owner closes it. */
export class EthtoolSocket implements Disposable {
  readonly #fd: OwnedFd;

  private constructor(fd: number) {
    this.#fd = new OwnedFd(fd, 'ethtool socket', close);
  }

  /** Equivalent to: socket(AF_INET, SOCK_DGRAM, 0), in the calling thread's namespace. */
  static open(): EthtoolSocket {
    return new EthtoolSocket(socket(AF_INET, SOCK_DGRAM, 0));
  }

  /** Equivalent to: `ethtool -k IFNAME | grep tx-checksumming`. */
  txChecksumming(ifname: string): boolean {
    return this.#request(ifname, ETHTOOL_GTXCSUM, 0) !== 0;
  }

  /** Equivalent to: `ethtool -K IFNAME tx on|off`. */
  setTxChecksumming(ifname: string, on: boolean): void {
    this.#request(ifname, ETHTOOL_STXCSUM, on ? 1 : 0);
  }

  close(): void {
    this.#fd.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  /** Sends one struct ethtool_value { cmd, data } request; returns `data` as the kernel left it. */
  #request(ifname: string, cmd: number, data: number): number {
    const name = Buffer.from(ifname, 'latin1');
    if (name.length === 0 || name.length >= IFNAMSIZ) {
      throw new InternalError(`bad interface name ${JSON.stringify(ifname)}`);
    }
    const value = Buffer.alloc(8);
    value.writeUInt32LE(cmd, 0);
    value.writeUInt32LE(data, 4);
    const ifr = Buffer.alloc(IFREQ_SIZE);
    name.copy(ifr, 0);
    // `value` stays referenced until the call returns, so its memory cannot move or be freed.
    ifr.writeBigUInt64LE(koffi.address(value) as bigint, IFNAMSIZ);
    const ret = ioctl(this.#fd.fd, SIOCETHTOOL, 'void *', ifr);
    if (ret < 0) throw new KernelError(`ioctl(SIOCETHTOOL ${cmd}) on ${ifname}`, koffi.errno());
    return value.readUInt32LE(4);
  }
}
