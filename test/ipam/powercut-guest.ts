/**
 * The guest side of the IPAM power-cut test (scripts/vm-powercut.sh): runs inside the qemu guest with
 * the state directory on a virtio disk of its own, which the host kills at a random moment.
 *
 * At each boot it first reads what the last boot left, as the agent's reconcile would (every claim
 * file of the range, raw, and through `FileStore.list`), printing one line per claim and one per torn
 * file (empty or not a record). Then, unless told `check`, it claims and releases addresses with
 * `FileStore`, printing `ANSWERED` only once a claim has resolved (the point where the agent would
 * answer ADD), and `RELEASING` before a release starts (from then on the claim may be gone). The host compares each boot's claims with the
 * previous boot's answers. The lines go to LOG_FILE, on a 9p share of the host: a write there returns
 * once the host has it, so a line is never behind what it reports (the serial console would be: its
 * buffer dies with the guest). Each line starts with `POWERCUT `.
 *
 *   node powercut-guest.js STATE_DIR BOOT_ID LOG_FILE [check]
 */
import { openSync, writeSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { rangeDirName } from '../../src/ipam/file-names.js';
import { FileStore } from '../../src/ipam/file-store.js';
import { asRecord } from '../../src/ipam/store.js';

const RANGE = '10.77.0.0/16';
const [dir, bootId, logFile, mode] = process.argv.slice(2);
if (!dir || !bootId || !logFile) throw new Error('usage: STATE_DIR BOOT_ID LOG_FILE [check]');
const log = openSync(logFile, 'a');
const say = (line: string) => {
  writeSync(log, `POWERCUT ${line}\n`);
};

const store = await FileStore.open(dir);
const rangeDir = join(dir, rangeDirName(RANGE));
const names = await readdir(rangeDir).catch(() => [] as string[]);
for (const name of names) {
  if (name.startsWith('.')) continue; // a temp file: `open` removes those of a crash
  const text = await readFile(join(rangeDir, name), 'utf8');
  let rec: ReturnType<typeof asRecord>;
  try {
    rec = asRecord(JSON.parse(text));
  } catch {
    rec = undefined;
  }
  if (rec === undefined) say(`TORN ${name} ${JSON.stringify(text.slice(0, 60))}`);
}
// What reconcile reads; a torn file is listed as unreadable (said above, and here); a failure of the
// whole listing is reported as such.
const listing = await store.list(RANGE).catch((err: unknown) => {
  say(`LISTFAILED ${JSON.stringify(String(err))}`);
  return { claims: [], unreadable: [] };
});
for (const u of listing.unreadable) say(`UNREADABLE ${u.ip} ${u.reason}`);
const held = listing.claims;
for (const c of held) say(`HELD ${c.ip} ${c.rec.containerId}`);
const owners = new Map<string, number>();
for (const c of held) owners.set(c.rec.containerId, (owners.get(c.rec.containerId) ?? 0) + 1);
for (const [owner, n] of owners) if (n > 1) say(`DUPLICATE ${owner} ${n}`);
say(`CHECKED ${held.length}`);
if (mode === 'check') process.exit(0);

// Claims go from an offset of this boot, so that boots never ask for the same address.
const base = Number(bootId) * 2000;
const mine: Array<{ ip: string; containerId: string }> = [];
for (let i = 0; ; i++) {
  const n = base + i;
  const ip = `10.77.${Math.floor(n / 250) % 250}.${(n % 250) + 1}`;
  const containerId = `pc-${bootId}-${i}`;
  const rec = { containerId, ifname: 'eth0', createdAt: new Date().toISOString(), network: 'powercut' };
  if (await store.claim(RANGE, ip, rec)) {
    say(`ANSWERED ${ip} ${containerId}`);
    mine.push({ ip, containerId });
  }
  if (i % 3 === 2) {
    const old = mine.shift();
    if (old) {
      // From here the claim may be gone after a cut (a DEL in flight): the host stops expecting it.
      say(`RELEASING ${old.ip} ${old.containerId}`);
      if (await store.release(RANGE, old.ip, { containerId: old.containerId, ifname: 'eth0' })) {
        say(`RELEASED ${old.ip} ${old.containerId}`);
      }
    }
  }
  // A pause after each answer: the cut often lands between an answer and the next claim's syncs.
  await sleep(100 + Math.floor(Math.random() * 200));
}
