/**
 * A file descriptor with exactly one owner (invariant I2): `close()` closes it once and forgets the
 * number, so a second close, or a close after an error path already closed it, can never close a
 * descriptor that a concurrent request has been given meanwhile under the same number.
 */
import { closeSync } from 'node:fs';
import { InternalError } from './errors.js';

export class OwnedFd implements Disposable {
  #fd: number;
  readonly #what: string;
  readonly #closeFn: (fd: number) => void;

  /**
   * `what` names the descriptor in the error a use after close throws ("netns handle /run/netns/x");
   * `closeFn` closes the number (default: fs.closeSync; sockets pass libc's close).
   */
  constructor(fd: number, what: string, closeFn: (fd: number) => void = closeSync) {
    this.#fd = fd;
    this.#what = what;
    this.#closeFn = closeFn;
  }

  /** The descriptor; throws once closed. */
  get fd(): number {
    if (this.#fd < 0) throw new InternalError(`${this.#what} used after close`);
    return this.#fd;
  }

  get closed(): boolean {
    return this.#fd < 0;
  }

  /** Closes the descriptor once; later calls do nothing. */
  close(): void {
    if (this.#fd < 0) return;
    const fd = this.#fd;
    this.#fd = -1;
    this.#closeFn(fd);
  }

  /**
   * Gives up ownership without closing: the caller takes the number (e.g. to close it on another
   * thread); later calls of `close()` do nothing.
   */
  release(): number {
    const fd = this.#fd;
    this.#fd = -1;
    return fd;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
