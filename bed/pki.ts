/**
 * A throwaway PKI for a test etcd, made with `openssl` in a directory the caller owns (the etcd's
 * own, removed with it): a CA, a server certificate naming the given IP addresses and `localhost`,
 * a client certificate, and a second CA with a client certificate of its own, for the tests that
 * need a certificate from the wrong authority. Keys are EC P-256 (fast to make), valid for a day.
 *
 * The client certificates carry no Common Name: etcd with auth enabled refuses, on its JSON gateway,
 * every client certificate that has one (etcd PR 10366, CVE-2018-16886). The server certificate
 * is also a client certificate, because etcd's gateway connects to etcd's own gRPC server with it.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { must } from './exec.js';

export interface TestPki {
  dir: string;
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** A client certificate of the right CA with a Common Name (refused by etcd's gateway once auth is on). */
  cnClientCert: string;
  cnClientKey: string;
  /** A CA etcd does not trust, and a client certificate it signed. */
  otherCa: string;
  otherClientCert: string;
  otherClientKey: string;
}

export async function newKey(path: string): Promise<void> {
  await must('openssl', ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', path]);
}

export async function newCa(dir: string, name: string): Promise<{ cert: string; key: string }> {
  const key = join(dir, `${name}.key`);
  const cert = join(dir, `${name}.crt`);
  await newKey(key);
  // biome-ignore format: flag/value pairs
  await must('openssl', [
    'req', '-x509', '-new', '-key', key, '-out', cert, '-days', '1',
    '-subj', `/CN=podwire test ${name}`,
    '-addext', 'basicConstraints=critical,CA:TRUE',
    '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  return { cert, key };
}

export async function issue(
  dir: string,
  name: string,
  ca: { cert: string; key: string },
  subject: string,
  extensions: string,
): Promise<{ cert: string; key: string }> {
  const key = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const cert = join(dir, `${name}.crt`);
  const ext = join(dir, `${name}.ext`);
  await newKey(key);
  await must('openssl', ['req', '-new', '-key', key, '-out', csr, '-subj', subject]);
  await writeFile(ext, extensions);
  // biome-ignore format: flag/value pairs
  await must('openssl', [
    'x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-CAcreateserial',
    '-out', cert, '-days', '1', '-extfile', ext,
  ]);
  return { cert, key };
}

/** Makes the PKI in `dir/pki`; `ips` are the server's addresses (its certificate's IP SANs). */
export async function makeTestPki(dir: string, ips: string[]): Promise<TestPki> {
  const pki = join(dir, 'pki');
  await mkdir(pki, { mode: 0o700 });
  const ca = await newCa(pki, 'ca');
  const san = [...ips.map((ip) => `IP:${ip}`), 'DNS:localhost'].join(',');
  const server = await issue(
    pki,
    'server',
    ca,
    '/CN=etcd',
    `subjectAltName=${san}\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature\n`,
  );
  const clientExt = 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n';
  const client = await issue(pki, 'client', ca, '/O=podwire', clientExt);
  const cnClient = await issue(pki, 'cn-client', ca, '/CN=podwire', clientExt);
  const other = await newCa(pki, 'other-ca');
  const otherClient = await issue(pki, 'other-client', other, '/O=podwire', clientExt);
  return {
    dir: pki,
    ca: ca.cert,
    serverCert: server.cert,
    serverKey: server.key,
    clientCert: client.cert,
    clientKey: client.key,
    cnClientCert: cnClient.cert,
    cnClientKey: cnClient.key,
    otherCa: other.cert,
    otherClientCert: otherClient.cert,
    otherClientKey: otherClient.key,
  };
}
