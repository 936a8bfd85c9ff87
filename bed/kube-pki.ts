/**
 * A throwaway PKI for a test kube-apiserver, made with `openssl` in a directory the caller owns
 * (removed with it): a CA; the API server's serving certificate (its addresses, the service IP and
 * the `kubernetes` names); client certificates, each with the user (CN) and groups (O) the API
 * server's x509 authenticator reads from it (an admin in `system:masters`, and one per node in
 * `system:nodes` when asked); and the RSA key pair that signs and checks service account tokens.
 * Keys are EC P-256 (fast to make) except the service account key; all valid for a day.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { must } from './exec.js';

export interface KubePki {
  dir: string;
  ca: string;
  caKey: string;
  serverCert: string;
  serverKey: string;
  adminCert: string;
  adminKey: string;
  /** The service account token signing key (private) and its public half. */
  saKey: string;
  saPub: string;
}

async function ecKey(path: string): Promise<void> {
  await must('openssl', ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', path]);
}

/** Issues a certificate signed by the PKI's CA; `subject` e.g. `/CN=admin/O=system:masters`. */
export async function issueKubeCert(
  pki: Pick<KubePki, 'dir' | 'ca' | 'caKey'>,
  name: string,
  subject: string,
  extensions: string,
): Promise<{ cert: string; key: string }> {
  const key = join(pki.dir, `${name}.key`);
  const csr = join(pki.dir, `${name}.csr`);
  const cert = join(pki.dir, `${name}.crt`);
  const ext = join(pki.dir, `${name}.ext`);
  await ecKey(key);
  await must('openssl', ['req', '-new', '-key', key, '-out', csr, '-subj', subject]);
  await writeFile(ext, extensions);
  // biome-ignore format: flag/value pairs
  await must('openssl', [
    'x509', '-req', '-in', csr, '-CA', pki.ca, '-CAkey', pki.caKey, '-CAcreateserial',
    '-out', cert, '-days', '1', '-extfile', ext,
  ]);
  return { cert, key };
}

export const CLIENT_EXT = 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n';

/** Makes the PKI in `dir/kube-pki`; `ips` are the API server's addresses (IP SANs). */
export async function makeKubePki(dir: string, ips: string[]): Promise<KubePki> {
  const pki = join(dir, 'kube-pki');
  await mkdir(pki, { mode: 0o700 });
  const caKey = join(pki, 'ca.key');
  const ca = join(pki, 'ca.crt');
  await ecKey(caKey);
  // biome-ignore format: flag/value pairs
  await must('openssl', [
    'req', '-x509', '-new', '-key', caKey, '-out', ca, '-days', '1',
    '-subj', '/CN=podwire test kubernetes-ca',
    '-addext', 'basicConstraints=critical,CA:TRUE',
    '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  const base = { dir: pki, ca, caKey };
  const san = [
    ...ips.map((ip) => `IP:${ip}`),
    'DNS:kubernetes',
    'DNS:kubernetes.default',
    'DNS:kubernetes.default.svc',
    'DNS:localhost',
  ].join(',');
  const server = await issueKubeCert(
    base,
    'apiserver',
    '/CN=kube-apiserver',
    `subjectAltName=${san}\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n`,
  );
  const admin = await issueKubeCert(base, 'admin', '/CN=podwire-admin/O=system:masters', CLIENT_EXT);
  const saKey = join(pki, 'sa.key');
  const saPub = join(pki, 'sa.pub');
  await must('openssl', ['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', saKey]);
  await must('openssl', ['pkey', '-in', saKey, '-pubout', '-out', saPub]);
  return {
    ...base,
    serverCert: server.cert,
    serverKey: server.key,
    adminCert: admin.cert,
    adminKey: admin.key,
    saKey,
    saPub,
  };
}
