/**
 * The guest side of the IPAM power-cut test (scripts/vm-powercut.sh): runs inside the qemu guest with
 * the state directory on a virtio disk of its own, which the host kills the moment the guest says
 * `CUT`.
 *
 * At each boot it first reads what the last boot left, as the agent's reconcile would (every claim
 * file of the range, raw, and through `FileStore.list`), printing one line per claim and one per torn
 * file (empty or not a record), and one `MADEHELD` line per store directory an earlier boot created.
 * Then, unless told `check`, it claims and releases a random number of addresses with `FileStore`,
 * printing `ANSWERED` only once a claim has resolved (the point where the agent would answer ADD), and
 * `RELEASING` before a release starts (from then on the claim may be gone), and ends with the step the
 * cut is aimed at (KIND):
 *   claim   one more claim, answered (link, directory fsync done);
 *   release one more release, done (not fsynced by design: the claim may come back);
 *   mkdir   a new store directory two levels deep (`FileStore.open`: mkdirDurably), `MADE` once it
 *           resolved.
 * Then it says `CUT` and does nothing more, so no later sync can make the aimed-at step durable by
 * accident: the host kills qemu on that line, and the next boot finds the step's result or not. The
 * guest's init turns off the kernel's own flushing (ext4 commit interval 600 s, no periodic
 * writeback), so nothing but the store's own syncs writes anything out, however long the host takes
 * to see the line.
 *
 * The lines go to LOG_FILE, on a 9p share of the host: a write there returns once the host has it, so
 * a line is never behind what it reports (the serial console would be: its buffer dies with the
 * guest). Each line starts with `POWERCUT `.
 *
 *   node powercut-guest.js STATE_DIR BOOT_ID LOG_FILE check|claim|release|mkdir
 */
import { openSync, writeSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { rangeDirName } from '../../src/ipam/file-names.js';
import { FileStore } from '../../src/ipam/file-store.js';
import { asRecord } from '../../src/ipam/store.js';

const RANGE = '10.77.0.0/16';
const [dir, bootId, logFile, mode] = process.argv.slice(2);
const KINDS = ['check', 'claim', 'release', 'mkdir'];
if (!dir || !bootId || !logFile || !KINDS.includes(mode ?? ''))
  throw new Error(`usage: STATE_DIR BOOT_ID LOG_FILE ${KINDS.join('|')}`);
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
// The store directories made by earlier boots (mkdir cuts), each where `made/boot-N/ipam` was.
const madeRoot = join(dirname(dir), 'made');
for (const name of await readdir(madeRoot).catch(() => [] as string[])) {
  const there = await readdir(join(madeRoot, name, 'ipam')).then(
    () => true,
    () => false,
  );
  if (there) say(`MADEHELD ${name}`);
}
say(`CHECKED ${held.length}`);
if (mode === 'check') process.exit(0);

// Claims go from an offset of this boot, so that boots never ask for the same address.
const base = Number(bootId) * 2000;
let next = 0;
const mine: Array<{ ip: string; containerId: string }> = [];
const claimOne = async () => {
  for (;;) {
    const n = base + next;
    const ip = `10.77.${Math.floor(n / 250) % 250}.${(n % 250) + 1}`;
    const containerId = `pc-${bootId}-${next}`;
    next++;
    const rec = { containerId, ifname: 'eth0', createdAt: new Date().toISOString(), network: 'powercut' };
    if (await store.claim(RANGE, ip, rec)) {
      say(`ANSWERED ${ip} ${containerId}`);
      mine.push({ ip, containerId });
      return;
    }
  }
};
const releaseOldest = async () => {
  const old = mine.shift();
  if (!old) return;
  // From here the claim may be gone after a cut (a DEL in flight): the host stops expecting it.
  say(`RELEASING ${old.ip} ${old.containerId}`);
  if (await store.release(RANGE, old.ip, { containerId: old.containerId, ifname: 'eth0' })) {
    say(`RELEASED ${old.ip} ${old.containerId}`);
  }
};

// The work before the aimed-at step: 2 to 9 claims, a release after every third.
const rounds = 2 + Math.floor(Math.random() * 8);
for (let i = 0; i < rounds; i++) {
  await claimOne();
  if (i % 3 === 2) await releaseOldest();
}
if (mode === 'claim') await claimOne();
else if (mode === 'release') await releaseOldest();
else {
  const made = join(madeRoot, `boot-${bootId}`, 'ipam');
  await (await FileStore.open(made)).close();
  say(`MADE boot-${bootId}`);
}
say(`CUT ${mode}`);
// Nothing more: the host cuts the power now. An interval keeps the process (and so the guest) alive.
setInterval(() => undefined, 3_600_000);
