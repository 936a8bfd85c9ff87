/**
 * `npm run test:e2e`: the upstream Kubernetes network e2e (`[sig-network]`, v1.20.2) against podwire.
 *
 *   node dist/bed/k8s-e2e/main.js [--subset | --focus REGEX] [--nodes N] [--parallel N] [--dual-stack] [--ovs]
 *                                 [--timeout MIN] [--report-dir DIR] [--skip REGEX] [--kubeconfig FILE --netns NS]
 *
 * Brings the cluster bed up (`node dist/bed/k8s/main.js up`: podwire installed from deploy/, with a
 * state file of its own), runs e2e.test in the underlay namespace with the focus `[sig-network]` (or
 * the CI subset) minus the skips of bed/k8s-e2e/tests.yaml (a skip with `unless: dual-stack` is lifted
 * when every Node has two podCIDRs): the [Serial] and [Disruptive] tests one at a time after the others,
 * which run on `--parallel` ginkgo nodes (the ginkgo CLI that scripts/k8s-build.sh builds; serially
 * without it). Then it reads the JUnit reports and prints ran, passed, failed, skipped (with reasons)
 * and expected failures (NetworkPolicy) apart, and tears the bed down, pass or fail.
 *
 * First it runs scripts/k8s-build.sh and scripts/k8s-images.sh, which build what is missing (nothing,
 * in seconds, once built). The rest of the run is bounded by --timeout (minutes; default 150, 25 with --subset): the bed gets 15 of
 * them to come up, the e2e what is left but 6 (teardown); an e2e past its share is interrupted (SIGINT,
 * then SIGKILL to its process group) and the tests it did not reach count as not run.
 *
 * With --kubeconfig and --netns it runs against a cluster that is already up, and leaves it up.
 *
 * Exit: 0 when no test failed unexpectedly and every selected test ran; 1 otherwise; 2 when the run
 * itself could not be made (no e2e binary, the bed did not come up, bad arguments).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { run } from '../../src/process/run.js';
import { dryRunNames, k8sBinDir, REPO } from './e2e-binary.js';
import { readReports, type TestCase } from './junit.js';
import { formatSummary, succeeded, summarize } from './summary.js';
import { activeSkips, alternation, type Capability, loadTestList } from './tests.js';

const FOCUS = '\\[sig-network\\]';
const SERIAL = '\\[Serial\\]|\\[Disruptive\\]';
const BED_MAIN = join(REPO, 'dist/bed/k8s/main.js');

interface Options {
  subset: boolean;
  nodes: number;
  parallel: number;
  dualStack: boolean;
  ovs: boolean;
  timeoutMin: number;
  reportDir: string;
  kubeconfig?: string;
  netns?: string;
  /** Tests left out of this run besides the list's skips (a pattern). */
  skip?: string;
  /** Only the [sig-network] tests whose names match (a pattern): a re-run of a few. */
  focus?: string;
}

function usage(message: string): never {
  process.stderr.write(
    `test:e2e: ${message}\nusage: main.js [--subset] [--nodes N] [--parallel N] [--dual-stack] [--ovs] ` +
      '[--timeout MIN] [--report-dir DIR] [--skip REGEX] [--focus REGEX] [--kubeconfig FILE --netns NS]\n',
  );
  process.exit(2);
}

function parseArgs(argv: string[]): Options {
  const o: Options = {
    subset: process.env.PODWIRE_E2E_SUBSET === '1',
    nodes: 2,
    parallel: 2,
    dualStack: false,
    ovs: false,
    timeoutMin: 0,
    reportDir: join(REPO, '.cache/e2e-k8s'),
  };
  const int = (flag: string, v: string | undefined, min: number): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) usage(`${flag} needs an integer >= ${min}, not ${v ?? 'nothing'}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      const v = argv[++i];
      if (v === undefined) usage(`${a} needs a value`);
      return v;
    };
    if (a === '--subset') o.subset = true;
    else if (a === '--nodes') o.nodes = int(a, next(), 2);
    else if (a === '--parallel') o.parallel = int(a, next(), 1);
    else if (a === '--dual-stack') o.dualStack = true;
    else if (a === '--ovs') o.ovs = true;
    else if (a === '--timeout') o.timeoutMin = int(a, next(), 10);
    else if (a === '--report-dir') o.reportDir = next();
    else if (a === '--kubeconfig') o.kubeconfig = next();
    else if (a === '--netns') o.netns = next();
    else if (a === '--skip') o.skip = next();
    else if (a === '--focus') o.focus = next();
    else usage(`unknown argument ${a}`);
  }
  if ((o.kubeconfig === undefined) !== (o.netns === undefined)) usage('--kubeconfig and --netns go together');
  if (o.subset && o.focus !== undefined) usage('--subset and --focus are two selections: give one');
  if (o.timeoutMin === 0) o.timeoutMin = o.subset ? 25 : 150;
  return o;
}

function log(line: string): void {
  process.stdout.write(`test:e2e: ${line}\n`);
}

/** The bed's `up` as a child process: resolves with its state once it prints READY. */
interface Bed {
  child: ChildProcess;
  stateFile: string;
  kubeconfig: string;
  netns: string;
}

async function bedUp(o: Options, budgetMs: number, logFile: string): Promise<Bed> {
  if (!existsSync(BED_MAIN))
    throw new Error(`${BED_MAIN} is missing: the cluster bed (bed/k8s/) is not built`);
  const stateFile = join(o.reportDir, 'bed-state.json');
  rmSync(stateFile, { force: true });
  // The e2e's images beyond the bed's own (scripts/k8s-images.sh; decision 40).
  const args = [
    BED_MAIN,
    'up',
    '--nodes',
    String(o.nodes),
    '--extra-images',
    'nginx.tar,debian-iptables.tar',
  ];
  if (o.dualStack) args.push('--dual-stack');
  if (o.ovs) args.push('--ovs');
  const fd = openSync(logFile, 'a');
  const child = spawn(process.execPath, args, {
    env: { ...process.env, PODWIRE_K8S_STATE: stateFile },
    stdio: ['ignore', 'pipe', fd],
  });
  closeSync(fd);
  upChild = child;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let out = '';
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (d: Buffer) => {
      const text = d.toString();
      writeFileSync(logFile, text, { flag: 'a' });
      out += text;
      if (/^k8s-bed: READY$/m.test(out)) resolve();
    });
    child.on('exit', (code, signal) =>
      reject(new Error(`the bed exited (${code ?? signal}) before it was up`)),
    );
  });
  const timer = setTimeout(() => child.kill('SIGTERM'), budgetMs);
  try {
    await ready;
  } catch (err) {
    // A bed that fails, or is stopped, removes what it made before it exits.
    await Promise.race([exited, sleep(5 * 60_000, undefined, { ref: false })]);
    throw new Error(`${(err as Error).message}; see ${logFile}`);
  } finally {
    clearTimeout(timer);
    upChild = undefined;
  }
  const state = JSON.parse(readFileSync(stateFile, 'utf8')) as { kubeconfig: string; netns: string };
  return { child, stateFile, kubeconfig: state.kubeconfig, netns: state.netns };
}

/** SIGTERM to the bed's `up`, which removes everything; waits until it has. */
async function bedDown(bed: Bed, budgetMs: number): Promise<boolean> {
  const { child } = bed;
  if (child.exitCode !== null || child.signalCode !== null) return true;
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  // The budget's timer must not hold the process once the bed is gone (`ref: false`): it kept every
  // run alive until its --timeout deadline after the teardown (20 minutes of the last CI).
  const t = await Promise.race([
    gone.then(() => true),
    sleep(budgetMs, undefined, { ref: false }).then(() => false),
  ]);
  return t;
}

/**
 * Runs a command in a network namespace, in a process group of its own, output appended to a log;
 * past `timeoutMs` the group gets SIGINT (ginkgo then reports what it has), and SIGKILL 60 s later.
 * Prints the e2e's progress lines (a test passed or failed) as they come.
 */
async function runInNetns(
  netns: string,
  hosts: string,
  argv: string[],
  logFile: string,
  timeoutMs: number,
): Promise<number> {
  const fd = openSync(logFile, 'a');
  // A mount namespace of its own, where `hosts` is /etc/hosts (private: gone with the process).
  const inHosts = [
    'unshare',
    '--mount',
    '--',
    'sh',
    '-c',
    'mount --bind "$0" /etc/hosts && exec "$@"',
    hosts,
  ];
  const child = spawn('nsenter', [`--net=/run/netns/${netns}`, '--', ...inHosts, ...argv], {
    detached: true,
    stdio: ['ignore', 'pipe', fd],
  });
  closeSync(fd);
  let partial = '';
  child.stdout?.on('data', (d: Buffer) => {
    const text = d.toString();
    writeFileSync(logFile, text, { flag: 'a' });
    const lines = (partial + text).split('\n');
    partial = lines.pop() ?? '';
    for (const l of lines) {
      const m = /^\{"msg":"((?:PASSED|FAILED) .*?)","total"/.exec(l.trim());
      if (m) log(`  ${m[1]}`);
    }
  });
  const exited = new Promise<number>((resolve) => child.on('exit', (code) => resolve(code ?? 1)));
  const signal = (sig: NodeJS.Signals) => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, sig);
    } catch {}
  };
  const interrupt = setTimeout(() => {
    log(`the e2e ran past its ${Math.round(timeoutMs / 60_000)} min: interrupting it`);
    signal('SIGINT');
  }, timeoutMs);
  const kill = setTimeout(() => signal('SIGKILL'), timeoutMs + 60_000);
  stopE2e = () => signal('SIGINT');
  try {
    return await exited;
  } finally {
    clearTimeout(interrupt);
    clearTimeout(kill);
    stopE2e = undefined;
  }
}

let stopE2e: (() => void) | undefined;
let upChild: ChildProcess | undefined;

async function capabilities(bin: string, kubeconfig: string, netns: string): Promise<Set<Capability>> {
  const r = await run(
    'nsenter',
    [
      `--net=/run/netns/${netns}`,
      '--',
      join(bin, 'kubectl'),
      '--kubeconfig',
      kubeconfig,
      'get',
      'nodes',
      '-o',
      'jsonpath={range .items[*]}{.spec.podCIDRs}{"\\n"}{end}',
    ],
    { timeoutMs: 30_000 },
  );
  if (r.code !== 0) throw new Error(`kubectl get nodes failed: ${r.stderr}`);
  const rows = r.stdout.split('\n').filter((l) => l.trim() !== '');
  const caps = new Set<Capability>();
  if (rows.length > 0 && rows.every((l) => l.includes(':') && l.includes('.'))) caps.add('dual-stack');
  return caps;
}

async function main(): Promise<number> {
  const o = parseArgs(process.argv.slice(2));
  rmSync(o.reportDir, { recursive: true, force: true });
  const t0 = Date.now();
  const deadline = t0 + o.timeoutMin * 60_000;
  mkdirSync(o.reportDir, { recursive: true });
  // The binaries and images, built when missing (a no-op in under 10 s when they are there; about
  // 35 minutes on a fresh machine, outside --timeout).
  for (const script of ['scripts/k8s-build.sh', 'scripts/k8s-images.sh']) {
    let r = await run(join(REPO, script), []);
    // Another run of the script (the bed's, another worker's) holds its lock: wait for it, 15 min at most.
    for (let i = 0; i < 90 && r.code !== 0 && /holds .*\.lock/.test(r.stderr); i++) {
      await sleep(10_000);
      r = await run(join(REPO, script), []);
    }
    writeFileSync(join(o.reportDir, 'build.log'), `$ ${script}\n${r.stdout}${r.stderr}`, { flag: 'a' });
    if (r.code !== 0) {
      log(`${script} failed (exit ${r.code}): ${r.stderr.trim().split('\n').slice(-3).join(' / ')}`);
      return 2;
    }
  }
  const bin = k8sBinDir();
  if (bin === undefined) {
    log('no e2e binary although scripts/k8s-build.sh succeeded');
    return 2;
  }
  const ginkgo = existsSync(join(bin, 'ginkgo')) ? join(bin, 'ginkgo') : undefined;
  const tests = loadTestList();
  const focus = o.subset
    ? alternation(tests.subset)
    : o.focus !== undefined
      ? `${FOCUS}.*(?:${o.focus})`
      : FOCUS;
  const selected = (await dryRunNames(join(bin, 'e2e.test'), focus)).filter((n) =>
    n.includes('[sig-network]'),
  );
  log(
    `${selected.length} [sig-network] tests selected${o.subset ? ' (the CI subset)' : ''}; reports in ${o.reportDir}`,
  );

  let bed: Bed | undefined;
  let internet: ChildProcess | undefined;
  let kubeconfig = o.kubeconfig;
  let netns = o.netns;
  const bedLog = join(o.reportDir, 'bed.log');
  const onSignal = () => {
    log('interrupted');
    stopE2e?.();
    upChild?.kill('SIGTERM');
    if (bed === undefined && upChild === undefined) process.exit(130);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    if (kubeconfig === undefined || netns === undefined) {
      const t = Date.now();
      log(
        `bringing the cluster bed up (${o.nodes} nodes${o.dualStack ? ', dual-stack' : ''}${o.ovs ? ', OVS' : ''}); log ${bedLog}`,
      );
      bed = await bedUp(o, Math.min(15 * 60_000, deadline - Date.now() - 6 * 60_000), bedLog);
      kubeconfig = bed.kubeconfig;
      netns = bed.netns;
      log(`cluster up in ${((Date.now() - t) / 1000).toFixed(0)} s`);
    }
    const caps = await capabilities(bin, kubeconfig, netns);
    const skips = activeSkips(tests, caps);
    if (o.skip !== undefined)
      skips.push({ pattern: o.skip, reason: `left out of this run (--skip ${o.skip})` });
    log(
      `cluster: ${caps.has('dual-stack') ? 'dual-stack' : 'single-stack'}; ${skips.length} skip patterns in force`,
    );

    const e2eFlags = (reportDir: string) => [
      `--kubeconfig=${kubeconfig}`,
      '--provider=local',
      `--kubectl-path=${join(bin, 'kubectl')}`,
      `--num-nodes=${o.nodes}`,
      `--report-dir=${reportDir}`,
      '--disable-log-dump',
    ];
    const e2eLog = join(o.reportDir, 'e2e.log');
    // The Internet the upstream suite assumes: "[sig-network] Networking"'s BeforeEach GETs
    // http://google.com from the test process and fails every test of that describe unless it gets
    // a 200 ("not really a test of kubernetes", upstream says). Here google.com is the underlay's
    // own address, in the e2e's /etc/hosts only, where agnhost netexec answers on port 80: nothing
    // leaves the underlay namespace.
    const apiHost = new URL(
      /server:\s*(\S+)/.exec(readFileSync(kubeconfig, 'utf8'))?.[1] ?? 'https://invalid',
    ).hostname.replace(/^\[|\]$/g, '');
    const hosts = join(o.reportDir, 'hosts');
    writeFileSync(hosts, `${readFileSync('/etc/hosts', 'utf8')}\n${apiHost} google.com\n`);
    internet = spawn(
      'nsenter',
      [
        `--net=/run/netns/${netns}`,
        '--',
        join(bin, 'agnhost'),
        'netexec',
        '--http-port=80',
        '--udp-port=8081',
      ],
      { stdio: ['ignore', 'ignore', openSync(join(o.reportDir, 'internet.log'), 'a')] },
    );
    // Up before the first test asks (a loaded machine starts it in seconds).
    for (let i = 0; ; i++) {
      const r = await run('nsenter', [
        `--net=/run/netns/${netns}`,
        '--',
        'curl',
        '-sf',
        '-m',
        '2',
        '-o',
        '/dev/null',
        `http://${apiHost}/`,
      ]);
      if (r.code === 0) break;
      if (i === 30)
        throw new Error(
          `agnhost netexec on ${apiHost}:80 does not answer: see ${join(o.reportDir, 'internet.log')}`,
        );
      await sleep(1000);
    }
    const skip = alternation(skips.map((e) => e.pattern));
    const passes: { name: string; focus: string; skip: string; nodes: number }[] = [
      { name: 'parallel', focus, skip: `${skip}|${SERIAL}`, nodes: ginkgo ? o.parallel : 1 },
      { name: 'serial', focus: `(?:${focus}).*(?:${SERIAL})`, skip, nodes: 1 },
    ];
    const cases: TestCase[] = [];
    for (const p of passes) {
      const reportDir = join(o.reportDir, p.name);
      mkdirSync(reportDir, { recursive: true });
      const left = deadline - Date.now() - 6 * 60_000;
      if (left < 60_000) {
        log(`no time left for the ${p.name} pass`);
        break;
      }
      const t = Date.now();
      log(`${p.name} pass (${p.nodes} ginkgo node${p.nodes > 1 ? 's' : ''}); log ${e2eLog}`);
      const argv =
        ginkgo !== undefined
          ? [
              ginkgo,
              ...(p.nodes > 1 ? ['-p', `-nodes=${p.nodes}`] : []),
              '-noColor',
              `-focus=${p.focus}`,
              `-skip=${p.skip}`,
              join(bin, 'e2e.test'),
              '--',
              ...e2eFlags(reportDir),
            ]
          : [
              join(bin, 'e2e.test'),
              '--ginkgo.noColor',
              `--ginkgo.focus=${p.focus}`,
              `--ginkgo.skip=${p.skip}`,
              ...e2eFlags(reportDir),
            ];
      const code = await runInNetns(netns, hosts, argv, e2eLog, left);
      log(`${p.name} pass: exit ${code} after ${((Date.now() - t) / 60_000).toFixed(1)} min`);
      try {
        cases.push(...readReports(reportDir));
      } catch (err) {
        log(`no report from the ${p.name} pass: ${(err as Error).message}`);
      }
    }
    const summary = summarize(selected, skips, tests.expectedFailures, cases);
    const text = `${formatSummary(summary)}\nwall time ${((Date.now() - t0) / 60_000).toFixed(1)} min (teardown not included)`;
    writeFileSync(join(o.reportDir, 'summary.txt'), `${text}\n`);
    process.stdout.write(`${text}\n`);
    return succeeded(summary) ? 0 : 1;
  } catch (err) {
    log(`${(err as Error).message}`);
    return 2;
  } finally {
    internet?.kill('SIGKILL');
    if (bed !== undefined) {
      const t = Date.now();
      const clean = await bedDown(bed, Math.max(deadline - Date.now(), 5 * 60_000));
      log(
        clean
          ? `cluster torn down in ${((Date.now() - t) / 1000).toFixed(0)} s`
          : `the bed did not finish its teardown: see ${bedLog}`,
      );
    }
  }
}

process.exitCode = await main();
