/**
 * Issue 37: an `exec:` helper or a rotation command is held to the agent's own standard. The kernel
 * makes a process non-dumpable at execve when its user cannot read its program (or a script's
 * interpreter); a dumpable helper hands another process of the agent's uid (an app in a shared-PID
 * pod) its environ, memory and pipes, and the agent's mount namespace through /proc/PID/root. So the
 * built agent, run as the image runs it (from an execute-only Node: a root-owned 0511 copy of this
 * test's, at a non-root uid), refuses a helper its user can read, or a script whose `#!` interpreter
 * its user can read, at start-up and before each run. Helpers are a static binary
 * (exec-binary-helper.c, built with musl-gcc) given various owners and modes, and Node and sh
 * scripts; the kernel check peeks at the agent's processes from another process of the same uid.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { NATIVE_CFLAGS } from '../../images/build-native.ts';
import { runTool } from '../../images/container-engine.ts';
import { parseExecHelpersVolume } from '../../webhook/exec-helpers-volume.ts';
import { assertNoCanary } from '../support/canary.ts';
import { AGENT_JS, eventually, memoryDir } from '../support/run-agent.ts';

const MUSL_INSTALL = 'apt-get install -y musl-tools (Debian; .ci/run installs it on a fresh machine)';
/** The uids the agent runs as here: a pod's runAsUser, and the webhook's default AGENT_RUN_AS_USER. */
const UIDS = [1000, 65532] as const;

let root: string;
/** A root-owned, 0511 copy of this test's Node: what /nodejs/bin/node is in the agent image. */
let closedNode: string;
/** Where the helpers leave their marks (ran-NAME) and the kernel check's go file. */
let scratch: string;
let helpers: string;

/** Builds exec-binary-helper.c printing `value`; fails naming the install line without musl-gcc. */
function buildBinary(value: string): string {
  const out = join(root, 'build', value);
  mkdirSync(join(root, 'build'), { recursive: true });
  runTool(
    'musl-gcc',
    [
      ...NATIVE_CFLAGS,
      `-DVALUE="${value}"`,
      `-DSCRATCH="${scratch}"`,
      '-o',
      out,
      new URL('./exec-binary-helper.c', import.meta.url).pathname,
    ],
    { install: MUSL_INSTALL },
  );
  return out;
}

function place(path: string, from: string, owner: { uid: number; gid: number; mode: number }): void {
  copyFileSync(from, path);
  chownSync(path, owner.uid, owner.gid);
  chmodSync(path, owner.mode);
}

/** A Node script helper: marks that it ran, prints its name; with the argument `hold`, waits for the go file. */
function nodeScript(name: string, shebang: string): string {
  return `${shebang}
import { appendFileSync, existsSync } from 'node:fs';
appendFileSync(${JSON.stringify(join(scratch, `ran-${name}`))}, 'x');
const print = () => process.stdout.write(${JSON.stringify(name)});
const deadline = Date.now() + 30_000;
const wait = () => existsSync(${JSON.stringify(join(scratch, 'go'))}) ? print() : Date.now() > deadline ? process.exit(75) : setTimeout(wait, 10);
process.argv[2] === 'hold' ? wait() : print();
`;
}

function marks(): string[] {
  return readdirSync(scratch)
    .filter((f) => f.startsWith('ran-'))
    .sort();
}

function clearMarks(): void {
  for (const f of readdirSync(scratch)) rmSync(join(scratch, f));
}

interface AgentProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; stdout: string; stderr: string }>;
  logs(): Record<string, unknown>[];
  waitForLog(match: (l: Record<string, unknown>) => boolean, what: string): Promise<Record<string, unknown>>;
}

/** The built agent as the image runs it: `node` (the closed copy, or a readable one) at uid:gid, env only. */
function startAgent(node: string, env: Record<string, string>, uid: number): AgentProcess {
  const child = spawn(node, [AGENT_JS], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    uid,
    gid: uid,
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on('close', (code) => {
      assertNoCanary(stdout + stderr, 'the agent’s output');
      resolve({ code, stdout, stderr });
    }),
  );
  const logs = () =>
    stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return {
    child,
    exited,
    logs,
    waitForLog: (match, what) => eventually(() => logs().find(match), `${what}; stderr: ${stderr}`, 20_000),
  };
}

async function runAgentOnce(node: string, env: Record<string, string>, uid: number) {
  const agent = startAgent(node, env, uid);
  const timer = setTimeout(() => agent.child.kill('SIGKILL'), 20_000);
  const result = await agent.exited;
  clearTimeout(timer);
  return result;
}

/** The helper names a start-up refusal lists, with the uid each names. */
function refusedHelpers(stderr: string): Map<string, string> {
  const named = new Map<string, string>();
  for (const m of stderr.matchAll(
    /EXEC_HELPERS_DIR: the helper "([^"]+)" in "[^"]+" (?:is readable|is a script whose #! interpreter "[^"]+" is readable) by the agent's uid (\d+): its process could be read by another container of the pod/g,
  ))
    named.set(m[1]!, m[2]!);
  return named;
}

/** What another process of `uid` gets of /proc/PID: `read`/`opened`, or the error code. */
function peek(pid: number, uid: number): Record<string, string> {
  const script = `const fs = require('node:fs');
const pid = process.argv[1];
const tries = {
  environ: () => (fs.readFileSync('/proc/' + pid + '/environ').length > 0 ? 'read' : 'empty'),
  fd: () => (fs.readdirSync('/proc/' + pid + '/fd'), 'opened'),
  root: () => (fs.readdirSync('/proc/' + pid + '/root'), 'opened'),
  mem: () => (fs.closeSync(fs.openSync('/proc/' + pid + '/mem', 'r')), 'opened'),
};
const out = {};
for (const [kind, attempt] of Object.entries(tries)) {
  try { out[kind] = attempt(); } catch (e) { out[kind] = e.code; }
}
process.stdout.write(JSON.stringify(out));`;
  const r = spawnSync(process.execPath, ['-e', script, String(pid)], {
    uid,
    gid: uid,
    encoding: 'utf8',
    timeout: 20_000,
  });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as Record<string, string>;
}

/** The process whose parent is `ppid`, once there is one. */
function childOf(ppid: number): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === ppid) return Number(entry);
    } catch {
      // Gone between readdir and read.
    }
  }
  return undefined;
}

/** The binaries of the start-up checks: owner, group and mode, and the agent uids that read them. */
const BINARIES = [
  { name: 'others-read', uid: 0, gid: 0, mode: 0o555, readBy: [1000, 65532] },
  { name: 'execute-only', uid: 0, gid: 0, mode: 0o511, readBy: [] },
  { name: 'root-rwx-others-x', uid: 0, gid: 0, mode: 0o711, readBy: [] },
  { name: 'group-read', uid: 0, gid: 1000, mode: 0o551, readBy: [1000] },
  { name: 'owner-read', uid: 1000, gid: 0, mode: 0o511, readBy: [1000] },
  { name: 'owner-execute-only', uid: 1000, gid: 0, mode: 0o111, readBy: [] },
] as const;

/** The scripts (0555, root's): the interpreter a refusal names, or undefined where it runs. */
let scripts: { name: string; shebang: string; interpreter: string | undefined }[];

describe('exec: helpers and ROTATION_COMMAND the agent’s uid can read', () => {
  before(() => {
    assert.equal(
      process.getuid?.(),
      0,
      'these tests give files to root and to uid 1000 and run the agent as uid 1000 and 65532: run them as root (npm test does here)',
    );
    root = mkdtempSync(join(tmpdir(), 'secret-agent-readable-helpers-'));
    chmodSync(root, 0o755);
    mkdirSync(join(root, 'node'), { mode: 0o755 });
    closedNode = join(root, 'node', 'node');
    place(closedNode, process.execPath, { uid: 0, gid: 0, mode: 0o511 });
    scratch = join(root, 'scratch');
    mkdirSync(scratch);
    chmodSync(scratch, 0o777);
    helpers = join(root, 'helpers');
    mkdirSync(helpers, { mode: 0o755 });
    for (const b of BINARIES) place(join(helpers, b.name), buildBinary(b.name), b);
    // A relative #! interpreter is found from the run's directory, the helpers volume.
    symlinkSync(closedNode, join(helpers, 'node-link'));
    scripts = [
      { name: 'node-script', shebang: `#!${closedNode}`, interpreter: undefined },
      { name: 'node-script-spaced', shebang: `#! \t${closedNode} --no-warnings`, interpreter: undefined },
      { name: 'relative-interpreter', shebang: '#!node-link', interpreter: undefined },
      { name: 'readable-node', shebang: `#!${process.execPath}`, interpreter: process.execPath },
      { name: 'shell', shebang: '#!/bin/sh', interpreter: '/bin/sh' },
    ];
    for (const s of scripts) {
      const body =
        s.name === 'shell'
          ? `${s.shebang}\necho ran > ${scratch}/ran-shell\nprintf shell\n`
          : nodeScript(s.name, s.shebang);
      writeFileSync(join(helpers, s.name), body, { mode: 0o555 });
    }
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  for (const uid of UIDS) {
    it(`as uid ${uid}: a helper that uid can read, or a script whose interpreter it can read, is refused at start-up before any helper runs (exit 2, naming the helper, the uid and the fix)`, async () => {
      using secrets = memoryDir(uid);
      clearMarks();
      const all = [...BINARIES.map((b) => b.name), ...scripts.map((s) => s.name)];
      const env: Record<string, string> = { SECRETS_DIR: secrets.path, EXEC_HELPERS_DIR: helpers };
      all.forEach((name, i) => {
        env[`SECRET_${i}_REF`] = `exec:${name}/x`;
        env[`SECRET_${i}_FILENAME`] = name;
      });
      const run = await runAgentOnce(closedNode, env, uid);
      assert.equal(run.code, 2, run.stderr);
      const expected = [
        ...BINARIES.filter((b) => (b.readBy as readonly number[]).includes(uid)).map((b) => b.name),
        ...scripts.filter((s) => s.interpreter !== undefined).map((s) => s.name),
      ].sort();
      const named = refusedHelpers(run.stderr);
      assert.deepEqual([...named.keys()].sort(), expected, run.stderr);
      for (const u of named.values()) assert.equal(u, String(uid));
      // Each with its secret and its fix.
      const binary = expected.find((n) => !scripts.some((s) => s.name === n))!;
      assert.match(
        run.stderr,
        new RegExp(
          `the helper "${binary}" in "${helpers}" is readable by the agent's uid ${uid}: its process could be read by another container of the pod \\(its environment, memory, pipes, and the agent's files through /proc\\), which SECRET_${all.indexOf(binary)} run\\. Fix: make it root’s and execute-only, mode 0511 .*"defaultMode":329.* or write it for Node, starting #!/nodejs/bin/node`,
        ),
      );
      for (const s of scripts.filter((s) => s.interpreter !== undefined))
        assert.match(
          run.stderr,
          new RegExp(
            `the helper "${s.name}" in "[^"]+" is a script whose #! interpreter "${s.interpreter}" is readable by the agent's uid ${uid}: .*, which SECRET_${all.indexOf(s.name)} run\\. Fix: start it with #!/nodejs/bin/node`,
          ),
        );
      assert.deepEqual(marks(), [], 'no helper ran, the closed ones neither: the check comes before any run');
      assert.deepEqual(readdirSync(secrets.path), []);
    });

    it(`as uid ${uid}: the helpers that uid cannot read run, binaries and scripts of an execute-only Node alike`, async () => {
      using secrets = memoryDir(uid);
      clearMarks();
      const closed = [
        ...BINARIES.filter((b) => !(b.readBy as readonly number[]).includes(uid)).map((b) => b.name),
        ...scripts.filter((s) => s.interpreter === undefined).map((s) => s.name),
      ];
      assert.ok(closed.length >= 5);
      const env: Record<string, string> = { SECRETS_DIR: secrets.path, EXEC_HELPERS_DIR: helpers };
      closed.forEach((name, i) => {
        env[`SECRET_${i}_REF`] = `exec:${name}/x`;
        env[`SECRET_${i}_FILENAME`] = name;
      });
      const run = await runAgentOnce(closedNode, env, uid);
      assert.equal(run.code, 0, run.stderr);
      for (const name of closed) assert.equal(readFileSync(join(secrets.path, name), 'utf8'), name);
      assert.deepEqual(marks(), closed.map((n) => `ran-${n}`).sort());
    });
  }

  it('a helper swapped for a readable binary after start is refused before its next run; the last good file stays, and a closed one is taken again', async () => {
    const uid = 1000;
    using secrets = memoryDir(uid);
    clearMarks();
    // A ConfigMap volume's layout: NAME -> ..data/NAME, ..data -> the current timestamped directory.
    const dir = join(root, 'configmap');
    mkdirSync(dir, { mode: 0o755 });
    const publish = (version: string, mode: number) => {
      const data = join(dir, `..${version}`);
      mkdirSync(data, { mode: 0o755 });
      place(join(data, 'rotating'), buildBinary(version), { uid: 0, gid: 0, mode });
      symlinkSync(`..${version}`, join(dir, '..data_tmp'));
      renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
    };
    publish('v1', 0o511);
    symlinkSync('..data/rotating', join(dir, 'rotating'));
    const agent = startAgent(
      closedNode,
      {
        AGENT_MODE: 'sidecar',
        SECRETS_DIR: secrets.path,
        SECRET_0_REF: 'exec:rotating/x',
        SECRET_0_FILENAME: 'value',
        EXEC_HELPERS_DIR: dir,
        REFRESH_INTERVAL: '1s',
        AGENT_HTTP_ADDR: '127.0.0.1:0',
      },
      uid,
    );
    try {
      await agent.waitForLog((l) => l.msg === 'secrets written', 'the first value');
      assert.equal(readFileSync(join(secrets.path, 'value'), 'utf8'), 'v1');

      publish('v2', 0o555);
      const refused = await agent.waitForLog(
        (l) => l.msg === 'refresh failed; keeping the last good files',
        'the refresh to refuse the readable helper',
      );
      assert.equal(refused.reason, 'permission-denied');
      assert.match(
        String(refused.detail),
        /the helper "rotating" in ".*" is readable by the agent's uid 1000: its process could be read by another container of the pod/,
      );
      assert.match(String(refused.fix), /mode 0511/);
      assert.equal(readFileSync(join(secrets.path, 'value'), 'utf8'), 'v1', 'the last good file stays');
      assert.ok(!existsSync(join(scratch, 'ran-v2')), 'the readable helper never ran');

      publish('v3', 0o511);
      await agent.waitForLog((l) => l.msg === 'rotated', 'the closed helper to be taken again');
      assert.equal(readFileSync(join(secrets.path, 'value'), 'utf8'), 'v3');
      assert.ok(!existsSync(join(scratch, 'ran-v2')));
    } finally {
      agent.child.kill('SIGTERM');
      assert.equal((await agent.exited).code, 0);
    }
  });

  it('the kernel: a 0511 binary and a script of an execute-only Node, run by the agent at uid 1000, are closed to another process of uid 1000; a readable binary, run by an agent whose own Node that uid can read, is open (the control)', async () => {
    const uid = 1000;
    const cases = [
      { helper: 'execute-only', node: closedNode, open: false },
      { helper: 'node-script', node: closedNode, open: false },
      { helper: 'others-read', node: process.execPath, open: true },
    ];
    const figures: string[] = [];
    for (const c of cases) {
      using secrets = memoryDir(uid);
      clearMarks();
      const agent = startAgent(
        c.node,
        {
          SECRETS_DIR: secrets.path,
          SECRET_0_REF: `exec:${c.helper}/hold`,
          SECRET_0_FILENAME: 'value',
          EXEC_HELPERS_DIR: helpers,
        },
        uid,
      );
      const pid = agent.child.pid!;
      const helperPid = await eventually(() => childOf(pid), `${c.helper} to start`);
      // Until the go file exists the helper holds: nothing here depends on timing.
      await eventually(
        () => (existsSync(join(scratch, `ran-${c.helper}`)) ? true : undefined),
        `${c.helper} to run`,
      );
      const seen = { agent: peek(pid, uid), helper: peek(helperPid, uid) };
      assert.ok(existsSync(`/proc/${helperPid}/stat`), 'the helper was still running when peeked at');
      writeFileSync(join(scratch, 'go'), '');
      const run = await agent.exited;
      assert.equal(run.code, 0, run.stderr);
      assert.equal(readFileSync(join(secrets.path, 'value'), 'utf8'), c.helper);
      const expected = c.open
        ? { environ: 'read', fd: 'opened', root: 'opened', mem: 'opened' }
        : { environ: 'EACCES', fd: 'EACCES', root: 'EACCES', mem: 'EACCES' };
      assert.deepEqual(seen, { agent: expected, helper: expected }, c.helper);
      figures.push(`${c.helper}: ${JSON.stringify(seen.helper)}`);
    }
    console.log(`peeks from uid 1000: ${figures.join('; ')}`);
  });

  it('ROTATION_COMMAND: a program the agent’s uid can read is refused at start-up, and before a run when it became readable; a 0511 program runs', async () => {
    const uid = 1000;
    const programs = join(root, 'programs');
    mkdirSync(programs, { mode: 0o755 });
    place(join(programs, 'readable'), buildBinary('readable-command'), { uid: 0, gid: 0, mode: 0o555 });
    place(join(programs, 'reload'), buildBinary('reload-command'), { uid: 0, gid: 0, mode: 0o511 });
    const current = join(scratch, 'current');
    writeFileSync(
      join(helpers, 'from-file'),
      `#!${closedNode}
import { readFileSync } from 'node:fs';
process.stdout.write(readFileSync(${JSON.stringify(current)}, 'utf8'));
`,
      { mode: 0o555 },
    );
    const env = (secretsDir: string, command: string) => ({
      AGENT_MODE: 'sidecar',
      SECRETS_DIR: secretsDir,
      SECRET_0_REF: 'exec:from-file/x',
      SECRET_0_FILENAME: 'value',
      EXEC_HELPERS_DIR: helpers,
      REFRESH_INTERVAL: '1s',
      AGENT_HTTP_ADDR: '127.0.0.1:0',
      ROTATION_COMMAND: command,
    });
    {
      using secrets = memoryDir(uid);
      clearMarks();
      writeFileSync(current, 'one');
      const run = await runAgentOnce(
        closedNode,
        env(secrets.path, `${join(programs, 'readable')} --now`),
        uid,
      );
      assert.equal(run.code, 2, run.stderr);
      assert.match(
        run.stderr,
        new RegExp(
          `ROTATION_COMMAND: runs "${join(programs, 'readable')}", which the agent's uid 1000 can read: its process could be read by another container of the pod .*\\. Fix: run a script with the agent’s own Node, which is execute-only \\(ROTATION_COMMAND=node /path/to/reload\\.mjs\\), or make the program root’s and execute-only, mode 0511`,
        ),
      );
      assert.deepEqual(readdirSync(secrets.path), [], 'refused before any fetch');
    }
    {
      using secrets = memoryDir(uid);
      clearMarks();
      writeFileSync(current, 'one');
      const agent = startAgent(closedNode, env(secrets.path, join(programs, 'reload')), uid);
      try {
        await agent.waitForLog((l) => l.msg === 'secrets written', 'the first value');
        writeFileSync(current, 'two');
        await agent.waitForLog((l) => l.msg === 'rotation: the command succeeded', 'the command to run');
        assert.ok(existsSync(join(scratch, 'ran-reload-command')));

        // Its file replaced by a readable program: refused before the next run, which it never gets.
        place(join(programs, 'reload.new'), buildBinary('readable-command'), { uid: 0, gid: 0, mode: 0o555 });
        renameSync(join(programs, 'reload.new'), join(programs, 'reload'));
        writeFileSync(current, 'three');
        const refused = await agent.waitForLog(
          (l) => l.msg === 'rotation: the command was refused',
          'the command to be refused',
        );
        assert.match(String(refused.problem), /runs ".*\/reload", which the agent's uid 1000 can read/);
        const failed = await agent.waitForLog(
          (l) => l.msg === 'rotation notification failed' && l.kind === 'command',
          'the rotation to report it',
        );
        assert.equal(failed.reason, 'permission-denied');
        assert.equal(readFileSync(join(secrets.path, 'value'), 'utf8'), 'three', 'the files still rotate');
        assert.ok(!existsSync(join(scratch, 'ran-readable-command')), 'the readable program never ran');
      } finally {
        agent.child.kill('SIGTERM');
        assert.equal((await agent.exited).code, 0);
      }
    }
    {
      using secrets = memoryDir(uid);
      writeFileSync(current, 'one');
      const agent = startAgent(closedNode, env(secrets.path, 'node --version'), uid);
      try {
        await agent.waitForLog(
          (l) => l.msg === 'secrets written',
          '`node`, the agent’s own Node, to be taken',
        );
      } finally {
        agent.child.kill('SIGTERM');
        assert.equal((await agent.exited).code, 0);
      }
    }
  });
});

describe('EXEC_HELPERS_VOLUME: the modes a ConfigMap of helpers may have', () => {
  const parse = (defaultMode?: number) =>
    parseExecHelpersVolume(
      JSON.stringify({ configMap: { name: 'h', ...(defaultMode === undefined ? {} : { defaultMode }) } }),
      'EXEC_HELPERS_VOLUME',
    );
  it('0555 by default (Node scripts, which Node reads); 0511 (binaries, which the agent must not read) taken; without every user’s execute bit refused', () => {
    assert.deepEqual(parse(), { configMap: { name: 'h', defaultMode: 0o555 } });
    assert.deepEqual(parse(329), { configMap: { name: 'h', defaultMode: 0o511 } });
    assert.deepEqual(parse(0o711), { configMap: { name: 'h', defaultMode: 0o711 } });
    for (const mode of [0o554, 0o644, 0o550, 0o500])
      assert.throws(
        () => parse(mode),
        (e: Error) =>
          e.message.includes(
            `defaultMode ${mode} (0${mode.toString(8)}) does not let every user read and execute the helpers (scripts, 0555) or execute them (binaries, 0511)`,
          ) && e.message.includes('write 329 for 0511'),
        mode.toString(8),
      );
  });
});
