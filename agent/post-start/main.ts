/**
 * The native sidecar's postStart hook, /app/wait-ready.cjs in the agent image (images/build.ts):
 *
 *   node /app/wait-ready.cjs --url=http://127.0.0.1:8099/readyz --deadline=75s
 *
 * Exit 0 once the agent answers 200 (the kubelet then starts the pod's next container); exit 1 at
 * the deadline, counted from this process's start (the kubelet then kills the agent container and
 * starts it again, as after a failed startupProbe); exit 2 for arguments it cannot use. The webhook
 * renders the arguments (webhook/render/agent-containers.ts). It prints what it waited for and how
 * long, never a response body.
 */
import { parseArgs } from 'node:util';
import { parseDuration } from '../contract/duration.ts';
import { describeAnswer, waitForReady } from './wait-for-ready.ts';

const NAME = 'secret-agent postStart';

function usage(problem: string): never {
  process.stderr.write(
    `${NAME}: ${problem}. Fix: run it as the webhook renders it: --url=http://127.0.0.1:PORT/readyz --deadline=DURATION (e.g. 75s)\n`,
  );
  process.exit(2);
}

function readArgs(): { url: URL; deadlineMs: number; deadline: string } {
  let values: { url?: string | undefined; deadline?: string | undefined };
  try {
    ({ values } = parseArgs({
      options: { url: { type: 'string' }, deadline: { type: 'string' } },
      strict: true,
    }));
  } catch (e) {
    usage((e as Error).message.replace(/\.$/, ''));
  }
  if (values.url === undefined || values.deadline === undefined)
    usage(`${values.url === undefined ? '--url' : '--deadline'} is missing`);
  let url: URL;
  try {
    url = new URL(values.url);
  } catch {
    usage(`--url ${JSON.stringify(values.url)} is not a URL`);
  }
  if (url.protocol !== 'http:') usage(`--url ${JSON.stringify(values.url)} is not an http:// URL`);
  const deadlineMs = parseDuration(values.deadline);
  if (deadlineMs === undefined || deadlineMs <= 0)
    usage(`--deadline ${JSON.stringify(values.deadline)} is not a positive duration`);
  return { url, deadlineMs, deadline: values.deadline };
}

async function main(): Promise<number> {
  const { url, deadlineMs, deadline } = readArgs();
  const outcome = await waitForReady({ url, deadlineMs, startedAtMs: 0 });
  const took = `${Math.round(outcome.elapsedMs)} ms, ${outcome.requests} request${outcome.requests === 1 ? '' : 's'}`;
  if (outcome.ready) {
    process.stdout.write(`${NAME}: GET ${url.href} answered 200 after ${took}: the secrets are written\n`);
    return 0;
  }
  // The kubelet keeps this in its log (its event says only "PostStartHook failed" since Kubernetes 1.26).
  process.stderr.write(
    `${NAME}: the agent did not report its secrets written within --deadline=${deadline} (GET ${url.href}, ${took}; at the last, ${describeAnswer(outcome.last)}). The kubelet now stops the agent container and starts it again. Which secrets are missing and why: the agent's log, kubectl logs POD -c secret-agent --previous\n`,
  );
  return 1;
}

// Not top-level await: the bundle is CommonJS, which starts without the ES module loader.
void main().then((code) => (process.exitCode = code));
