import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { readCapped } from './capped-body.ts';

/**
 * The Kubernetes API as kubectl reaches it: one `kubectl proxy` on a Unix socket in a directory only
 * this user can enter, so authentication is exactly kubectl's (exec plugins for EKS and GKE, tokens,
 * client certificates, the current context), and nothing here parses a kubeconfig. The proxy refuses
 * every method but GET: the command only reads.
 */
export interface KubernetesReader {
  /** GET `path` (with its query); the body up to `maxBytes`, cut there (`cut`). */
  get(path: string, maxBytes: number): Promise<{ status: number; text: string; cut: boolean }>;
  close(): Promise<void>;
}

/** kubectl could not be started, or its proxy did not serve: the message names the fix. */
export class KubectlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KubectlError';
  }
}

export interface KubectlTarget {
  readonly kubectl: string;
  readonly kubeconfig: string | undefined;
  readonly context: string | undefined;
}

const START_TIMEOUT_MS = 30_000;
/** One call's bound: a list page or a log read that takes longer is the API server's trouble, said so. */
const CALL_TIMEOUT_MS = 60_000;

function globalFlags(t: KubectlTarget): string[] {
  return [
    ...(t.kubeconfig !== undefined ? [`--kubeconfig=${t.kubeconfig}`] : []),
    ...(t.context !== undefined ? [`--context=${t.context}`] : []),
  ];
}

/** The namespace of kubectl's current context (or `--context`), as `kubectl get` without -n uses it. */
export function contextNamespace(t: KubectlTarget): string {
  const out = spawnSync(
    t.kubectl,
    [...globalFlags(t), 'config', 'view', '--minify', '-o', 'jsonpath={..namespace}'],
    {
      encoding: 'utf8',
      timeout: START_TIMEOUT_MS,
    },
  );
  if (out.error) throw notStarted(t, out.error as NodeJS.ErrnoException);
  if (out.status !== 0)
    throw new KubectlError(
      `kubectl config view failed: ${firstLine(out.stderr)}. Fix: check --kubeconfig and --context, or pass -n NAMESPACE`,
    );
  return out.stdout.trim().split(/\s+/)[0] || 'default';
}

function notStarted(t: KubectlTarget, e: NodeJS.ErrnoException): KubectlError {
  return e.code === 'ENOENT'
    ? new KubectlError(
        `${JSON.stringify(t.kubectl)} was not found. Fix: install kubectl, or name it with --kubectl PATH (or KUBECTL)`,
      )
    : new KubectlError(
        `${JSON.stringify(t.kubectl)} could not be started: ${e.message}. Fix: check that it runs (kubectl version --client)`,
      );
}

function firstLine(text: string): string {
  return text.trim().split('\n')[0]?.slice(0, 300) ?? '';
}

export async function startKubectlProxy(t: KubectlTarget): Promise<KubernetesReader> {
  const dir = mkdtempSync(join(tmpdir(), 'secret-agent-versions-'));
  const socketPath = join(dir, 'api.sock');
  const child = spawn(
    t.kubectl,
    [
      ...globalFlags(t),
      'proxy',
      `--unix-socket=${socketPath}`,
      '--reject-methods=^(POST|PUT|PATCH|DELETE|CONNECT|OPTIONS)$',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4096)));
  const stop = () => {
    child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await new Promise<void>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(
        () =>
          reject(
            new KubectlError(
              `kubectl proxy did not start in ${START_TIMEOUT_MS / 1000} s. Fix: check that kubectl get pods answers with the same --kubeconfig and --context`,
            ),
          ),
        START_TIMEOUT_MS,
      );
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('Starting to serve')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('error', (e) => {
        clearTimeout(timer);
        reject(notStarted(t, e as NodeJS.ErrnoException));
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(
          new KubectlError(
            `kubectl proxy exited (${code}): ${firstLine(stderr)}. Fix: check --kubeconfig and --context (kubectl get pods works with them)`,
          ),
        );
      });
    });
  } catch (e) {
    stop();
    throw e;
  }
  const dispatcher = new Agent({ connect: { socketPath }, connections: 64 });
  return {
    async get(path, maxBytes) {
      const res = await request(`http://localhost${path}`, {
        dispatcher,
        headersTimeout: CALL_TIMEOUT_MS,
        bodyTimeout: CALL_TIMEOUT_MS,
      });
      return { status: res.statusCode, ...(await readCapped(res.body, maxBytes)) };
    },
    async close() {
      await dispatcher.close();
      stop();
    },
  };
}
