/** A kubeconfig file naming one cluster, one user (a client certificate) and one context. */
import { writeFileSync } from 'node:fs';
import { stringify } from 'yaml';
import type { KeyPair } from './pki.js';

export function writeKubeconfig(path: string, server: string, ca: string, user: KeyPair): void {
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'podwire-bed', cluster: { server, 'certificate-authority': ca } }],
    users: [{ name: 'user', user: { 'client-certificate': user.cert, 'client-key': user.key } }],
    contexts: [{ name: 'podwire-bed', context: { cluster: 'podwire-bed', user: 'user' } }],
    'current-context': 'podwire-bed',
  };
  writeFileSync(path, stringify(config), { mode: 0o600 });
}
