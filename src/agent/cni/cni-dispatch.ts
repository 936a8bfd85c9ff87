/**
 * Turns one relayed CNI call (the runtime's CNI_* environment and stdin) into the answer the relay
 * prints: validate, schedule on the attachment's key, run the command, format for the requested
 * cniVersion. Every failure becomes a CNI error object; nothing thrown escapes (I6).
 */
import { randomUUID } from 'node:crypto';
import { InvalidConfigError, PodwireError } from '../../base/errors.js';
import { parseBandwidth } from '../../cni/bandwidth.js';
import { DecodedStdin, parseNetConf, parseVersionRequest } from '../../cni/config.js';
import { parseEnv, podIdentity } from '../../cni/env.js';
import { toCniErrorObject } from '../../cni/errors.js';
import { formatResult, formatVersionResult } from '../../cni/result.js';
import { CNI_COMMANDS, type CniEnv, type NetConf } from '../../cni/types.js';
import { isSupportedVersion, LATEST_VERSION } from '../../cni/versions.js';
import type { AgentContext } from '../context.js';
import type { Logger } from '../log.js';
import type { CniMetrics } from '../ops/metrics.js';
import { cmdAdd } from './cmd-add.js';
import { cmdCheck } from './cmd-check.js';
import { cmdDel } from './cmd-del.js';
import { cmdGc } from './cmd-gc.js';
import { cmdStatus } from './cmd-status.js';
import { attachmentKey } from './host-veth.js';
import { poolRequest } from './pool-select.js';
import type { Scheduler } from './scheduler.js';

export interface CniAnswer {
  /** The relay's exit code: 0 on success, 1 with a CNI error object on stdout. */
  exitCode: number;
  stdout: string;
  /** The CNI error code of that object (0 on success), for the metrics. */
  code: number;
}

/**
 * Best-effort cniVersion for an error answer, read before (or despite) validation. Undecodable stdin:
 * the validation reports it; the error object still needs a version. A version podwire does not
 * speak is not echoed: the error refusing "9.9.9" must not itself claim to be a 9.9.9 object.
 */
function versionHint(stdin: DecodedStdin): string {
  const v = stdin.value?.cniVersion;
  return typeof v === 'string' && isSupportedVersion(v) ? v : LATEST_VERSION;
}

export class CniDispatcher {
  readonly #ctx: AgentContext;
  readonly #scheduler: Scheduler;
  readonly #metrics: CniMetrics;

  constructor(ctx: AgentContext, scheduler: Scheduler, metrics: CniMetrics) {
    this.#ctx = ctx;
    this.#scheduler = scheduler;
    this.#metrics = metrics;
  }

  async handle(env: Record<string, string>, stdin: Buffer): Promise<CniAnswer> {
    const started = performance.now();
    const answer = await this.#handle(env, stdin, started);
    // Only known commands become label values: a runtime's typo must not grow the series without bound.
    const command = CNI_COMMANDS.find((c) => c === env.CNI_COMMAND) ?? 'invalid';
    this.#metrics.record(command, answer.code, (performance.now() - started) / 1000);
    return answer;
  }

  async #handle(env: Record<string, string>, stdin: Buffer, started: number): Promise<CniAnswer> {
    const log = this.#ctx.log.child({ req: randomUUID().slice(0, 8) });
    // Decoded once: the version hint and the configuration both read this.
    const decoded = DecodedStdin.decode(stdin);
    let version = versionHint(decoded);
    let command = env.CNI_COMMAND ?? '';
    try {
      const cniEnv = parseEnv(env);
      command = cniEnv.command;
      if (cniEnv.command === 'VERSION')
        return ok(JSON.stringify(formatVersionResult(parseVersionRequest(decoded))));
      const conf = parseNetConf(decoded, cniEnv.command);
      version = conf.cniVersion;
      const stdout = await this.#run(cniEnv, conf, log);
      log.info('cni call done', { command, containerId: env.CNI_CONTAINERID, ms: elapsed(started) });
      return ok(stdout);
    } catch (err) {
      const obj = toCniErrorObject(err, version);
      const level = err instanceof PodwireError && err.code !== 'ERR_INTERNAL' ? 'warn' : 'error';
      log[level]('cni call failed', {
        command,
        containerId: env.CNI_CONTAINERID,
        code: obj.code,
        err: obj.msg,
        stack: level === 'error' && err instanceof Error ? err.stack : undefined,
        ms: elapsed(started),
      });
      return { exitCode: 1, stdout: JSON.stringify(obj), code: obj.code };
    }
  }

  async #run(env: CniEnv, conf: NetConf, log: Logger): Promise<string> {
    const ctx = this.#ctx;
    switch (env.command) {
      case 'ADD': {
        const att = { containerId: env.containerId, ifname: env.ifname };
        const netns = env.netns;
        const pod = podIdentity(env.args);
        const pool = poolRequest(env.args, conf, ctx.config);
        const bandwidth = parseBandwidth(conf.runtimeConfig);
        const result = await this.#scheduler.run(attachmentKey(att.containerId, att.ifname), () =>
          cmdAdd(
            ctx,
            {
              ...att,
              pod,
              podUid: env.args.get('K8S_POD_UID'),
              pool,
              network: conf.name,
              routeConf: conf,
              bandwidth,
            },
            netns,
            log.child({ containerId: att.containerId, ifname: att.ifname, pod }),
          ),
        );
        return JSON.stringify(formatResult(result, conf.cniVersion));
      }
      case 'DEL': {
        const att = { containerId: env.containerId, ifname: env.ifname };
        // Answered once the pod is cut off and its address released; the veth's deletion goes on
        // on the attachment's key (cmd-del.ts).
        let answered!: () => void;
        const answer = new Promise<void>((resolve) => {
          answered = resolve;
        });
        const run = this.#scheduler.run(attachmentKey(att.containerId, att.ifname), () =>
          cmdDel(ctx, att, conf.name, log, answered),
        );
        let answeredYet = false;
        void answer.then(() => {
          answeredYet = true;
        });
        // A failure before the answer reaches the runtime as the call's error; one after it only here.
        void run.catch((err: unknown) => {
          if (answeredYet) log.error('DEL failed after it answered', { err: String(err) });
        });
        await Promise.race([answer, run]);
        return '';
      }
      case 'CHECK': {
        const att = { containerId: env.containerId, ifname: env.ifname };
        const prev = conf.prevResult;
        if (!prev) throw new InvalidConfigError('prevResult: required for CHECK');
        const netns = env.netns;
        const bandwidth = parseBandwidth(conf.runtimeConfig);
        await this.#scheduler.run(attachmentKey(att.containerId, att.ifname), () =>
          cmdCheck(ctx, att, netns, prev, { name: conf.name, routeConf: conf, bandwidth }, log),
        );
        return '';
      }
      case 'GC': {
        await cmdGc(ctx, conf.name, conf.validAttachments ?? [], log, {
          serial: (key, fn) => this.#scheduler.run(key, fn),
          busy: () => this.#scheduler.activeKeys(),
        });
        return '';
      }
      case 'STATUS':
        cmdStatus(ctx);
        return '';
      case 'VERSION':
        return JSON.stringify(formatVersionResult(conf.cniVersion));
    }
  }
}

function ok(stdout: string): CniAnswer {
  return { exitCode: 0, stdout, code: 0 };
}

function elapsed(started: number): number {
  return Math.round((performance.now() - started) * 100) / 100;
}
