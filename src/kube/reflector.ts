/**
 * List then watch one collection of the API server into a cache the agent reads synchronously, and
 * tell subscribers what changed (what client-go calls a reflector and its store). The protocol:
 *
 * - list, in pages of `pageSize` (`limit`/`continue`), and remember the list's `resourceVersion`;
 * - watch from it (`watch=1&resourceVersion=RV&allowWatchBookmarks=true&timeoutSeconds=T`): each
 *   ADDED, MODIFIED or DELETED moves the cache and the resourceVersion to the event's; a BOOKMARK
 *   moves only the resourceVersion (nothing changed up to it, so a watch resumed from it has less
 *   to replay and is less likely to fall out of the history window);
 * - a watch that ends (the server's timeout, a dropped connection) resumes from the last
 *   resourceVersion, so nothing is lost or repeated;
 * - when that history is gone (HTTP 410 Gone on the watch, an ERROR event with code 410 in its
 *   stream, or a `continue` token that expired mid-list) the reflector lists afresh and emits the
 *   difference from its cache: an object changed while it was away is `modified`, one deleted is
 *   `deleted`, a new one `added`; subscribers see one gap-free stream of changes either way;
 * - any other failure waits with doubling, jittered backoff (`cluster/backoff.ts`) and tries again;
 *   the cache keeps serving the last state meanwhile and `health()` says why it is stale.
 *
 * Resource versions are opaque: compared for equality only, never ordered.
 *
 * Every object passes `decode` (the consumer's validation) before it enters the cache; one that
 * fails is logged once per resourceVersion with the reason, counted in `stats.invalidObjects`, and
 * treated as absent (as the etcd store treats an invalid record): nothing else is touched.
 */
import { Backoff, pause } from '../cluster/backoff.js';
import { HealthState } from '../cluster/health.js';
import type { KubeClient } from './kube-client.js';
import { KubeApiError, type WireStatus } from './kube-error.js';

export interface ObjectMeta {
  name: string;
  namespace?: string;
  resourceVersion: string;
}

export type CacheEvent<T> =
  | { type: 'added'; key: string; object: T }
  | { type: 'modified'; key: string; object: T; old: T }
  | { type: 'deleted'; key: string; old: T };

export type KubeLog = (event: string, fields: Record<string, unknown>) => void;

export interface ReflectorOptions<T> {
  client: KubeClient;
  /** The collection's path, e.g. `/api/v1/nodes` or `/api/v1/pods`. */
  path: string;
  fieldSelector?: string;
  labelSelector?: string;
  /** The consumer's view of one object; throws (a message naming the field) when it is invalid. */
  decode: (object: unknown, meta: ObjectMeta) => T;
  log: KubeLog;
  /** Objects per list page; default 500. */
  pageSize?: number;
  /** A watch's `timeoutSeconds`; default a random value in 300-600 (as client-go spreads them). */
  watchTimeoutSeconds?: number;
  backoff?: { initialMs: number; maxMs: number };
}

export interface ReflectorStats {
  lists: number;
  watches: number;
  bookmarks: number;
  /** Relists because the server no longer had the history asked for (410). */
  relists: number;
  invalidObjects: number;
  errors: number;
}

interface Entry<T> {
  object: T;
  resourceVersion: string;
}

type WatchOutcome = 'resume' | 'gone';

/** `namespace/name`, or `name` for a cluster-scoped object. */
export function objectKey(meta: { name: string; namespace?: string }): string {
  return meta.namespace ? `${meta.namespace}/${meta.name}` : meta.name;
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = (): void => undefined;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

function metaOf(object: unknown): ObjectMeta {
  const m = (object as { metadata?: Record<string, unknown> } | null)?.metadata;
  if (typeof m !== 'object' || m === null) throw new Error('no metadata');
  if (typeof m.name !== 'string' || m.name === '') throw new Error('metadata.name missing');
  if (typeof m.resourceVersion !== 'string' || m.resourceVersion === '') {
    throw new Error('metadata.resourceVersion missing');
  }
  const meta: ObjectMeta = { name: m.name, resourceVersion: m.resourceVersion };
  if (typeof m.namespace === 'string' && m.namespace !== '') meta.namespace = m.namespace;
  return meta;
}

export class Reflector<T> {
  readonly stats: ReflectorStats = {
    lists: 0,
    watches: 0,
    bookmarks: 0,
    relists: 0,
    invalidObjects: 0,
    errors: 0,
  };
  readonly #opts: ReflectorOptions<T>;
  readonly #cache = new Map<string, Entry<T>>();
  readonly #subscribers = new Set<(e: CacheEvent<T>) => void>();
  readonly #health = new HealthState(false, 'not listed yet');
  readonly #stop = new AbortController();
  /** The last resourceVersion whose changes are all in the cache. */
  #rv: string | undefined;
  /** The key and resourceVersion of invalid objects already reported, so each is logged once. */
  readonly #reported = new Map<string, string>();
  #running: Promise<void> | undefined;
  #synced: { promise: Promise<void>; resolve: () => void };
  /** Settled by the first list, or the first failure before it: someone waiting may stop waiting. */
  #attempted: { promise: Promise<void>; resolve: () => void };

  constructor(opts: ReflectorOptions<T>) {
    this.#opts = opts;
    this.#synced = deferred();
    this.#attempted = deferred();
  }

  /** For logs: the collection and its selectors. */
  get what(): string {
    const sel = [this.#opts.fieldSelector, this.#opts.labelSelector].filter((s) => s).join(' ');
    return sel ? `${this.#opts.path} (${sel})` : this.#opts.path;
  }

  /** The last resourceVersion the cache reflects (undefined before the first list). */
  get resourceVersion(): string | undefined {
    return this.#rv;
  }

  get synced(): boolean {
    return this.#rv !== undefined;
  }

  /** Resolves once the first list is in the cache, or when the reflector stops. */
  waitSynced(): Promise<void> {
    return this.#synced.promise;
  }

  /**
   * Resolves once the first list is in the cache, or the first attempt has failed (the API server
   * unreachable: `health()` says why), or the reflector stops: a caller that must not wait through an
   * outage (the pod CIDRs at start, remembered on disk) learns at once that there is no answer.
   */
  waitAttempted(): Promise<void> {
    return this.#attempted.promise;
  }

  get(key: string): T | undefined {
    return this.#cache.get(key)?.object;
  }

  /** The resourceVersion of the cached object under `key`. */
  versionOf(key: string): string | undefined {
    return this.#cache.get(key)?.resourceVersion;
  }

  keys(): string[] {
    return [...this.#cache.keys()];
  }

  list(): T[] {
    return [...this.#cache.values()].map((e) => e.object);
  }

  get size(): number {
    return this.#cache.size;
  }

  health(): ReturnType<HealthState['snapshot']> {
    return this.#health.snapshot();
  }

  /** Calls `fn` for every change from now on, synchronously, after the cache has it. */
  subscribe(fn: (e: CacheEvent<T>) => void): () => void {
    this.#subscribers.add(fn);
    return () => this.#subscribers.delete(fn);
  }

  start(): void {
    if (this.#running) return;
    this.#running = this.#loop().finally(() => {
      this.#synced.resolve();
      this.#attempted.resolve();
    });
  }

  /** Idempotent; ends the watch and resolves when the loop has returned. The cache stays readable. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#running;
  }

  #query(extra: Record<string, string>): string {
    const q = new URLSearchParams();
    if (this.#opts.fieldSelector) q.set('fieldSelector', this.#opts.fieldSelector);
    if (this.#opts.labelSelector) q.set('labelSelector', this.#opts.labelSelector);
    for (const [k, v] of Object.entries(extra)) q.set(k, v);
    return `${this.#opts.path}?${q.toString()}`;
  }

  async #loop(): Promise<void> {
    const signal = this.#stop.signal;
    const backoff = new Backoff(this.#opts.backoff ?? { initialMs: 200, maxMs: 10_000 });
    let needList = true;
    while (!signal.aborted) {
      try {
        if (needList) {
          await this.#relist(signal);
          needList = false;
          backoff.reset();
        }
        const outcome = await this.#watch(signal, () => backoff.reset());
        if (outcome === 'gone') {
          this.stats.relists++;
          this.#opts.log('kube-watch-gone', { what: this.what, resourceVersion: this.#rv });
          needList = true;
        }
      } catch (err) {
        if (signal.aborted) break;
        if (err instanceof KubeApiError && err.gone) {
          // a `continue` token that expired between pages, or a 410 on the watch request itself
          this.stats.relists++;
          this.#opts.log('kube-watch-gone', {
            what: this.what,
            resourceVersion: this.#rv,
            error: err.message,
          });
          needList = true;
          continue;
        }
        this.stats.errors++;
        const message = err instanceof Error ? err.message : String(err);
        if (this.#health.ok) this.#opts.log('kube-watch-failed', { what: this.what, error: message });
        this.#health.markDown(message);
        this.#attempted.resolve();
        await pause(backoff.next(), signal);
      }
    }
  }

  /** Lists every page, then replaces the cache with the list, emitting the difference. */
  async #relist(signal: AbortSignal): Promise<void> {
    const pageSize = String(this.#opts.pageSize ?? 500);
    const fresh = new Map<string, Entry<T>>();
    let cont: string | undefined;
    let rv = '';
    do {
      const page = (await this.#opts.client.getJson(
        this.#query(cont ? { limit: pageSize, continue: cont } : { limit: pageSize }),
        signal,
      )) as { metadata?: { resourceVersion?: unknown; continue?: unknown }; items?: unknown };
      if (!Array.isArray(page.items) || typeof page.metadata?.resourceVersion !== 'string') {
        throw new KubeApiError(`list ${this.what}: not a list`, { unreachable: false });
      }
      rv = page.metadata.resourceVersion;
      for (const item of page.items) {
        const entry = this.#decode(item);
        if (entry) fresh.set(entry.key, entry.entry);
      }
      cont =
        typeof page.metadata.continue === 'string' && page.metadata.continue !== ''
          ? page.metadata.continue
          : undefined;
    } while (cont !== undefined);
    this.stats.lists++;
    for (const [key, old] of this.#cache) {
      if (!fresh.has(key)) {
        this.#cache.delete(key);
        this.#emit({ type: 'deleted', key, old: old.object });
      }
    }
    for (const [key, entry] of fresh) {
      const old = this.#cache.get(key);
      this.#cache.set(key, entry);
      if (old === undefined) this.#emit({ type: 'added', key, object: entry.object });
      else if (old.resourceVersion !== entry.resourceVersion) {
        this.#emit({ type: 'modified', key, object: entry.object, old: old.object });
      }
    }
    for (const key of this.#reported.keys()) if (!fresh.has(key)) this.#reported.delete(key);
    this.#rv = rv;
    this.#health.markOk();
    this.#synced.resolve();
    this.#attempted.resolve();
    this.#opts.log('kube-listed', { what: this.what, objects: this.#cache.size, resourceVersion: rv });
  }

  async #watch(signal: AbortSignal, opened: () => void): Promise<WatchOutcome> {
    const timeout = this.#opts.watchTimeoutSeconds ?? 300 + Math.floor(Math.random() * 300);
    const path = this.#query({
      watch: '1',
      resourceVersion: this.#rv ?? '',
      allowWatchBookmarks: 'true',
      timeoutSeconds: String(timeout),
    });
    const stream = this.#opts.client.lines(path, signal, (timeout + 30) * 1000, () => {
      this.stats.watches++;
      this.#health.markOk();
      opened();
    });
    for await (const line of stream) {
      const outcome = this.#event(line);
      if (outcome === 'gone') return 'gone';
    }
    return 'resume';
  }

  /** One line of a watch stream. */
  #event(line: string): WatchOutcome | undefined {
    let ev: { type?: unknown; object?: unknown };
    try {
      ev = JSON.parse(line) as typeof ev;
    } catch {
      throw new KubeApiError(`watch ${this.what}: a line that is not JSON: ${line.slice(0, 120)}`, {
        unreachable: false,
      });
    }
    const type = ev.type;
    if (type === 'ERROR') {
      const status = (ev.object ?? {}) as WireStatus;
      if (status.code === 410) return 'gone';
      throw new KubeApiError(
        `watch ${this.what}: ERROR ${status.code ?? '?'} ${status.reason ?? ''}: ${status.message ?? ''}`,
        {
          status: status.code,
          reason: status.reason,
          unreachable: false,
        },
      );
    }
    if (type === 'BOOKMARK') {
      const rv = (ev.object as { metadata?: { resourceVersion?: unknown } } | undefined)?.metadata
        ?.resourceVersion;
      if (typeof rv === 'string' && rv !== '') {
        this.#rv = rv;
        this.stats.bookmarks++;
      }
      return undefined;
    }
    if (type !== 'ADDED' && type !== 'MODIFIED' && type !== 'DELETED') {
      throw new KubeApiError(`watch ${this.what}: unknown event type ${String(type)}`, {
        unreachable: false,
      });
    }
    let meta: ObjectMeta;
    try {
      meta = metaOf(ev.object);
    } catch (err) {
      this.#invalid('?', '', (err as Error).message);
      return undefined;
    }
    const key = objectKey(meta);
    const old = this.#cache.get(key);
    const decoded = type === 'DELETED' ? undefined : this.#decode(ev.object);
    if (decoded === undefined) {
      // deleted, or changed into something invalid: either way gone for the consumers
      this.#cache.delete(key);
      if (old) this.#emit({ type: 'deleted', key, old: old.object });
      if (type === 'DELETED') this.#reported.delete(key);
    } else {
      this.#cache.set(key, decoded.entry);
      if (old) this.#emit({ type: 'modified', key, object: decoded.entry.object, old: old.object });
      else this.#emit({ type: 'added', key, object: decoded.entry.object });
    }
    this.#rv = meta.resourceVersion;
    return undefined;
  }

  #decode(object: unknown): { key: string; entry: Entry<T> } | undefined {
    let meta: ObjectMeta;
    try {
      meta = metaOf(object);
    } catch (err) {
      this.#invalid('?', '', (err as Error).message);
      return undefined;
    }
    const key = objectKey(meta);
    try {
      return {
        key,
        entry: { object: this.#opts.decode(object, meta), resourceVersion: meta.resourceVersion },
      };
    } catch (err) {
      this.#invalid(key, meta.resourceVersion, err instanceof Error ? err.message : String(err));
      return undefined;
    }
  }

  #invalid(key: string, rv: string, reason: string): void {
    if (rv !== '' && this.#reported.get(key) === rv) return;
    this.stats.invalidObjects++;
    if (rv !== '') this.#reported.set(key, rv);
    this.#opts.log('kube-object-invalid', { what: this.#opts.path, name: key, resourceVersion: rv, reason });
  }

  #emit(e: CacheEvent<T>): void {
    for (const fn of [...this.#subscribers]) {
      try {
        fn(e);
      } catch (err) {
        // a subscriber's failure is its own; the cache and the other subscribers go on
        this.#opts.log('kube-subscriber-failed', {
          what: this.what,
          key: e.key,
          error: (err as Error).message,
        });
      }
    }
  }
}
