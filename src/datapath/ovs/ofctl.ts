/**
 * OpenFlow through `ovs-ofctl`: one process per call, flows fed on stdin. A pod operation costs at
 * most one process (docs/architecture.md, "Performance": ~10-15 ms each here); every multi-flow change is one
 * OpenFlow bundle (`--bundle`, OpenFlow 1.4+), which the switch applies atomically or not at all.
 */
import { spawn } from 'node:child_process';
import { DatapathError } from '../../base/errors.js';
import { type FlowEntry, parseDump } from './flow-text.js';
import { ProcessSlots } from './process-slots.js';

/** ovs-ofctl processes at once, per switch (see process-slots.ts). */
const MAX_PROCESSES = 8;

export interface OfctlOptions {
  /** The switch: `unix:RUNDIR/BRIDGE.mgmt`, or a bridge name for the default run directory. */
  target: string;
  binary?: string;
  /** OpenFlow version, at least OpenFlow14 for bundles. */
  protocol?: string;
  timeoutMs?: number;
}

export class Ofctl {
  readonly target: string;
  readonly #binary: string;
  readonly #protocol: string;
  readonly #timeoutMs: number;
  readonly #slots = new ProcessSlots(MAX_PROCESSES);

  constructor(options: OfctlOptions) {
    this.target = options.target;
    this.#binary = options.binary ?? 'ovs-ofctl';
    this.#protocol = options.protocol ?? 'OpenFlow15';
    this.#timeoutMs = options.timeoutMs ?? 10_000;
  }

  /**
   * Applies flow mods atomically. Each line is a flow in add-flows syntax, optionally prefixed by
   * `delete`, `modify`, ... (ovs-ofctl(8), add-flows). Equivalent to: `ovs-ofctl --bundle add-flows
   * SWITCH - < lines`.
   */
  async bundle(lines: string[]): Promise<void> {
    if (lines.length === 0) return;
    await this.#run(['--bundle', 'add-flows', this.target, '-'], `${lines.join('\n')}\n`);
  }

  /**
   * Makes the switch hold exactly `lines`, atomically: flows already present with the same actions
   * and cookie are left alone (their counters keep counting), others are added, changed or deleted.
   * Equivalent to: `ovs-ofctl --bundle replace-flows SWITCH - < lines`.
   */
  async replaceFlows(lines: string[]): Promise<void> {
    await this.#run(['--bundle', 'replace-flows', this.target, '-'], `${lines.join('\n')}\n`);
  }

  /**
   * Equivalent to: `ovs-ofctl -O OpenFlow10 mod-port SWITCH PORT no-flood`: FLOOD no longer outputs to
   * the port. OpenFlow 1.1 dropped the bit from the protocol; OVS keeps honouring it, but only an
   * OpenFlow 1.0 port-mod can set it (the bridge must allow OpenFlow10). Like flows, it does not
   * outlive ovs-vswitchd.
   */
  async setNoFlood(port: string): Promise<void> {
    await this.#run(['mod-port', this.target, port, 'no-flood'], undefined, 'OpenFlow10');
  }

  /**
   * Whether FLOOD skips `port`: `ovs-ofctl -O OpenFlow10 show SWITCH`, the port's `config:` line (only
   * OpenFlow 1.0 reports the bit).
   */
  async noFlood(port: string): Promise<boolean> {
    const text = await this.#run(['show', this.target], undefined, 'OpenFlow10');
    const at = text.search(new RegExp(`^ *\\d+\\(${port.replace(/[^\w-]/g, '\\$&')}\\):`, 'm'));
    if (at < 0) throw new DatapathError(`ovs-ofctl show: no port ${port}`);
    const config = /config:\s*([^\n]*)/.exec(text.slice(at));
    return /\bNO_FLOOD\b/.test(config?.[1] ?? '');
  }

  /** Equivalent to: `ovs-ofctl del-flows SWITCH MATCH`. */
  async delFlows(match: string): Promise<void> {
    await this.#run(['del-flows', this.target, match]);
  }

  /** Equivalent to: `ovs-ofctl dump-flows SWITCH [MATCH]`, parsed. */
  async dumpFlows(match?: string): Promise<FlowEntry[]> {
    const args = ['dump-flows', this.target];
    if (match) args.push(match);
    return parseDump(await this.#run(args));
  }

  #run(args: string[], input?: string, protocol = this.#protocol): Promise<string> {
    return this.#slots.run(() => this.#spawn(['-O', protocol, ...args], input));
  }

  #spawn(argv: string[], input?: string): Promise<string> {
    const what = `${this.#binary} ${argv.join(' ')}`;
    return new Promise((resolve, reject) => {
      const child = spawn(this.#binary, argv, {
        stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      child.stdout?.on('data', (d: Buffer) => out.push(d));
      child.stderr?.on('data', (d: Buffer) => err.push(d));
      const timer = setTimeout(() => child.kill('SIGKILL'), this.#timeoutMs);
      child.on('error', (e) => {
        clearTimeout(timer);
        reject(new DatapathError(`${what}: cannot run`, { cause: e }));
      });
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        if (code === 0) {
          resolve(Buffer.concat(out).toString());
          return;
        }
        const why = signal ? `killed by ${signal}` : `exited ${code}`;
        const stderr = Buffer.concat(err).toString().trim();
        reject(new DatapathError(`${what} ${why}: ${stderr}`));
      });
      if (child.stdin) {
        // The child may exit before reading everything (e.g. a parse error); its stderr says why.
        child.stdin.on('error', () => undefined);
        child.stdin.end(input);
      }
    });
  }
}
