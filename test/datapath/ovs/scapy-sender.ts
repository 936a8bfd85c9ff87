/**
 * Sends hand-made frames from inside a pod namespace with scapy (python3-scapy, /usr/bin/python3):
 * one long-lived Python process per sender, so scapy is imported once. Each request is a scapy
 * expression (e.g. `Ether(src=...)/ARP(...)`) and a count; the answer comes once the frames are sent.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { createInterface, type Interface } from 'node:readline';
import { patient } from '../../../bed/emulation.js';
import { PYTHON } from './traffic.js';

const LOOP = `
import sys, json
from scapy.all import Ether, Dot1Q, ARP, IP, IPv6, ICMP, ICMPv6EchoRequest, ICMPv6ND_NA, ICMPv6ND_NS, ICMPv6ND_RA, ICMPv6ND_RS, ICMPv6ND_Redirect, ICMPv6NDOptDstLLAddr, ICMPv6NDOptSrcLLAddr, ICMPv6NDOptPrefixInfo, ICMPv6DestUnreach, TCP, UDP, Raw, sendp, conf
conf.verb = 0
print('ready', flush=True)
for line in sys.stdin:
    req = json.loads(line)
    try:
        sendp(eval(req['frame']), iface=req['iface'], count=req['count'], inter=0.01, verbose=False)
        print('sent', flush=True)
    except Exception as e:
        print('error ' + repr(e), flush=True)
`;

export function scapyAvailable(): boolean {
  return spawnSync(PYTHON, ['-c', 'import scapy.all'], { stdio: 'ignore' }).status === 0;
}

export class ScapySender {
  readonly #child: ChildProcess;
  readonly #lines: Interface;
  readonly #pending: Array<(line: string) => void> = [];

  private constructor(child: ChildProcess) {
    this.#child = child;
    this.#lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    this.#lines.on('line', (l) => this.#pending.shift()?.(l));
  }

  static async start(ns: string): Promise<ScapySender> {
    const child = spawn('ip', ['netns', 'exec', ns, PYTHON, '-u', '-c', LOOP], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const sender = new ScapySender(child);
    const ready = await sender.#next(patient(20_000));
    if (ready !== 'ready') {
      await sender.close();
      throw new Error(`scapy did not start: ${ready}`);
    }
    return sender;
  }

  /** Sends `count` copies of the frame `expr` (a scapy expression) out of `iface`. */
  async send(expr: string, count = 3, iface = 'eth0'): Promise<void> {
    this.#child.stdin?.write(`${JSON.stringify({ frame: expr, count, iface })}\n`);
    const answer = await this.#next(patient(10_000));
    if (answer !== 'sent') throw new Error(`scapy could not send ${expr}: ${answer}`);
  }

  async close(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    const exited = once(this.#child, 'exit');
    this.#child.stdin?.end();
    const killer = setTimeout(() => this.#child.kill('SIGKILL'), 2000);
    await exited;
    clearTimeout(killer);
    this.#lines.close();
  }

  #next(timeoutMs: number): Promise<string> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(`no answer in ${timeoutMs} ms`), timeoutMs);
      const exitWatch = () => resolve(`python exited ${this.#child.exitCode}`);
      this.#child.once('exit', exitWatch);
      this.#pending.push((line) => {
        clearTimeout(timer);
        this.#child.off('exit', exitWatch);
        resolve(line);
      });
    });
  }
}
