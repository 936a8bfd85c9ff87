/** The rtnetlink client and the objects it reports. */
export { NetlinkClosedError, NetlinkProtocolError } from './errors.js';
export { Rtnetlink } from './rtnetlink.js';
export type { NetlinkSocketOptions } from './socket.js';
export type {
  Addr,
  AddressOptions,
  AddressSpec,
  BridgeSpec,
  FdbEntry,
  FdbSpec,
  Link,
  Neigh,
  NeighSpec,
  Route,
  RouteSpec,
  VethSpec,
  VxlanInfo,
  VxlanSpec,
} from './types.js';
