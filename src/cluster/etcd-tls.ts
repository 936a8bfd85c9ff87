/**
 * TLS to etcd: the client's secure context from the configured PEMs, and TLS failures turned into
 * words an operator can act on (which side refused, and which key of `cluster.tls` to look at).
 */
import { createSecureContext, type SecureContext } from 'node:tls';
import { InvalidConfigError } from '../base/errors.js';

/** PEM contents (not paths: config.ts reads the files and names the key when one is bad). */
export interface EtcdTls {
  /** Trusted CA certificates for the endpoints; default: Node's bundled CAs. */
  ca?: string;
  /** Client certificate and its key, presented to etcd (`--client-cert-auth`). */
  cert?: string;
  key?: string;
}

export function sameTls(a: EtcdTls | undefined, b: EtcdTls | undefined): boolean {
  return a?.ca === b?.ca && a?.cert === b?.cert && a?.key === b?.key;
}

export function secureContext(tls: EtcdTls): SecureContext {
  if ((tls.cert === undefined) !== (tls.key === undefined)) {
    throw new InvalidConfigError('cluster.tls: cert and key go together');
  }
  try {
    return createSecureContext({
      ...(tls.ca === undefined ? {} : { ca: tls.ca }),
      ...(tls.cert === undefined ? {} : { cert: tls.cert }),
      ...(tls.key === undefined ? {} : { key: tls.key }),
    });
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new InvalidConfigError(`cluster.tls: ${why}`, { cause: err });
  }
}

/** Certificate checks of the server that failed on this side (OpenSSL's verify codes, Node's own). */
const UNTRUSTED_SERVER = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'INVALID_CA',
  'INVALID_PURPOSE',
]);

/** A TLS failure in words an operator can act on, or undefined when `err` is not one. */
export function tlsFailure(ep: { host: string; secure: boolean }, err: unknown): string | undefined {
  if (!ep.secure || !(err instanceof Error)) return undefined;
  const code = String((err as { code?: unknown }).code ?? '');
  const detail = `${code}: ${err.message}`;
  if (UNTRUSTED_SERVER.has(code))
    return `TLS: the server's certificate is not signed by a CA in cluster.tls.ca (${detail})`;
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID')
    return `TLS: the server's certificate does not name ${ep.host} (${detail})`;
  if (code === 'CERT_HAS_EXPIRED' || code === 'CERT_NOT_YET_VALID')
    return `TLS: the server's certificate is out of its validity period (${detail})`;
  if (/^ERR_SSL_.*ALERT_(BAD_CERTIFICATE|CERTIFICATE_REQUIRED|UNKNOWN_CA|CERTIFICATE_UNKNOWN)/.test(code)) {
    return `TLS: etcd refused the client certificate: cluster.tls.cert and cluster.tls.key must be a certificate signed by a CA etcd trusts (--trusted-ca-file) (${detail})`;
  }
  if (code === 'ERR_SSL_WRONG_VERSION_NUMBER' || code === 'ERR_SSL_PACKET_LENGTH_TOO_LONG')
    return `TLS: the endpoint does not speak TLS (an http:// etcd?) (${detail})`;
  if (code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_')) return `TLS: ${detail}`;
  return undefined;
}
