/**
 * Memory per pod of the pod cache (decision 47): N Pod objects shaped as a kubelet-managed pod is
 * (managed fields, conditions, container statuses, 4 labels, 2 containers with 2 ports, dual-stack
 * IPs), received as list pages are (JSON text, parsed), kept three ways, each measured as the V8 heap
 * used after a full collection, per pod:
 *
 * - `decoded`: what the pod cache keeps (kube-pod.ts: the model's Pod and the UID);
 * - `whole`: the parsed objects kept whole, as a general-purpose informer keeps them.
 *
 *   node --expose-gc dist/bench/pod-cache-memory.js [N]
 */
import { podFromObject } from '../src/cluster/kube-pod.js';

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

function podObject(i: number): object {
  const name = `web-${i.toString(36)}-7d9f8c6b5-x${i % 97}`;
  const ns = `team-${i % 50}`;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: ns,
      uid: `0b6e3c1e-${i.toString(16).padStart(4, '0')}-4f6a-9d51-3c2a1b0e9f87`,
      resourceVersion: String(100000 + i),
      creationTimestamp: '2026-12-01T12:00:00Z',
      labels: { app: 'web', tier: 'frontend', 'pod-template-hash': '7d9f8c6b5', release: `r${i % 7}` },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-7d9f8c6b5', uid: 'x' }],
      managedFields: [
        { manager: 'kube-controller-manager', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1' },
        { manager: 'kubelet', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1' },
      ],
    },
    spec: {
      nodeName: `node-${i % 100}`,
      containers: [
        {
          name: 'app',
          image: 'registry.example/web:1.2.3',
          ports: [
            { name: 'http', containerPort: 8080, protocol: 'TCP' },
            { name: 'metrics', containerPort: 9090, protocol: 'TCP' },
          ],
          resources: { requests: { cpu: '100m', memory: '128Mi' } },
        },
        {
          name: 'sidecar',
          image: 'registry.example/proxy:0.9',
          ports: [{ containerPort: 15001 }, { containerPort: 53, protocol: 'UDP' }],
        },
      ],
      restartPolicy: 'Always',
      dnsPolicy: 'ClusterFirst',
      serviceAccountName: 'default',
    },
    status: {
      phase: 'Running',
      hostIP: '172.30.0.1',
      podIP: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
      podIPs: [
        { ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}` },
        { ip: `fd00::${i.toString(16)}` },
      ],
      conditions: ['Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map((type) => ({
        type,
        status: 'True',
        lastTransitionTime: '2026-12-01T12:00:01Z',
      })),
      containerStatuses: ['app', 'sidecar'].map((c) => ({
        name: c,
        ready: true,
        restartCount: 0,
        image: `registry.example/${c}`,
        imageID: `registry.example/${c}@sha256:${'ab'.repeat(32)}`,
        containerID: `containerd://${'cd'.repeat(32)}`,
        state: { running: { startedAt: '2026-12-01T12:00:01Z' } },
      })),
    },
  };
}

function heapUsed(): number {
  gc?.();
  gc?.();
  return process.memoryUsage().heapUsed;
}

const n = Number(process.argv[2] ?? 20000);
/** The pages as text, as they arrive; freed before each measurement's end. */
function pages(): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i += 500) {
    const items = [];
    for (let j = i; j < Math.min(n, i + 500); j++) items.push(podObject(j));
    out.push(JSON.stringify({ items }));
  }
  return out;
}

function measure(keep: (object: Record<string, unknown>) => unknown): number {
  const base = heapUsed();
  let text: string[] | undefined = pages();
  const cache = new Map<string, unknown>();
  for (const page of text) {
    for (const item of (JSON.parse(page) as { items: Record<string, unknown>[] }).items) {
      const m = item.metadata as { name: string; namespace: string; resourceVersion: string };
      cache.set(`${m.namespace}/${m.name}`, keep(item));
    }
  }
  text = undefined; // the pages are garbage now: only the cache stays
  const used = heapUsed() - base;
  if (cache.size !== n) throw new Error('not every pod kept');
  return used / n;
}

const decoded = measure((o) => {
  const m = o.metadata as { name: string; namespace: string; resourceVersion: string };
  return { object: podFromObject(o, m), resourceVersion: m.resourceVersion };
});
const whole = measure((o) => o);
console.log(
  JSON.stringify({ pods: n, bytesPerPod: { decoded: Math.round(decoded), whole: Math.round(whole) } }),
);
