/**
 * The cluster's certificates, made with `openssl` (bed/pki.ts's helpers) in the bed's directory: a
 * CA for every Kubernetes client and server certificate, the API server's serving certificate, a
 * client certificate per component (the user names the API's default RBAC bindings expect), one per
 * node (`system:node:NAME` in `system:nodes`, for the Node authorizer), and the service-account key
 * pair. EC P-256, valid for a day.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { must } from '../exec.js';
import { issue, newCa, newKey } from '../pki.js';

export interface KeyPair {
  cert: string;
  key: string;
}

export interface KubePki {
  dir: string;
  ca: KeyPair;
  apiserver: KeyPair;
  /** The API server's client certificate towards kubelets (system:masters: the kubelets' webhook allows it). */
  apiserverKubeletClient: KeyPair;
  admin: KeyPair;
  controllerManager: KeyPair;
  scheduler: KeyPair;
  kubeProxy: KeyPair;
  /** Service-account token signing: private key and public key. */
  saKey: string;
  saPub: string;
}

const CLIENT = 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n';

export async function makeKubePki(dir: string, apiserverIps: string[]): Promise<KubePki> {
  const pki = join(dir, 'kube-pki');
  await mkdir(pki, { mode: 0o700 });
  const ca = await newCa(pki, 'kube-ca');
  const dns = [
    'kubernetes',
    'kubernetes.default',
    'kubernetes.default.svc',
    'kubernetes.default.svc.cluster.local',
  ];
  const san = [...apiserverIps.map((ip) => `IP:${ip}`), 'IP:127.0.0.1', ...dns.map((d) => `DNS:${d}`)].join(
    ',',
  );
  const apiserver = await issue(
    pki,
    'apiserver',
    ca,
    '/CN=kube-apiserver',
    `subjectAltName=${san}\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n`,
  );
  const client = (name: string, subject: string) => issue(pki, name, ca, subject, CLIENT);
  const saKey = join(pki, 'sa.key');
  const saPub = join(pki, 'sa.pub');
  await newKey(saKey);
  await must('openssl', ['pkey', '-in', saKey, '-pubout', '-out', saPub]);
  return {
    dir: pki,
    ca,
    apiserver,
    apiserverKubeletClient: await client(
      'apiserver-kubelet-client',
      '/O=system:masters/CN=kube-apiserver-kubelet-client',
    ),
    admin: await client('admin', '/O=system:masters/CN=kubernetes-admin'),
    controllerManager: await client('controller-manager', '/CN=system:kube-controller-manager'),
    scheduler: await client('scheduler', '/CN=system:kube-scheduler'),
    kubeProxy: await client('kube-proxy', '/CN=system:kube-proxy'),
    saKey,
    saPub,
  };
}

/** A node's client certificate: the Node authorizer's `system:node:NAME` in group `system:nodes`. */
export function issueNodeCert(pki: KubePki, name: string): Promise<KeyPair> {
  return issue(pki.dir, `node-${name}`, pki.ca, `/O=system:nodes/CN=system:node:${name}`, CLIENT);
}
