/** Capturing the ARP frames on one interface for a while (for the audit). */
import { setTimeout as sleep } from 'node:timers/promises';
import { CaptureSocket } from '../kernel/packet-socket.js';
import { ETH_P_ARP } from './ethernet.js';

/** linux/if_ether.h: every protocol. Only such sockets also see the frames the interface sends. */
const ETH_P_ALL = 0x0003;

function isArp(frame: Buffer): boolean {
  return frame.length >= 14 && frame.readUInt16BE(12) === ETH_P_ARP;
}

/**
 * Every ARP frame the interface sends or receives during `ms`. `open` creates the capture socket; pass
 * one that uses `inNetns` to capture in another namespace.
 */
export async function captureArp(
  ifindex: number,
  ms: number,
  open: (ifindex: number, ethertype: number) => CaptureSocket = CaptureSocket.open,
  signal?: AbortSignal,
): Promise<Buffer[]> {
  // An ETH_P_ARP socket would see only frames the interface receives; a leak is a frame it SENDS.
  using sock = open(ifindex, ETH_P_ALL);
  const frames: Buffer[] = [];
  const deadline = performance.now() + ms;
  while (performance.now() < deadline && !signal?.aborted) {
    frames.push(...sock.drain().filter(isArp));
    await sleep(Math.min(20, Math.max(0, deadline - performance.now())));
  }
  frames.push(...sock.drain().filter(isArp));
  return frames;
}
