/**
 * A built bundle (dist/webhook.js, dist/agent.js) run as a child process, configured by env only,
 * with its pino JSON log lines collected so the quick start can wait for what it needs to see.
 */
import { spawn, type ChildProcess } from 'node:child_process';

export type LogLine = Record<string, unknown>;

export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export class LoggedProcess {
  readonly name: string;
  readonly #child: ChildProcess;
  readonly #exited: Promise<Exit>;
  #stdout = '';
  #stderr = '';
  #exit: Exit | undefined;
  readonly #waiters = new Set<() => void>();

  private constructor(name: string, child: ChildProcess) {
    this.name = name;
    this.#child = child;
    child.stdout!.on('data', (d: Buffer) => {
      this.#stdout += d.toString();
      this.#wake();
    });
    child.stderr!.on('data', (d: Buffer) => (this.#stderr += d.toString()));
    this.#exited = new Promise((resolve) =>
      child.once('close', (code, signal) => {
        this.#exit = { code, signal };
        this.#wake();
        resolve(this.#exit);
      }),
    );
  }

  /** Starts `node <script>` with exactly `env` (nothing inherited). */
  static start(name: string, script: string, env: Readonly<Record<string, string>>): LoggedProcess {
    const child = spawn(process.execPath, [script], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    return new LoggedProcess(name, child);
  }

  get pid(): number {
    return this.#child.pid!;
  }

  logs(): LogLine[] {
    return this.#stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as LogLine);
  }

  /** The output so far, for a failure report. */
  tail(): string {
    return `--- ${this.name} stdout ---\n${this.#stdout.slice(-3000)}--- ${this.name} stderr ---\n${this.#stderr.slice(-3000)}`;
  }

  /** Resolves with the first log line (from `from` on) matching; rejects if the process ends or time runs out. */
  waitForLog(
    match: (line: LogLine) => boolean,
    what: string,
    timeoutMs = 15_000,
    from = 0,
  ): Promise<LogLine> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const hit = this.logs().slice(from).find(match);
        if (hit) {
          done();
          resolve(hit);
        } else if (this.#exit) {
          done();
          reject(new Error(`${this.name} exited (${describeExit(this.#exit)}) before ${what}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`${this.name}: no ${what} within ${timeoutMs} ms`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(check);
      };
      this.#waiters.add(check);
      check();
    });
  }

  /** SIGTERM, then SIGKILL if it is still there after `graceMs`; resolves once it is gone. */
  async stop(graceMs = 10_000): Promise<Exit> {
    if (this.#exit) return this.#exit;
    this.#child.kill('SIGTERM');
    const kill = setTimeout(() => this.#child.kill('SIGKILL'), graceMs);
    const exit = await this.#exited;
    clearTimeout(kill);
    return exit;
  }

  #wake(): void {
    for (const w of [...this.#waiters]) w();
  }
}

export function describeExit(exit: Exit): string {
  return exit.signal ? `signal ${exit.signal}` : `exit ${exit.code}`;
}
