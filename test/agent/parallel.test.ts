/**
 * The parallel-creation reproduction on the Linux bridge: 20 pods, PODWIRE_ROUNDS rounds (20 here;
 * `npm run soak` runs 100). See parallel-rounds.ts for what every round checks.
 */
import { after, before, test } from 'node:test';
import { TestNode } from '../../bed/node.js';
import { runParallelRounds } from './parallel-rounds.js';

const ROUNDS = Number(process.env.PODWIRE_ROUNDS ?? 20);
const PODS = 20;

const node = new TestNode();
const pods: string[] = [];
before(async () => {
  await node.setup();
  for (let i = 0; i < PODS; i++) pods.push(await node.addPod(`p${i}`));
});
after(() => node.cleanup());

test(`${PODS} pods in parallel, ${ROUNDS} rounds: addresses in the right place, descriptors at baseline`, () =>
  runParallelRounds(node, { pods, rounds: ROUNDS, idPrefix: 'round' }));
