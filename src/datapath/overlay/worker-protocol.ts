/**
 * What the main thread and the overlay's worker thread (`overlay-worker.ts`) send each other: plain
 * data, copied by `postMessage`.
 */
import type { PodwireErrorCode } from '../../base/errors.js';
import type { OverlayStatus, PeerChanges, PeerNode } from './overlay.js';
import type { RoutedOverlayOptions } from './routed-overlay.js';
import type { VxlanOverlayOptions } from './vxlan-overlay.js';

/** The overlay the worker runs, without its netlink client (the worker makes one on `fd`). */
export type OverlaySpec =
  | { kind: 'vxlan'; options: Omit<VxlanOverlayOptions, 'nl' | 'legacyPeerProgramming'> }
  | { kind: 'routed'; options: Omit<RoutedOverlayOptions, 'nl' | 'legacyPeerProgramming'> };

/** `workerData`: the spec, and a NETLINK_ROUTE descriptor in the node namespace that the main thread owns. */
export type OverlayWorkerData = OverlaySpec & { fd: number };

export type OverlayWorkerCall = { id: number } & (
  | { op: 'start' }
  | { op: 'setPeers'; peers: readonly PeerNode[] }
  | { op: 'updatePeers'; changes: PeerChanges }
  | { op: 'stop' }
);

export interface OverlayWorkerError {
  code: PodwireErrorCode;
  message: string;
  /** A KernelError's fields, so the main thread rebuilds the same error. */
  kernel?: { syscall: string; errno: number; extack?: string };
}

export interface OverlayWorkerReply {
  id: number;
  result?: {
    start?: { vtepMac?: string };
    status?: OverlayStatus;
    /** updatePeers: the peers just put that have skipped CIDRs, with the reasons. */
    skipped?: Array<[string, readonly string[]]>;
  };
  error?: OverlayWorkerError;
}
