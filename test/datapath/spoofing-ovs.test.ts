/** The pod identity guards' spoofing suite (spoofing.ts) against the OVS datapath (userspace). */
import { spoofingSuite } from './spoofing.js';

spoofingSuite('ovs', 32);
