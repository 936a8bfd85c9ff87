/** The pod identity guards' spoofing suite (spoofing.ts) against the Linux bridge. */
import { spoofingSuite } from './spoofing.js';

spoofingSuite('linux-bridge', 31);
