import { BridgeDatapath } from '../../src/datapath/linux-bridge/bridge-datapath.js';
import { datapathCompliance } from './compliance.js';

datapathCompliance(
  'linux-bridge',
  'pwtbr0',
  (env) => new BridgeDatapath({ ...env, bridge: 'pwtbr0', mtu: 1500 }),
);
