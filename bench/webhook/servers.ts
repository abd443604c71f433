import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';

/**
 * The servers under test, as child processes that log their port: the built webhook and the floor,
 * a trivial node:https server that answers a fixed body; each with its CPU time read from /proc.
 */

export const FLOOR_SOURCE = `
const { createServer } = require('node:https');
const { readFileSync } = require('node:fs');
const body = readFileSync(process.env.FLOOR_BODY_FILE);
const server = createServer(
  { cert: readFileSync(process.env.TLS_CERT_FILE), key: readFileSync(process.env.TLS_KEY_FILE), minVersion: 'TLSv1.2' },
  (req, res) => {
    req.on('data', () => {});
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
      res.end(body);
    });
  },
);
server.keepAliveTimeout = 30000;
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ msg: 'floor listening', port: server.address().port })));
process.once('SIGTERM', () => { server.close(() => process.exit(0)); server.closeIdleConnections(); });
`;

export interface Server {
  readonly port: number;
  /** CPU time the process has used (user + system), in ms; undefined where /proc is missing. */
  cpuMs(): number | undefined;
  stop(): Promise<void>;
}

/** Linux: utime + stime from /proc/PID/stat, in clock ticks of 10 ms (USER_HZ is 100 on Linux). */
function processCpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return undefined;
  }
}

export function startServer(argv: string[], env: Record<string, string>, listening: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const exited = new Promise<void>((r) => child.once('close', () => r()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.once('close', (code) => reject(new Error(`${argv[0]} exited ${code} before listening: ${err}`)));
    const onData = (d: Buffer) => {
      out += d.toString();
      const line = out.split('\n').find((l) => l.startsWith('{') && l.includes(listening));
      if (!line) return;
      child.stdout.off('data', onData);
      child.stdout.resume(); // keep draining its logs
      resolve({
        port: (JSON.parse(line) as { port: number }).port,
        cpuMs: () => processCpuMs(child.pid!),
        stop: async () => {
          child.kill('SIGTERM');
          await exited;
        },
      });
    };
    child.stdout.on('data', onData);
  });
}

/** One request, fully checked: the webhook must inject, not just answer. */
export function admitOnce(port: number, ca: string, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/mutate',
        method: 'POST',
        ca,
        agent: false,
        headers: { 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => {
          const review = JSON.parse(text) as { response?: { allowed?: boolean; patch?: string } };
          if (res.statusCode !== 200 || review.response?.allowed !== true || !review.response.patch)
            reject(new Error(`the webhook did not inject the bench pod: ${res.statusCode} ${text}`));
          else resolve(text);
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
