/**
 * Makes two builds of the start-up snapshot from the same commit write the same blob, byte for byte
 * (the image's digest depends on it). agent/snapshot.ts imports this module before any other, so what
 * it fixes is fixed before any module is evaluated; images/build-snapshot.ts fixes V8's hash and
 * random seeds.
 *
 * Code evaluated while building keeps what it read in the heap, and the heap is the blob:
 * - the clocks: pino's time module keeps the wall time and process.hrtime.bigint() it saw at load,
 *   the AWS SDK the time it sent the warm-up requests and a signing key under that day's date, and
 *   Node's own hrtime buffer the last reading anyone took. So the clocks stand still while building.
 *   None of these is a clock a pod reads later: pino's isoTime (the agent's log time) and the SDK's
 *   signing read Date.now() when called, and the warm-up's signing key belongs to credentials that
 *   exist only in the warm-up. Each stand-in asks `building` on every call and reads the real clock
 *   once it is unset, so a module that kept a reference to one still gets the real time in a pod.
 * - the host name, which pino reads when it is loaded (for a default it never uses here: the agent's
 *   logger has a base of its own) and which is the build container's id: a fixed name while building.
 * - process.pid, which Node keeps on the process object (pino keeps it too): fixed at 0 while
 *   building; Node sets the real one when a pod starts from the snapshot (the build's check prints it).
 */
import os from 'node:os';
import { startupSnapshot } from 'node:v8';

/** The instant the build reads: 2000-01-01T00:00:00Z, and 0 on the monotonic clocks. */
const SNAPSHOT_BUILD_TIME_MS = 946_684_800_000;

const real = {
  hostname: os.hostname,
  dateNow: Date.now,
  hrtime: process.hrtime,
  performanceNow: Object.getOwnPropertyDescriptor(performance, 'now'),
};
let building = false;

function fixBuildState(): void {
  const { dateNow, hrtime: realHrtime } = real;
  const realPerformanceNow = performance.now;
  building = true;
  Date.now = () => (building ? SNAPSHOT_BUILD_TIME_MS : dateNow());
  const hrtime = ((previous?: [number, number]) =>
    building ? [0, 0] : realHrtime(previous)) as typeof process.hrtime;
  hrtime.bigint = () => (building ? 0n : realHrtime.bigint());
  process.hrtime = hrtime;
  performance.now = () => (building ? 0 : realPerformanceNow.call(performance));
  os.hostname = () => (building ? 'secret-agent-snapshot' : real.hostname());
  const pid = Object.getOwnPropertyDescriptor(process, 'pid');
  Object.defineProperty(process, 'pid', { ...pid, value: 0 });
}

/** Starts the clocks again and gives back the host name: the snapshot's last step before it is written. The pid stays 0. */
export function releaseBuildState(): void {
  building = false;
  os.hostname = real.hostname;
  Date.now = real.dateNow;
  process.hrtime = real.hrtime;
  // Node's is Performance.prototype.now: the stand-in was an own property over it.
  if (real.performanceNow) Object.defineProperty(performance, 'now', real.performanceNow);
  else delete (performance as { now?: unknown }).now;
}

if (startupSnapshot.isBuildingSnapshot()) fixBuildState();
