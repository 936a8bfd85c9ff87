/**
 * An `Overlay` whose peer programming runs on a worker thread of its own (`overlay-worker.ts`), so a
 * join of thousands of peers neither runs its table work and netlink batches on the agent's event
 * loop nor fills the main heap's young generation with its garbage: CNI calls, whose file and netlink
 * steps each wait for a turn of the event loop, are served in between.
 *
 * Descriptors (I1, I2): the worker's NETLINK_ROUTE socket is opened here, on the main thread, in the
 * namespace the main thread is in (the node's; `openFd` for another one, e.g. a test's node namespace
 * entered with `inNetns`), and owned here; the worker only uses it (`Rtnetlink.borrow`), one call at a
 * time, and the descriptor is closed only once the worker thread has exited (`stop`, or the worker
 * dying), so no thread ever sends on a number that meant another socket.
 *
 * A worker that dies fails the calls in flight; the next call starts a new one (with `start` again),
 * and the caller's full converge after a failure fills its table.
 */
import { Worker } from 'node:worker_threads';
import { DatapathError, InternalError, PodwireError } from '../../base/errors.js';
import { OwnedFd } from '../../base/owned-fd.js';
import { close as closeFd, KernelError } from '../../kernel/libc.js';
import { openNetlinkFd } from '../../kernel/netlink/socket.js';
import { NETLINK_ROUTE } from '../../kernel/netlink/uapi/netlink.js';
import type { Overlay, OverlayStatus, PeerChanges, PeerNode } from './overlay.js';
import { vxlanOverhead } from './vxlan-overlay.js';
import type {
  OverlaySpec,
  OverlayWorkerCall,
  OverlayWorkerError,
  OverlayWorkerReply,
} from './worker-protocol.js';

const WORKER_URL = new URL('./overlay-worker.js', import.meta.url);
const RECEIVE_TIMEOUT_MS = 5000;

export interface WorkerOverlayOptions {
  spec: OverlaySpec;
  /** Opens the worker's NETLINK_ROUTE descriptor; default: in the calling thread's namespace. */
  openFd?: () => number;
}

type Call = OverlayWorkerCall extends infer C ? (C extends { id: number } ? Omit<C, 'id'> : never) : never;

interface Running {
  worker: Worker;
  fd: OwnedFd;
  /** Settles once the thread has exited and the descriptor is closed. */
  exited: Promise<void>;
  pending: Map<
    number,
    { resolve: (r: NonNullable<OverlayWorkerReply['result']>) => void; reject: (e: Error) => void }
  >;
}

function rebuild(e: OverlayWorkerError): Error {
  if (e.kernel) return new KernelError(e.kernel.syscall, e.kernel.errno, e.kernel.extack);
  if (e.code === 'ERR_DATAPATH') return new DatapathError(e.message);
  if (e.code === 'ERR_INTERNAL') return new InternalError(e.message);
  return new PodwireError(e.code, e.message);
}

export class WorkerOverlay implements Overlay {
  readonly mode: 'encap' | 'noEncap';
  readonly overhead: number;
  readonly #o: WorkerOverlayOptions;
  #running: Running | undefined;
  #nextId = 1;
  #started = false;
  #stopped = false;
  /** The status as the worker's table has it: peer name -> its skipped CIDRs' reasons. */
  #peers = new Map<string, readonly string[]>();

  constructor(options: WorkerOverlayOptions) {
    this.#o = options;
    const { spec } = options;
    this.mode = spec.kind === 'vxlan' ? 'encap' : 'noEncap';
    this.overhead = spec.kind === 'vxlan' ? vxlanOverhead(spec.options.underlayIP) : 0;
  }

  /** The worker's thread id while it runs (tests: that it is gone after `stop`). */
  get threadId(): number | undefined {
    return this.#running?.worker.threadId;
  }

  async start(): Promise<{ vtepMac?: string }> {
    if (this.#stopped) throw new DatapathError('overlay stopped');
    const r = await this.#call({ op: 'start' }, false);
    this.#started = true;
    return r.start ?? {};
  }

  async setPeers(peers: readonly PeerNode[]): Promise<OverlayStatus> {
    const r = await this.#call({ op: 'setPeers', peers });
    const status = r.status ?? { peers: [], skipped: [] };
    this.#peers = new Map(status.peers.map((name) => [name, []]));
    for (const s of status.skipped) this.#peers.set(s.name, [...(this.#peers.get(s.name) ?? []), s.reason]);
    return status;
  }

  async updatePeers(changes: PeerChanges): Promise<void> {
    // The mirror follows what the worker's table does: a removed peer goes, a put peer is there
    // (with its skipped CIDRs), also when the kernel refused some of its requests (the table keeps it).
    try {
      const r = await this.#call({ op: 'updatePeers', changes });
      this.#apply(changes, new Map(r.skipped ?? []));
    } catch (err) {
      if (!(err instanceof DatapathError) || this.#running === undefined) throw err;
      this.#apply(changes, new Map()); // refused requests: the table took the change all the same
      throw err;
    }
  }

  #apply(changes: PeerChanges, skipped: Map<string, readonly string[]>): void {
    for (const name of changes.removed) this.#peers.delete(name);
    for (const p of changes.put) this.#peers.set(p.name, skipped.get(p.name) ?? []);
  }

  status(): OverlayStatus {
    const status: OverlayStatus = { peers: [], skipped: [] };
    for (const [name, skipped] of this.#peers) {
      status.peers.push(name);
      for (const reason of skipped) status.skipped.push({ name, reason });
    }
    status.peers.sort();
    return status;
  }

  /** Stops the worker thread and closes its descriptor; the kernel state stays. Idempotent. */
  async stop(): Promise<void> {
    this.#stopped = true;
    const running = this.#running;
    if (!running) return;
    try {
      await this.#send(running, { op: 'stop' });
    } catch {
      // The worker died or refused: it is terminated below all the same, and the descriptor closed.
    }
    await running.worker.terminate();
    await running.exited;
  }

  async #call(call: Call, restart = true): Promise<NonNullable<OverlayWorkerReply['result']>> {
    if (this.#stopped) throw new DatapathError('overlay stopped');
    let running = this.#running;
    if (!running) {
      running = this.#spawn();
      // A worker that died took its device index with it: a new one adopts the device first.
      if (restart && this.#started) await this.#send(running, { op: 'start' });
    }
    return this.#send(running, call);
  }

  #send(running: Running, call: Call): Promise<NonNullable<OverlayWorkerReply['result']>> {
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      running.pending.set(id, { resolve, reject });
      running.worker.postMessage({ ...call, id });
    });
  }

  #spawn(): Running {
    const open = this.#o.openFd ?? (() => openNetlinkFd(NETLINK_ROUTE, RECEIVE_TIMEOUT_MS));
    const fd = new OwnedFd(open(), 'overlay worker netlink socket', closeFd);
    let worker: Worker;
    try {
      worker = new Worker(WORKER_URL, { workerData: { ...this.#o.spec, fd: fd.fd } });
    } catch (err) {
      fd.close();
      throw err;
    }
    const pending: Running['pending'] = new Map();
    let failure: Error | undefined;
    const exited = new Promise<void>((resolve) => {
      worker.on('error', (err) => {
        failure = new DatapathError(`overlay worker failed: ${String(err)}`, { cause: err });
      });
      worker.on('exit', (code) => {
        // The thread is gone: nothing can send on the descriptor any more.
        fd.close();
        if (this.#running?.worker === worker) this.#running = undefined;
        const err = failure ?? new DatapathError(`overlay worker exited (code ${code})`);
        for (const p of pending.values()) p.reject(err);
        pending.clear();
        resolve();
      });
    });
    worker.on('message', (reply: OverlayWorkerReply) => {
      const p = pending.get(reply.id);
      if (!p) return;
      pending.delete(reply.id);
      if (reply.error) p.reject(rebuild(reply.error));
      else p.resolve(reply.result ?? {});
    });
    const running: Running = { worker, fd, exited, pending };
    this.#running = running;
    return running;
  }
}
