/**
 * The CNI_* environment (SPEC.md "Parameters"), validated per command. Every failure is
 * ERR_INVALID_ENV (code 4) with a message that starts with the variable's name.
 *
 * Required variables (an empty value counts as missing, as in libcni's skel):
 *   ADD, CHECK   CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_PATH
 *   DEL          CNI_CONTAINERID, CNI_IFNAME, CNI_PATH (CNI_NETNS optional: the netns may be gone)
 *   VERSION      none besides CNI_COMMAND
 *   GC, STATUS   none besides CNI_COMMAND; CNI_PATH optional. The spec asks runtimes to send CNI_PATH
 *                for GC so that plugins can delegate; podwire delegates to nothing, so it does not insist.
 * Attachment variables sent with VERSION, GC or STATUS are ignored, as libcni's skel ignores them.
 */

import { InvalidEnvError, type PodwireError } from '../base/errors.js';
import { quote, validateAbsolutePath, validateContainerID, validateInterfaceName } from './names.js';
import { CNI_COMMANDS, type CniCommand, type CniEnv } from './types.js';

type EnvSource = Readonly<Record<string, string | undefined>>;

const REQUIRED: Record<CniCommand, readonly string[]> = {
  ADD: ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'],
  CHECK: ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_PATH'],
  DEL: ['CNI_CONTAINERID', 'CNI_IFNAME', 'CNI_PATH'],
  VERSION: [],
  GC: [],
  STATUS: [],
};

function envError(variable: string, reason: string): PodwireError {
  return new InvalidEnvError(`${variable}: ${reason}`);
}

/** Reads a variable, mapping '' to undefined. */
function read(env: EnvSource, name: string): string | undefined {
  const value = Object.hasOwn(env, name) ? env[name] : undefined;
  return value === '' ? undefined : value;
}

export function parseCommand(value: string | undefined): CniCommand {
  if (value === undefined || value === '') throw envError('CNI_COMMAND', 'missing');
  const command = CNI_COMMANDS.find((c) => c === value);
  if (command === undefined) {
    throw envError(
      'CNI_COMMAND',
      `unknown command ${quote(value)}; expected one of ${CNI_COMMANDS.join(', ')}`,
    );
  }
  return command;
}

export function parseEnv(env: EnvSource): CniEnv {
  const command = parseCommand(read(env, 'CNI_COMMAND'));

  const missing = REQUIRED[command].filter((name) => read(env, name) === undefined);
  if (missing.length > 0) throw envError(missing.join(', '), `missing, required for ${command}`);

  const args = parseCniArgs(read(env, 'CNI_ARGS'));
  const path = parseCniPath(read(env, 'CNI_PATH'));

  switch (command) {
    case 'ADD':
    case 'CHECK':
      return {
        command,
        containerId: checkContainerId(read(env, 'CNI_CONTAINERID') ?? ''),
        netns: checkNetns(read(env, 'CNI_NETNS') ?? ''),
        ifname: checkIfname(read(env, 'CNI_IFNAME') ?? ''),
        args,
        path,
      };
    case 'DEL': {
      const netns = read(env, 'CNI_NETNS');
      return {
        command,
        containerId: checkContainerId(read(env, 'CNI_CONTAINERID') ?? ''),
        netns: netns === undefined ? undefined : checkNetns(netns),
        ifname: checkIfname(read(env, 'CNI_IFNAME') ?? ''),
        args,
        path,
      };
    }
    case 'VERSION':
    case 'GC':
    case 'STATUS':
      return { command, containerId: undefined, netns: undefined, ifname: undefined, args, path };
  }
}

function checkContainerId(value: string): string {
  const reason = validateContainerID(value);
  if (reason !== undefined) throw envError('CNI_CONTAINERID', reason);
  return value;
}

function checkIfname(value: string): string {
  const reason = validateInterfaceName(value);
  if (reason !== undefined) throw envError('CNI_IFNAME', reason);
  return value;
}

function checkNetns(value: string): string {
  const reason = validateAbsolutePath(value);
  if (reason !== undefined) throw envError('CNI_NETNS', reason);
  return value;
}

/**
 * CNI_ARGS: `K=V` pairs separated by ';'. As in libcni's LoadArgs, every pair must contain exactly one
 * '='; podwire also refuses an empty key. Values may be empty. A repeated key keeps the last value.
 */
export function parseCniArgs(value: string | undefined): ReadonlyMap<string, string> {
  const args = new Map<string, string>();
  if (value === undefined || value === '') return args;
  for (const [i, pair] of value.split(';').entries()) {
    const parts = pair.split('=');
    if (parts.length !== 2) throw envError('CNI_ARGS', `pair ${i + 1} ${quote(pair)} is not KEY=VALUE`);
    const [key = '', val = ''] = parts;
    if (key === '') throw envError('CNI_ARGS', `pair ${i + 1} ${quote(pair)} has an empty key`);
    args.set(key, val);
  }
  return args;
}

/** CNI_PATH: a ':'-separated list; empty entries carry no directory and are dropped. */
export function parseCniPath(value: string | undefined): string[] {
  if (value === undefined) return [];
  if (value.includes('\0')) throw envError('CNI_PATH', 'contains NUL');
  return value.split(':').filter((dir) => dir !== '');
}

/** The Kubernetes pod a call is for ("namespace/name"), from K8S_POD_NAMESPACE and K8S_POD_NAME in CNI_ARGS. */
export function podIdentity(args: ReadonlyMap<string, string>): string | undefined {
  const namespace = args.get('K8S_POD_NAMESPACE');
  const name = args.get('K8S_POD_NAME');
  return namespace && name ? `${namespace}/${name}` : undefined;
}
