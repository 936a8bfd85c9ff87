/**
 * The OVS datapath's OVSDB connection: made on first use, made again on the next use after it
 * failed, and, once it has failed while the datapath runs, made again in the background (50 ms,
 * then every 200 ms) so that pending work goes through as soon as ovsdb-server is back. Every use
 * while ovsdb-server cannot be reached fails at once with "not available" (CNI error 50).
 */
import { NotAvailableError } from '../../base/errors.js';
import { OvsdbClient } from './ovsdb-client.js';
import { VswitchDb } from './vswitch-db.js';

export interface OvsdbConnectionHooks {
  /** Whether to keep reconnecting in the background after a failure (the datapath runs). */
  active(): boolean;
  /** Told when the connection failed. */
  lost(err: Error): void;
  /** Told when a connection was made again after one had failed. */
  back(): void;
}

export class OvsdbConnection {
  readonly #remote: string;
  readonly #bridge: string;
  readonly #hooks: OvsdbConnectionHooks;
  #client: OvsdbClient | undefined;
  #connecting: Promise<VswitchDb> | undefined;
  /** Connections made again after one had failed. */
  reconnects = 0;

  constructor(remote: string, bridge: string, hooks: OvsdbConnectionHooks) {
    this.#remote = remote;
    this.#bridge = bridge;
    this.#hooks = hooks;
  }

  /** Why the current connection is unusable, or undefined. */
  get failure(): Error | undefined {
    return this.#client?.failure;
  }

  /** The bridge's view of OVSDB over the connection, (re)connected when there is none or it failed. */
  db(): Promise<VswitchDb> {
    const client = this.#client;
    if (client && !client.closed) return Promise.resolve(new VswitchDb(client, this.#bridge));
    const again = client !== undefined; // the last connection failed: this is a reconnect
    this.#connecting ??= OvsdbClient.connect(this.#remote)
      .then((c) => {
        this.#client = c;
        c.onFailure((err) => this.#lost(err));
        if (again) {
          this.reconnects++;
          this.#hooks.back();
        }
        return new VswitchDb(c, this.#bridge);
      })
      .catch((err: unknown) => {
        const why = err instanceof Error ? err.message : String(err);
        throw new NotAvailableError(`OVSDB is not reachable (${why}): try again`, { cause: err });
      })
      .finally(() => {
        this.#connecting = undefined;
      });
    return this.#connecting;
  }

  /** Waits for requests in flight, then closes; the next `db()` connects afresh. */
  async close(): Promise<void> {
    const client = this.#client;
    this.#client = undefined;
    await client?.close();
  }

  /** Closes at once, failing requests in flight. */
  destroy(): void {
    this.#client?.destroy();
    this.#client = undefined;
  }

  #lost(err: Error): void {
    this.#hooks.lost(err);
    const retry = () => {
      if (!this.#hooks.active() || (this.#client && !this.#client.closed)) return;
      this.db().then(
        () => undefined,
        () => setTimeout(retry, 200).unref(),
      );
    };
    setTimeout(retry, 50).unref();
  }
}
