// First, for its effect: on a Node older than the images' it stops here, before anything else runs.
import '../agent/require-node-version.ts';
import packageJson from '../package.json' with { type: 'json' };
import { programHelp } from './cli/help.ts';
import { runRender } from './cli/render-command.ts';
import { serve, startupFailed } from './cli/serve.ts';

/**
 * Dispatches: no arguments serves the webhook (webhook/cli/serve.ts); `render` injects into
 * manifests offline (webhook/cli/render-command.ts); `versions` says which version of each secret the
 * injected pods hold, and waits for a rotation to reach them (webhook/versions/); --help and --version print and exit 0.
 */

const args = process.argv.slice(2);

/** A command's exit code once it is done; a failure it did not expect is a bug: 70, with the stack. */
function exitWhenDone(command: string, done: Promise<number>): void {
  done.then(
    // exitCode, not exit(): stdout may be a pipe still draining.
    (code) => (process.exitCode = code),
    (e: unknown) => {
      const err = e as Error;
      process.stderr.write(
        `secret-agent-webhook ${command}: unexpected failure: ${err?.name ?? 'Error'}: ${err?.message ?? ''}\n${err?.stack ?? ''}\n`,
      );
      process.exitCode = 70;
    },
  );
}

const stdout = (text: string) => process.stdout.write(text);
const stderr = (text: string) => process.stderr.write(text);

if (args[0] === 'render') {
  exitWhenDone(
    'render',
    runRender(args.slice(1), {
      env: process.env,
      readStdin: async () => {
        const chunks: Buffer[] = [];
        for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
        return Buffer.concat(chunks).toString('utf8');
      },
      stdout,
      stderr,
    }),
  );
} else if (args[0] === 'versions') {
  // Loaded only for this command: the server never needs its HTTP client.
  exitWhenDone(
    'versions',
    import('./versions/versions-command.ts').then(({ runVersions }) =>
      runVersions(args.slice(1), {
        env: process.env,
        stdout,
        stderr,
        stderrIsTTY: process.stderr.isTTY === true,
      }),
    ),
  );
} else if (args.includes('--help') || args.includes('-h')) {
  process.stdout.write(programHelp());
} else if (args.includes('--version')) {
  process.stdout.write(`secret-agent-webhook ${packageJson.version}\n`);
} else if (args.length > 0) {
  process.stderr.write(
    `secret-agent-webhook: unknown argument ${JSON.stringify(args[0])}. Fix: run it without arguments to serve, or use render, versions, --help or --version\n`,
  );
  process.exitCode = 2;
} else {
  serve().catch(startupFailed);
}
