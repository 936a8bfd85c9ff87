/**
 * NetworkPolicy at agent start (store kubernetes only: the policies, pods and namespaces come from
 * the API server): the datapath's policy backend, driven by the policy controller over the API
 * server's caches. The first apply is waited for (from the live caches, the snapshot of the last
 * known state, or every local pod isolated), so that no CNI call is served before policy is in force.
 */
import type { ClusterStore } from '../../cluster/store.js';
import type { Datapath } from '../../datapath/datapath.js';
import { IncrementalCompiler } from '../../policy/incremental-compile.js';
import type { Logger } from '../log.js';
import { DenyLogger } from '../policy/deny-logger.js';
import { KubePolicySource } from '../policy/kube-policy-source.js';
import { PolicyController } from '../policy/policy-controller.js';
import type { UndoStack } from '../undo-stack.js';

export async function startPolicy(
  store: ClusterStore | undefined,
  datapath: Datapath,
  opts: { node: string; stateDir: string },
  log: Logger,
  undo: UndoStack,
  onDenyLog: (denied: DenyLogger) => void = () => undefined,
): Promise<PolicyController | undefined> {
  if (!store?.podCache || !store.policyCache) return undefined;
  if (!datapath.policyBackend) {
    log.warn('NetworkPolicy is not enforced: this datapath has no policy backend', {
      datapath: datapath.kind,
    });
    return undefined;
  }
  const backend = datapath.policyBackend();
  // Each apply compiles what changed since the last (decision 54); the output is the whole compiler's.
  const compiler = new IncrementalCompiler();
  const controller = new PolicyController({
    node: opts.node,
    source: new KubePolicySource(store.podCache, store.policyCache),
    backend,
    compile: (input) => compiler.compile(input),
    log,
    stateDir: opts.stateDir,
  });
  undo.push('policy controller', () => controller.stop());
  await controller.start();
  // Denied packets logged (decision 51), where the backend reports them. Enforcement does not depend
  // on it: a log that cannot open (its NFLOG group bound by another process) is a warning.
  if (backend.openDenyLog) {
    try {
      const denied = new DenyLogger({
        source: backend.openDenyLog(),
        applied: () => controller.applied(),
        log,
      });
      undo.push('policy deny log', () => denied.stop());
      denied.start();
      onDenyLog(denied);
    } catch (err) {
      log.warn('denied packets are not logged: the deny log did not open', { error: String(err) });
    }
  }
  log.info('NetworkPolicy enforced', {
    from: controller.mode,
    policies: store.policyCache.policies().length,
  });
  return controller;
}
