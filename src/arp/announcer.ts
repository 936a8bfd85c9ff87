/**
 * Announces a pod's addresses from inside its namespace: a gratuitous ARP for IPv4 and an unsolicited
 * neighbour advertisement for IPv6, in rounds. Every frame goes out on its own packet socket, created
 * in the pod namespace with `inNetns` and closed right after the send: no socket outlives one send,
 * and none is shared (DESIGN.md, failure 1).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { inNetns, type NetnsHandle } from '../kernel/netns.js';
import { PacketSocket } from '../kernel/packet-socket.js';
import { gratuitousArp } from './arp-frame.js';
import { unsolicitedNeighborAdvertisement } from './ndp-frame.js';

export interface Announcement {
  /** The pod namespace; owned by the announcer from `start` on, closed when the rounds end. */
  netns: NetnsHandle;
  /** The agent's own namespace, to return to. */
  home: NetnsHandle;
  /** Index of the pod interface inside `netns`. */
  ifindex: number;
  mac: string;
  ipv4?: string;
  ipv6?: string;
}

export interface AnnounceOptions {
  rounds: number;
  intervalMs: number;
}

function sendFrame(a: Announcement, frame: Buffer): void {
  using sock = inNetns(a.netns, a.home, () => PacketSocket.open(a.ifindex));
  sock.send(frame);
}

/** One round: sends each frame once. Returns how many frames were sent. */
export function announceOnce(a: Announcement): number {
  let sent = 0;
  if (a.ipv4) {
    sendFrame(a, gratuitousArp(a.mac, a.ipv4));
    sent++;
  }
  if (a.ipv6) {
    sendFrame(a, unsolicitedNeighborAdvertisement(a.mac, a.ipv6));
    sent++;
  }
  return sent;
}

/**
 * Runs the announcement rounds of every pod, one background task per attachment key. The first round
 * is sent synchronously by `start`, so the caller knows the pod was announced before it answers.
 */
export class Announcer {
  /** A task exists in this map if and only if its rounds are still running. */
  readonly #tasks = new Map<string, { abort: AbortController; done: Promise<void> }>();
  readonly #options: AnnounceOptions;
  readonly #onError: (key: string, err: unknown) => void;
  #framesSent = 0;

  constructor(options: AnnounceOptions, onError: (key: string, err: unknown) => void) {
    this.#options = options;
    this.#onError = onError;
  }

  get framesSent(): number {
    return this.#framesSent;
  }

  get active(): number {
    return this.#tasks.size;
  }

  /** Takes ownership of `a.netns`. Throws (and closes it) if the first round cannot be sent. */
  start(key: string, a: Announcement): void {
    try {
      this.#framesSent += announceOnce(a);
    } catch (err) {
      a.netns.close();
      throw err;
    }
    if (this.#options.rounds <= 1) {
      a.netns.close();
      return;
    }
    const abort = new AbortController();
    const done = this.#rest(key, a, abort.signal).finally(() => {
      a.netns.close();
      this.#tasks.delete(key);
    });
    this.#tasks.set(key, { abort, done });
  }

  async #rest(key: string, a: Announcement, signal: AbortSignal): Promise<void> {
    for (let round = 1; round < this.#options.rounds; round++) {
      try {
        await sleep(this.#options.intervalMs, undefined, { signal });
      } catch {
        return; // aborted: the attachment is being deleted
      }
      try {
        this.#framesSent += announceOnce(a);
      } catch (err) {
        this.#onError(key, err);
        return;
      }
    }
  }

  /** Stops the rounds of `key`, if any, and waits until its namespace handle is closed. */
  async cancel(key: string): Promise<void> {
    const task = this.#tasks.get(key);
    if (!task) return;
    task.abort.abort();
    await task.done;
  }

  async cancelAll(): Promise<void> {
    await Promise.all([...this.#tasks.keys()].map((k) => this.cancel(k)));
  }
}
