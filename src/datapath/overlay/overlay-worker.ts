/**
 * The overlay's worker thread (`worker-overlay.ts` starts it): one `VxlanOverlay` or `RoutedOverlay`
 * on a netlink socket the main thread opened in the node namespace and owns (`Rtnetlink.borrow`), so
 * this thread never enters or checks a namespace (I1) and never closes a descriptor (I2). Calls are
 * run one at a time, in the order they came; each answer carries the call's id. Everything this
 * thread allocates is collected on its own heap, and its requests' kernel work (`sendto`) runs here,
 * not on the agent's event loop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { PodwireError } from '../../base/errors.js';
import { KernelError } from '../../kernel/libc.js';
import { Rtnetlink } from '../../kernel/netlink/rtnetlink.js';
import { RoutedOverlay } from './routed-overlay.js';
import { VxlanOverlay } from './vxlan-overlay.js';
import type {
  OverlayWorkerCall,
  OverlayWorkerData,
  OverlayWorkerError,
  OverlayWorkerReply,
} from './worker-protocol.js';

const port = parentPort;
if (!port) throw new Error('overlay-worker.js runs only as a worker thread');
const data = workerData as OverlayWorkerData;
const nl = Rtnetlink.borrow(data.fd);
const overlay =
  data.kind === 'vxlan'
    ? new VxlanOverlay({ ...data.options, nl })
    : new RoutedOverlay({ ...data.options, nl });

function errorOf(err: unknown): OverlayWorkerError {
  if (err instanceof KernelError)
    return {
      code: err.code,
      message: err.message,
      kernel: { syscall: err.syscall, errno: err.errno, ...(err.extack ? { extack: err.extack } : {}) },
    };
  if (err instanceof PodwireError) return { code: err.code, message: err.message };
  return { code: 'ERR_INTERNAL', message: String(err) };
}

async function run(call: OverlayWorkerCall): Promise<OverlayWorkerReply['result']> {
  switch (call.op) {
    case 'start':
      return { start: await overlay.start() };
    case 'setPeers':
      return { status: await overlay.setPeers(call.peers) };
    case 'updatePeers': {
      await overlay.updatePeers(call.changes);
      // What the caller's mirror of the status needs: the skipped CIDRs of the peers just put.
      const skipped: Array<[string, readonly string[]]> = [];
      for (const p of call.changes.put) {
        const s = overlay.skippedOf(p.name);
        if (s.length > 0) skipped.push([p.name, s]);
      }
      return { skipped };
    }
    case 'stop':
      await overlay.stop();
      nl.close(); // lets go of the descriptor; the main thread closes it once this thread is gone
      return {};
  }
}

let tail: Promise<void> = Promise.resolve();
port.on('message', (call: OverlayWorkerCall) => {
  tail = tail.then(async () => {
    let reply: OverlayWorkerReply;
    try {
      reply = { id: call.id, result: await run(call) };
    } catch (err) {
      reply = { id: call.id, error: errorOf(err) };
    }
    port.postMessage(reply);
    if (call.op === 'stop') port.close(); // nothing else keeps this thread alive: it ends
  });
});
