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

if (args[0] === 'render') {
  runRender(args.slice(1), {
    env: process.env,
    readStdin: async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks).toString('utf8');
    },
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
  }).then(
    // exitCode, not exit(): stdout may be a pipe still draining the manifests.
    (code) => (process.exitCode = code),
    (e: unknown) => {
      const err = e as Error;
      process.stderr.write(
        `secret-agent-webhook render: unexpected failure: ${err?.name ?? 'Error'}: ${err?.message ?? ''}\n${err?.stack ?? ''}\n`,
      );
      process.exitCode = 70;
    },
  );
} else if (args[0] === 'versions') {
  // Loaded only for this command: the server never needs its HTTP client.
  import('./versions/versions-command.ts')
    .then(({ runVersions }) =>
      runVersions(args.slice(1), {
        env: process.env,
        stdout: (text) => process.stdout.write(text),
        stderr: (text) => process.stderr.write(text),
        stderrIsTTY: process.stderr.isTTY === true,
      }),
    )
    .then(
      (code) => (process.exitCode = code),
      (e: unknown) => {
        const err = e as Error;
        process.stderr.write(
          `secret-agent-webhook versions: unexpected failure: ${err?.name ?? 'Error'}: ${err?.message ?? ''}\n${err?.stack ?? ''}\n`,
        );
        process.exitCode = 70;
      },
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
