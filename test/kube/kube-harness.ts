/** Test helpers for the watch layer against the bed's real kube-apiserver (bed/kube-api.ts). */
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeApiServer } from '../../bed/kube-api.js';
import { KubeClient } from '../../src/kube/kube-client.js';
import { kubeconfigConnection } from '../../src/kube/kube-config.js';
import type { CacheEvent, KubeLog } from '../../src/kube/reflector.js';

type ConnectFn = (t: { host: string; port: number }) => Socket;

/**
 * The network between the test's client and the API server, cut on cue: `close()` destroys every
 * connection and later connections go to a closed port of the same namespace (a real refusal);
 * `open()` lets them through again. The API server itself keeps running.
 */
export class Gate {
  #open = true;
  readonly #sockets = new Set<Socket>();

  wrap(connect: ConnectFn): ConnectFn {
    return (t) => {
      const s = connect(this.#open ? t : { host: t.host, port: 1 });
      this.#sockets.add(s);
      s.once('close', () => this.#sockets.delete(s));
      return s;
    };
  }

  close(): void {
    this.#open = false;
    for (const s of this.#sockets) s.destroy();
  }

  open(): void {
    this.#open = true;
  }
}

/** A client of `server` as its admin, its sockets made inside the server's namespace. */
export function adminClient(server: KubeApiServer, gate?: Gate): KubeClient {
  const connect = gate ? gate.wrap(server.connect) : server.connect;
  return new KubeClient(kubeconfigConnection(server.kubeconfig), { connect, requestTimeoutMs: 10_000 });
}

export class Recorder<T> {
  readonly events: CacheEvent<T>[] = [];
  readonly lines: { event: string; fields: Record<string, unknown> }[] = [];
  readonly log: KubeLog = (event, fields) => {
    this.lines.push({ event, fields });
  };
  readonly onEvent = (e: CacheEvent<T>): void => {
    this.events.push(e);
  };

  summary(): string[] {
    return this.events.map((e) => `${e.type} ${e.key}`);
  }
}

/** Polls `pred` every 50 ms; rejects after `timeoutMs` with `what` and `detail()`. */
export async function until(
  pred: () => boolean,
  what: string,
  timeoutMs = 20_000,
  detail = (): string => '',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what} ${detail()}`);
    await sleep(50);
  }
}

export function nodeObject(
  name: string,
  opts: { labels?: Record<string, string>; annotations?: Record<string, string>; podCIDRs?: string[] } = {},
): object {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: opts.labels ?? {}, annotations: opts.annotations ?? {} },
    spec: opts.podCIDRs ? { podCIDR: opts.podCIDRs[0], podCIDRs: opts.podCIDRs } : {},
  };
}

/** `kubectl get nodes`: each node's name and resourceVersion, as the server holds them now. */
export async function freshNodes(server: KubeApiServer): Promise<Map<string, string>> {
  const out = await server.kubectlOk(['get', 'nodes', '-o', 'json']);
  const list = JSON.parse(out) as { items: { metadata: { name: string; resourceVersion: string } }[] };
  return new Map(list.items.map((n) => [n.metadata.name, n.metadata.resourceVersion]));
}
