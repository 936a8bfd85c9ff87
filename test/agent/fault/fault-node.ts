/**
 * A TestNode whose agent runs fault-agent.js (the agent with fault-injecting seams) instead of
 * `podwire agent`, steered through a fault file in the node's directory.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { TestNode } from '../../../bed/node.js';
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

  protected override agentArgs(): string[] {
    return [ENTRY, this.configPath, this.faultFile];
  }
}
