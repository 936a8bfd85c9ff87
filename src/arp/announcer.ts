/**
 * Announces a pod's addresses from inside its namespace: a gratuitous ARP for IPv4 and an unsolicited
 * neighbour advertisement for IPv6, in rounds. Every frame goes out on its own packet socket, created
 * in the pod namespace with `inNetns` and closed right after the send: no socket outlives one send,
 * and none is shared (docs/architecture.md, failure 1).
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

/**
 * Sends one frame on a packet socket of its own and returns the socket's close, which runs on a worker
 * thread: closing a packet socket waits for an RCU grace period (~10 ms), which must not hold up the
 * CNI call that sent it.
 */
function sendFrame(a: Announcement, frame: Buffer): Promise<void> {
  const sock = inNetns(a.netns, a.home, () => PacketSocket.open(a.ifindex));
  try {
    sock.send(frame);
  } catch (err) {
    sock.close();
    throw err;
  }
  return sock.closeAsync();
}

/** One round: sends each frame once. `closed` settles when every socket of the round is closed. */
export function announceOnce(a: Announcement): { sent: number; closed: Promise<unknown> } {
  const closing: Promise<void>[] = [];
  try {
    if (a.ipv4) closing.push(sendFrame(a, gratuitousArp(a.mac, a.ipv4)));
    if (a.ipv6) closing.push(sendFrame(a, unsolicitedNeighborAdvertisement(a.mac, a.ipv6)));
  } catch (err) {
    // Sockets of this round already sent are still closing; the error is what the caller sees.
    return { sent: closing.length, closed: Promise.allSettled(closing).then(() => Promise.reject(err)) };
  }
  return { sent: closing.length, closed: Promise.all(closing) };
}

/**
 * Runs the announcement rounds of every pod, one background task per attachment key. The first round
 * is sent synchronously by `start`, so the caller knows the pod was announced before it answers.
 */
export class Announcer {
  /** A task exists in this map if and only if its rounds are still running. */
  readonly #tasks = new Map<string, { abort: AbortController; done: Promise<void> }>();
  /** Packet sockets still closing on worker threads (each close waits ~10 ms for RCU in the kernel). */
  readonly #closing = new Set<Promise<unknown>>();
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

  /**
   * Takes ownership of `a.netns`, sends the first round at once and the others in the background.
   * A failure of the first round is reported through `onError`, like the later ones: the pod is
   * configured either way, and an announcement is a courtesy to the neighbours.
   */
  start(key: string, a: Announcement): void {
    const abort = new AbortController();
    const done: Promise<void> = this.#run(key, a, abort.signal).finally(() => {
      a.netns.close();
      // Only its own entry: a later start on the same key may have replaced it.
      if (this.#tasks.get(key)?.done === done) this.#tasks.delete(key);
    });
    this.#tasks.set(key, { abort, done });
  }

  /** Sends the rounds; its first round runs synchronously, before `start` returns. */
  async #run(key: string, a: Announcement, signal: AbortSignal): Promise<void> {
    for (let round = 0; round < this.#options.rounds; round++) {
      if (round > 0) {
        try {
          await sleep(this.#options.intervalMs, undefined, { signal });
        } catch {
          return; // aborted: the attachment is being deleted
        }
      }
      try {
        const { sent, closed } = announceOnce(a);
        this.#framesSent += sent;
        this.#trackClose(key, closed);
      } catch (err) {
        this.#onError(key, err);
        return;
      }
    }
  }

  #trackClose(key: string, closed: Promise<unknown>): void {
    const tracked = closed.then(
      () => undefined,
      (err: unknown) => this.#onError(key, err),
    );
    this.#closing.add(tracked);
    void tracked.finally(() => this.#closing.delete(tracked));
  }

  /**
   * Stops the rounds of `key`, if any, and waits until its namespace handle is closed. Sockets of rounds
   * already sent may still be closing; `cancelAll` waits for those.
   */
  async cancel(key: string): Promise<void> {
    const task = this.#tasks.get(key);
    if (!task) return;
    task.abort.abort();
    await task.done;
  }

  /** Stops every task and waits until every handle and socket is closed (agent shutdown). */
  async cancelAll(): Promise<void> {
    await Promise.all([...this.#tasks.keys()].map((k) => this.cancel(k)));
    await Promise.all([...this.#closing]);
  }
}
