/** `bin/podwire demo`: the demo is the test bed's, outside src/ (the node image does not carry it). */
import { runCli } from '../src/cli/run.js';
import { demoCommand } from './demo.js';

runCli({ demo: demoCommand }, ['demo', ...process.argv.slice(2)]);
