/**
 * A TestNode whose agent runs fault-agent.js (the agent with fault-injecting seams) instead of
 * `podwire agent`, steered through a fault file in the node's directory.
 */
import { spawn } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { TestNode } from '../../../bed/node.js';
import { AGENT_NODE_FLAGS, AGENT_THREADPOOL_SIZE } from '../../../src/agent/runtime.js';
import type { Fault } from './fault-plan.js';

const ENTRY = join(import.meta.dirname, 'fault-agent.js');

export class FaultNode extends TestNode {
  get faultFile(): string {
    return join(this.dir, 'fault.json');
  }

  /** The next calls run under `fault`; undefined: no fault. */
  setFault(fault: Fault | Fault[] | undefined): void {
    if (fault === undefined) rmSync(this.faultFile, { force: true });
    else writeFileSync(this.faultFile, JSON.stringify(fault));
  }

  override async startAgent(): Promise<void> {
    const child = spawn(
      'ip',
      [
        'netns',
        'exec',
        this.nodeNs,
        process.execPath,
        ...AGENT_NODE_FLAGS,
        ENTRY,
        this.configPath,
        this.faultFile,
      ],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, UV_THREADPOOL_SIZE: String(AGENT_THREADPOOL_SIZE) },
      },
    );
    this.agent = child;
    const from = this.logs.length;
    child.stderr?.on('data', (d: Buffer) => {
      this.logs += d.toString();
    });
    const deadline = Date.now() + 15_000;
    while (!this.logs.includes('"agent started"', from)) {
      if (child.exitCode !== null) throw new Error(`fault agent exited ${child.exitCode}: ${this.logs}`);
      if (Date.now() > deadline) throw new Error(`fault agent did not start: ${this.logs}`);
      await sleep(20);
    }
  }
}
