/**
 * What `npm run bench` is measuring, how far it is and what is left: a run takes about half an hour.
 * On a terminal one status line is redrawn each second; elsewhere (CI, a pipe) each step's start and
 * end and each note are plain lines. Written to stderr, so the report on stdout stays clean.
 */

export interface BenchStep {
  readonly name: string;
  /** About how long it takes with this run's settings: what "left" is counted from. */
  readonly estimateSeconds: number;
}

export interface ProgressOutput {
  readonly isTTY?: boolean;
  write(text: string): unknown;
}

/** 75 → "1m15s", 3700 → "1h01m". */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

export class BenchProgress {
  readonly #steps: readonly BenchStep[];
  readonly #out: ProgressOutput;
  readonly #now: () => number;
  readonly #started: number;
  #index = -1;
  #stepStarted = 0;
  #note = '';
  #timer: NodeJS.Timeout | undefined;

  constructor(steps: readonly BenchStep[], out: ProgressOutput = process.stderr, now = () => Date.now()) {
    if (steps.length === 0) throw new Error('BenchProgress: no steps');
    this.#steps = steps;
    this.#out = out;
    this.#now = now;
    this.#started = now();
    const total = steps.reduce((a, s) => a + s.estimateSeconds, 0);
    this.#line(
      `bench: ${steps.length} steps, about ${formatDuration(total)}: ${steps.map((s) => s.name).join(', ')}`,
    );
  }

  /** Starts the step named `name` (the next one, in order): ends the one before. */
  begin(name: string): void {
    const next = this.#steps.findIndex((s, i) => i > this.#index && s.name === name);
    if (next < 0) throw new Error(`BenchProgress: no step "${name}" after step ${this.#index + 1}`);
    if (this.#index >= 0) this.#endStep();
    this.#index = next;
    this.#stepStarted = this.#now();
    this.#note = '';
    const step = this.#steps[next]!;
    this.#line(
      `${this.#counter()} ${step.name}: started (about ${formatDuration(step.estimateSeconds)}; ${formatDuration(this.leftSeconds())} left in all)`,
    );
    if (this.#out.isTTY && !this.#timer) {
      this.#timer = setInterval(() => this.#redraw(), 1000);
      this.#timer.unref();
    }
  }

  /** What the current step is doing now, e.g. "round 3 of 15". */
  note(text: string): void {
    this.#note = text;
    if (this.#out.isTTY) this.#redraw();
    else this.#line(`${this.#counter()} ${this.#steps[this.#index]?.name ?? ''}: ${text}`);
  }

  /** The estimate of what is left: the steps not begun, and what the current one has not used. */
  leftSeconds(): number {
    const current = this.#steps[this.#index];
    const inStep = current
      ? Math.max(0, current.estimateSeconds - (this.#now() - this.#stepStarted) / 1000)
      : 0;
    return this.#steps.slice(this.#index + 1).reduce((a, s) => a + s.estimateSeconds, inStep);
  }

  /** Ends the last step; the whole run's time. */
  finish(): number {
    if (this.#index >= 0) this.#endStep();
    clearInterval(this.#timer);
    this.#timer = undefined;
    const seconds = (this.#now() - this.#started) / 1000;
    this.#line(`bench: done in ${formatDuration(seconds)}`);
    return seconds;
  }

  #endStep(): void {
    const step = this.#steps[this.#index]!;
    this.#line(
      `${this.#counter()} ${step.name}: done in ${formatDuration((this.#now() - this.#stepStarted) / 1000)}`,
    );
  }

  #counter(): string {
    return `[${this.#index + 1}/${this.#steps.length}]`;
  }

  /** A finished line: on a terminal it replaces the status line, which is drawn again below it. */
  #line(text: string): void {
    this.#out.write(this.#out.isTTY ? `\r\x1b[2K${text}\n` : `${text}\n`);
    if (this.#out.isTTY && this.#index >= 0 && this.#timer) this.#redraw();
  }

  #redraw(): void {
    const step = this.#steps[this.#index];
    if (!step) return;
    const elapsed = formatDuration((this.#now() - this.#started) / 1000);
    const inStep = formatDuration((this.#now() - this.#stepStarted) / 1000);
    const note = this.#note ? ` · ${this.#note}` : '';
    this.#out.write(
      `\r\x1b[2K${this.#counter()} ${step.name} ${inStep}/${formatDuration(step.estimateSeconds)}${note} · ${elapsed} elapsed, about ${formatDuration(this.leftSeconds())} left`,
    );
  }
}
