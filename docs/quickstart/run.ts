/**
 * `npm start`: the whole flow on this machine, no cluster and no cloud account.
 *   1. the built webhook (dist/webhook.js) on localhost, with a certificate made on the fly;
 *   2. a sample pod sent through it as an AdmissionReview; the injected containers summarised;
 *   3. the patch applied and the built agent (dist/agent.js) run with the env the patch gave it,
 *      on the `file:` provider, into a fresh directory in memory;
 *   4. a demo value changed: the files swapped (the template re-rendered) and the app told;
 *   5. everything stopped.
 * The values under docs/quickstart/secrets/ are demo data, not secrets; they are copied first, so
 * the rotation step never edits the repository.
 */
import { randomUUID } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type IncomingMessage } from 'node:http';
import { request } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pod } from 'kubernetes-models/v1';
import { AGENT_CONTAINER } from '../../webhook/injected-names.ts';
import { issueCertificateAuthority, issueServingCertificate } from '../../webhook/tls/issue-certificates.ts';
import { applyJsonPatch, type JsonPatchOperation } from '../../webhook/apply-patch.ts';
import { localAgentEnv } from './local-agent-env.ts';
import { describeExit, LoggedProcess } from './logged-process.ts';
import {
  admissionReview,
  DEMO_POD_IDENTITY,
  samplePod,
  TEMPLATE_ANNOTATION,
  TEMPLATE_FILE,
} from './sample-pod.ts';
import { summariseInjection, type ContainerDoc, type PodDoc } from './summarise-injection.ts';

const root = new URL('../../', import.meta.url).pathname;
const AGENT_IMAGE = 'ghcr.io/example/secret-agent:0.1.0';
const ROTATED_PASSWORD = 'demo-rotated-password-not-real';

const memoryFs = existsSync('/dev/shm');
const work = mkdtempSync(join(memoryFs ? '/dev/shm' : tmpdir(), 'secret-agent-quickstart-'));
const source = join(work, 'source');
const secretsDir = join(work, 'secrets');
const tlsDir = join(work, 'tls');
cpSync(join(root, 'docs/quickstart/secrets'), source, { recursive: true });
mkdirSync(secretsDir);
mkdirSync(tlsDir, { mode: 0o700 });

const say = (text = '') => console.log(text);
const indent = (lines: readonly string[], by = '   ') => lines.forEach((l) => say(`${by}${l}`));
const children: LoggedProcess[] = [];

/** The app: records what the agent tells it after a rotation. */
interface Told {
  readonly method: string;
  readonly url: string;
  readonly body: string;
}
const told: Told[] = [];
let onTold: (() => void) | undefined;
const app = createServer((req: IncomingMessage, res) => {
  let body = '';
  req.on('data', (d: Buffer) => (body += d.toString()));
  req.on('end', () => {
    told.push({ method: req.method ?? '', url: req.url ?? '', body });
    res.writeHead(204).end();
    onTold?.();
  });
});

process.once('SIGINT', () => {
  void stopAll().finally(() => process.exit(130));
});

try {
  say('secret-agent quick start: webhook → pod → agent → rotation, all on this machine.');
  say(`Working directory: ${work}${memoryFs ? ' (tmpfs)' : ''}\n`);

  // 1. The webhook, configured by env only, serving a certificate from a CA made just now.
  const now = new Date();
  const ca = await issueCertificateAuthority('secret-agent quick start CA', now, 86_400_000);
  const serving = await issueServingCertificate(ca, ['localhost'], now, 3_600_000, ['127.0.0.1']);
  writeFileSync(join(tlsDir, 'tls.crt'), serving.cert, { mode: 0o600 });
  writeFileSync(join(tlsDir, 'tls.key'), serving.key, { mode: 0o600 });
  const webhook = LoggedProcess.start('webhook', join(root, 'dist/webhook.js'), {
    WEBHOOK_HOST: '127.0.0.1',
    WEBHOOK_PORT: '0',
    TLS_MODE: 'file',
    TLS_CERT_FILE: join(tlsDir, 'tls.crt'),
    TLS_KEY_FILE: join(tlsDir, 'tls.key'),
    AGENT_IMAGE,
    // The demo has no cloud account: its pod references local files, which clusters keep off.
    ALLOW_FILE_REFERENCES: 'true',
    // No API server to ask (NATIVE_SIDECARS=auto): show the shape of a 1.29+ cluster.
    NATIVE_SIDECARS: 'true',
    LOG_LEVEL: 'info',
  });
  children.push(webhook);
  const listening = await webhook.waitForLog((l) => l.msg === 'webhook listening', 'listening log line');
  const port = Number(listening.port);
  say('1. Webhook');
  say(`   dist/webhook.js (pid ${webhook.pid}) serves https://127.0.0.1:${port}/mutate`);
  say('   with a certificate for localhost / 127.0.0.1 signed by a CA made just now.\n');

  // 2. A sample pod through POST /mutate, as the API server would send it.
  await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
  const reloadUrl = `http://127.0.0.1:${(app.address() as AddressInfo).port}/-/reload`;
  const pod = samplePod(source, reloadUrl);
  say(
    `2. Admission: pod ${pod.metadata.namespace}/${pod.metadata.name}, label secret-agent.io/inject=true, annotations:`,
  );
  indent(Object.entries(pod.metadata.annotations).map(([k, v]) => `${k}: ${v}`));
  say('   (the rotation URL is a tiny local HTTP listener standing in for the app)');
  const uid = randomUUID();
  const started = performance.now();
  const reply = await postJson(port, ca.cert, '/mutate', admissionReview(pod, uid));
  const tookMs = performance.now() - started;
  const response = (reply as { response?: AdmissionResponse }).response;
  if (!response || response.uid !== uid)
    throw new Error(`not an AdmissionReview answer: ${JSON.stringify(reply)}`);
  if (!response.allowed) throw new Error(`the webhook denied the pod: ${response.status?.message ?? ''}`);
  if (response.patchType !== 'JSONPatch' || !response.patch) throw new Error('the webhook sent no patch');
  const ops = JSON.parse(Buffer.from(response.patch, 'base64').toString('utf8')) as JsonPatchOperation[];
  const patched = applyJsonPatch(pod, ops) as unknown as PodDoc;
  new Pod(patched as unknown as ConstructorParameters<typeof Pod>[0]).validate();
  say(
    `   → allowed in ${tookMs.toFixed(0)} ms with ${ops.length} JSONPatch operations; the patched pod is a valid v1 Pod:`,
  );
  indent(summariseInjection(pod as unknown as PodDoc, patched), '     ');
  say();

  // 3. The agent with exactly the env the patch gave it, bar what only a kubelet provides.
  const agentContainer = [...(patched.spec.initContainers ?? []), ...patched.spec.containers].find(
    (c: ContainerDoc) => c.name === AGENT_CONTAINER,
  );
  if (!agentContainer) throw new Error(`the patch added no ${AGENT_CONTAINER} container`);
  const local = localAgentEnv(agentContainer, { secretsDir, pod: DEMO_POD_IDENTITY, memoryFs });
  say(`3. Agent: dist/agent.js with the env of ${AGENT_CONTAINER} (AGENT_MODE=${local.env.AGENT_MODE});`);
  say('   replaced for this machine only:');
  const width = Math.max(...local.changes.map((c) => c.name.length));
  indent(
    local.changes.map((c) => `${c.name.padEnd(width)}  ${c.rendered} → ${c.local}`),
    '     ',
  );
  const agent = LoggedProcess.start('agent', join(root, 'dist/agent.js'), local.env);
  children.push(agent);
  const probes = await agent.waitForLog(
    (l) => l.msg === 'serving /healthz, /readyz, /metrics',
    'probe address',
  );
  const written = await agent.waitForLog((l) => l.msg === 'secrets written', 'the first write');
  say(`   started (pid ${agent.pid}), probes on ${String(probes.addr)}`);
  say(`   ready: ${String(written.files)} files written into ${secretsDir}`);
  indent(listFiles(secretsDir), '     ');
  say(`   ${TEMPLATE_FILE} was rendered from the template in ${TEMPLATE_ANNOTATION}:`);
  say(`     ${pod.metadata.annotations[TEMPLATE_ANNOTATION]}`);
  say(`     → ${JSON.stringify(readFileSync(join(secretsDir, TEMPLATE_FILE), 'utf8'))}`);
  say();

  // 4. A value changes at the source: the agent swaps the set and tells the app.
  const dataBefore = readlinkSync(join(secretsDir, '..data'));
  const db = JSON.parse(readFileSync(join(source, 'database.json'), 'utf8')) as Record<string, unknown>;
  db.password = ROTATED_PASSWORD;
  const logsBefore = agent.logs().length;
  const edited = performance.now();
  // Written aside and renamed, as any careful writer does, so the agent never reads half a file.
  writeFileSync(join(source, 'database.json.tmp'), `${JSON.stringify(db, null, 2)}\n`);
  renameSync(join(source, 'database.json.tmp'), join(source, 'database.json'));
  say(`4. Rotation: set "password" in ${join(source, 'database.json')} to "${ROTATED_PASSWORD}"`);
  const rotated = await agent.waitForLog((l) => l.msg === 'rotated', 'the rotation', 15_000, logsBefore);
  const message = await waitForApp(15_000);
  const tellMs = performance.now() - edited;
  say(`   agent: rotated ${(rotated.changed as string[]).join(', ')}`);
  const oldSetGone = !existsSync(join(secretsDir, dataBefore));
  say(
    `   ..data: ${dataBefore} → ${readlinkSync(join(secretsDir, '..data'))} (one rename${oldSetGone ? '; the old set removed' : ''})`,
  );
  indent(
    listFiles(secretsDir).filter((l) => /^db(?:-password|\/password|-url)\b/.test(l)),
    '     ',
  );
  if ((rotated.changed as string[]).includes(TEMPLATE_FILE))
    say(`   ${TEMPLATE_FILE} was rendered again from its template: it reads the password that changed`);
  say(
    `   the app received ${message.method} ${message.url} (${(tellMs / 1000).toFixed(1)} s after the edit):`,
  );
  say(`     ${message.body}`);
  say();

  // 5. Stop everything, the way the kubelet does: SIGTERM.
  const agentExit = await agent.stop();
  const webhookExit = await webhook.stop();
  await new Promise<void>((resolve) => app.close(() => resolve()));
  rmSync(tlsDir, { recursive: true, force: true });
  say(`5. Stopped with SIGTERM: agent ${describeExit(agentExit)}, webhook ${describeExit(webhookExit)}.`);
  say(`   The files are in ${secretsDir} (demo sources in ${source}).`);
  say(`   Remove them with: rm -rf ${work}`);
  if (agentExit.code !== 0 || webhookExit.code !== 0) {
    for (const c of children) console.error(c.tail());
    process.exit(1);
  }
} catch (e) {
  console.error(`\nquick start failed: ${(e as Error).message}`);
  for (const c of children) console.error(c.tail());
  await stopAll();
  rmSync(work, { recursive: true, force: true });
  process.exit(1);
}

interface AdmissionResponse {
  readonly uid?: string;
  readonly allowed?: boolean;
  readonly patchType?: string;
  readonly patch?: string;
  readonly status?: { readonly message?: string };
}

async function stopAll(): Promise<void> {
  await Promise.all(children.map((c) => c.stop()));
  app.close();
  app.closeAllConnections();
}

/** POST a JSON body over HTTPS, trusting only `ca`; resolves with the parsed JSON answer. */
function postJson(port: number, ca: string, path: string, body: unknown): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const text = JSON.stringify(body);
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        ca,
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) },
        timeout: 10_000,
      },
      (res) => {
        let answer = '';
        res.on('data', (d: Buffer) => (answer += d.toString()));
        res.on('end', () => {
          if (res.statusCode !== 200) reject(new Error(`POST ${path} answered ${res.statusCode}: ${answer}`));
          else resolve(JSON.parse(answer));
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`POST ${path} timed out`)));
    req.on('error', reject);
    req.end(text);
  });
}

function waitForApp(timeoutMs: number): Promise<Told> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the app was not told within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const check = () => {
      if (told.length === 0) return;
      clearTimeout(timer);
      onTold = undefined;
      resolve(told[0]!);
    };
    onTold = check;
    check();
  });
}

/** `path  mode  "content"` for every file the app sees (through the agent's symlinks), and ..data. */
function listFiles(dir: string): string[] {
  const lines = [`..data -> ${readlinkSync(join(dir, '..data'))}`];
  const walk = (rel: string) => {
    for (const name of readdirSync(join(dir, rel)).sort()) {
      if (name.startsWith('..')) continue;
      const path = rel ? `${rel}/${name}` : name;
      const info = statSync(join(dir, path));
      if (info.isDirectory()) walk(path);
      else
        lines.push(
          `${path.padEnd(14)} ${(info.mode & 0o777).toString(8).padStart(4, '0')}  ${JSON.stringify(readFileSync(join(dir, path), 'utf8'))}`,
        );
    }
  };
  walk('');
  return lines;
}
