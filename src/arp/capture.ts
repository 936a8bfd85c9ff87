/** Capturing the ARP and neighbour-discovery frames on one interface for a while (for the audit). */
import { setTimeout as sleep } from 'node:timers/promises';
import { CaptureSocket } from '../kernel/packet-socket.js';
import { ETH_HLEN, ETH_P_ARP, ETH_P_IPV6 } from './ethernet.js';
import { ETH_P_8021Q, ND_NEIGHBOR_ADVERT, ND_NEIGHBOR_SOLICIT } from './neighbour-claim.js';

/** linux/if_ether.h: every protocol. Only such sockets also see the frames the interface sends. */
const ETH_P_ALL = 0x0003;
const IPPROTO_ICMPV6 = 58;

/** ARP, or ICMPv6 NS/NA without extension headers; looks through one 802.1Q tag. */
export function isNeighbourFrame(frame: Buffer): boolean {
  if (frame.length < ETH_HLEN) return false;
  let at = 12;
  if (frame.readUInt16BE(at) === ETH_P_8021Q && frame.length >= ETH_HLEN + 4) at += 4;
  const type = frame.readUInt16BE(at);
  if (type === ETH_P_ARP) return true;
  if (type !== ETH_P_IPV6) return false;
  const ip = at + 2;
  if (frame.length < ip + 41 || frame.readUInt8(ip + 6) !== IPPROTO_ICMPV6) return false;
  const icmpType = frame.readUInt8(ip + 40);
  return icmpType === ND_NEIGHBOR_SOLICIT || icmpType === ND_NEIGHBOR_ADVERT;
}

/**
 * Every ARP and NS/NA frame the interface sends or receives during `ms`. `open` creates the capture
 * socket; pass one that uses `inNetns` to capture in another namespace. `promiscuous` also catches
 * unicast frames not addressed to the interface (a bridge device, a trunk).
 */
export async function captureArp(
  ifindex: number,
  ms: number,
  open: (ifindex: number, ethertype: number) => CaptureSocket = CaptureSocket.open,
  signal?: AbortSignal,
  opts: { promiscuous?: boolean } = {},
): Promise<Buffer[]> {
  // An ETH_P_ARP socket would see only frames the interface receives; a leak is a frame it SENDS.
  using sock = open(ifindex, ETH_P_ALL);
  if (opts.promiscuous) sock.promiscuous(ifindex);
  const frames: Buffer[] = [];
  const deadline = performance.now() + ms;
  while (performance.now() < deadline && !signal?.aborted) {
    frames.push(...sock.drain().filter(isNeighbourFrame));
    await sleep(Math.min(20, Math.max(0, deadline - performance.now())));
  }
  frames.push(...sock.drain().filter(isNeighbourFrame));
  return frames;
}
