/** An etcd client URL as podwire speaks to it: scheme, host and port, nothing else. */
import { InvalidConfigError } from '../base/errors.js';

export interface Endpoint {
  url: string;
  host: string;
  port: number;
  secure: boolean;
}

export function parseEndpoint(url: string): Endpoint {
  let u: URL;
  try {
    u = new URL(url);
  } catch (err) {
    throw new InvalidConfigError(`cluster.endpoints: ${JSON.stringify(url)} is not a URL`, {
      cause: err,
    });
  }
  const scheme = u.protocol.slice(0, -1);
  if (
    (scheme !== 'http' && scheme !== 'https') ||
    u.pathname !== '/' ||
    u.search !== '' ||
    u.hash !== '' ||
    u.username !== ''
  ) {
    throw new InvalidConfigError(`cluster.endpoints: ${url}: must be https://HOST:PORT or http://HOST:PORT`);
  }
  const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
  const secure = scheme === 'https';
  const port = u.port === '' ? (secure ? 443 : 80) : Number(u.port);
  return { url: `${scheme}://${u.host}`, host, port, secure };
}
