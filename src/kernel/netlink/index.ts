/** The rtnetlink client and the objects it reports. */
export { NetlinkClosedError, NetlinkProtocolError } from './errors.js';
export { Rtnetlink } from './rtnetlink.js';
export type { NetlinkSocketOptions } from './socket.js';
export type {
  Addr,
  AddressOptions,
  AddressSpec,
  BridgeSpec,
  Link,
  Route,
  RouteSpec,
  VethSpec,
} from './types.js';
