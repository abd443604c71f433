/**
 * Stops at once, with a plain message, when this bundle runs on a Node older than the one the images
 * ship: on an older Node it may fail later and obscurely (a missing API in the middle of a fetch).
 * An entry point imports this module first, for its effect, so it runs before any other of its
 * modules. It uses nothing newer than Node 12, so the check itself runs wherever ES modules do.
 * 24 is package.json's `engines.node` (test/agent/cli.test.ts keeps the two equal).
 */
export const REQUIRED_NODE_MAJOR = 24;

const major = Number(process.versions.node.split('.')[0]);
if (!(major >= REQUIRED_NODE_MAJOR)) {
  const problem = `Node.js ${process.version} is too old: this program needs Node.js ${REQUIRED_NODE_MAJOR} or newer`;
  const fix = `run it with Node.js ${REQUIRED_NODE_MAJOR}, as the images do (/nodejs/bin/node), or with node_modules/.bin/node after npm ci`;
  process.stderr.write(`secret-agent: ${problem}. Fix: ${fix}\n`);
  // The same as one JSON line on stdout, where log collectors look (pino's shape: level, time, msg).
  process.stdout.write(
    `${JSON.stringify({ level: 'error', time: new Date().toISOString(), node: process.version, required: `>=${REQUIRED_NODE_MAJOR}`, fix, msg: 'unsupported Node.js version' })}\n`,
  );
  // 2, as for any other configuration the agent cannot run with: nothing was fetched or written.
  process.exit(2);
}
