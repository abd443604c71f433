import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, chownSync } from 'node:fs';
import { join } from 'node:path';
import { assertNoCanary } from './canary.ts';

export const ROOT = new URL('../../', import.meta.url).pathname;
export const AGENT_JS = join(ROOT, 'dist/agent.js');

export interface AgentRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  /** stdout parsed as pino JSON lines. */
  readonly logs: Record<string, unknown>[];
}

/**
 * Runs the built agent the way the image does: `node dist/agent.js`, configured by env only, with
 * nothing inherited from this machine's env but PATH. Every run's output is checked for canaries.
 */
export function runAgent(
  env: Record<string, string>,
  options: { uid?: number; gid?: number; timeoutMs?: number } = {},
): Promise<AgentRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [AGENT_JS], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(options.uid !== undefined ? { uid: options.uid, gid: options.gid ?? options.uid } : {}),
      timeout: options.timeoutMs ?? 60_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      try {
        assertNoCanary(stdout, 'agent stdout (logs)');
        assertNoCanary(stderr, 'agent stderr');
      } catch (e) {
        reject(e as Error);
        return;
      }
      const logs = stdout
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      resolve({ code, signal, stdout, stderr, logs });
    });
  });
}

/** A fresh directory on tmpfs (/dev/shm), as the pod's memory-medium emptyDir would be. */
export function memoryDir(owner?: number): { path: string; [Symbol.dispose](): void } {
  const path = mkdtempSync('/dev/shm/secret-agent-test-');
  if (owner !== undefined) chownSync(path, owner, owner);
  return { path, [Symbol.dispose]: () => rmSync(path, { recursive: true, force: true }) };
}
