/** The test bed lives in src/bed/ (the demo uses it too); tests import it from here. */
export * from '../../src/bed/vlan-router.js';
