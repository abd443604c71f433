// First, for its effect: on a Node older than the images' it stops here, before anything else runs.
import './require-node-version.ts';
import { runAgent } from './run-agent.ts';

runAgent(process.argv.slice(2));
