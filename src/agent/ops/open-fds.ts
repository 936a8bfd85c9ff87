/** The agent's open descriptors, as /proc/<pid>/fd lists them from outside. */
import { readdirSync } from 'node:fs';

export function openDescriptors(): number {
  // Listing /proc/self/fd opens the directory itself, which then appears in the list: not counted.
  return readdirSync('/proc/self/fd').length - 1;
}
