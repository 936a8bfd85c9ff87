/** The pod identity guards' spoofing suite (spoofing.ts) against the OVS datapath (type: bed/ovs.ts's OVS_DATAPATH). */
import { spoofingSuite } from './spoofing.js';

spoofingSuite('ovs', 32);
