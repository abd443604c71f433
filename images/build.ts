/**
 * Builds what the images run: dist/agent.js (+ dist/agent-chunks/, one chunk per provider, loaded
 * only when a reference needs it), dist/wait-ready.cjs (the native sidecar's postStart hook) and
 * dist/webhook.js. Self-contained: no node_modules at run time.
 * Also the example exec: helpers (helpers/*.ts), each one readable file in dist/helpers/, named as
 * references name it, to put into a helpers volume.
 */
import { build, type BuildOptions, type Plugin } from 'esbuild';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { builtinModules, createRequire } from 'node:module';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildHelpers } from './build-helpers.ts';

const require = createRequire(import.meta.url);

/**
 * `import … from 'node:http'` in ESM builds a facade of every export, which runs the builtin's lazy
 * getters: for http that loads Node's internal undici (~25 ms of start-up), for crypto webcrypto, for
 * fs its promises API. So every builtin import goes through a shim whose exports are getters: the
 * builtin is required on first use of one of them, not when the importing module is evaluated. That
 * also keeps builtins a start-up snapshot cannot hold (http's parser) out of the agent's snapshot
 * until a pod's run uses them. The names are this Node's exports (the images build with their own).
 */
const lazyBuiltins: Plugin = {
  name: 'lazy-builtins',
  setup(b) {
    const builtins = new Set(builtinModules);
    b.onResolve({ filter: /^(node:)?[a-z_/0-9]+$/ }, (args) => {
      const name = args.path.replace(/^node:/, '');
      if (!builtins.has(name) || args.namespace === 'lazy-builtin') return undefined;
      // A CommonJS require() is shimmed too in the snapshot's build: its modules are evaluated there.
      const shimmed =
        args.kind === 'import-statement' ||
        args.kind === 'dynamic-import' ||
        (b.initialOptions.format === 'cjs' && args.kind === 'require-call');
      if (!shimmed) return undefined;
      return { path: name, namespace: 'lazy-builtin' };
    });
    // A CommonJS shim: esbuild then reads named imports as properties where they are used.
    b.onLoad({ filter: /.*/, namespace: 'lazy-builtin' }, (args) => {
      const id = JSON.stringify(`node:${args.path}`);
      const builtin: unknown = require(`node:${args.path}`);
      // A builtin that is itself a function (events, stream, assert) is what its default import
      // names: code extends it and tests instanceof against it. Those are loaded at Node's own start.
      if (typeof builtin === 'function')
        return { contents: `module.exports = require(${id});`, loader: 'js' };
      const names = JSON.stringify(Object.keys(builtin as object));
      return {
        contents: [
          `let m; const load = () => (m ??= require(${id}));`,
          `for (const k of ${names})`,
          '  Object.defineProperty(exports, k, { get: () => load()[k], set: (v) => { load()[k] = v; }, enumerable: true });',
        ].join('\n'),
        loader: 'js',
      };
    });
  },
};

// GCP (agent/providers/gcp/gcp-provider.ts):
/**
 * @google-cloud/secret-manager and google-gax re-export generated protobufjs classes for every
 * message (`protos`, `IamProtos`, `LocationProtos`, `operationsProtos`): ~1 MB minified that only
 * typed callers use; the clients themselves load the .json descriptors. Empty modules in their
 * place halve the gcp chunk and the time to parse it.
 */
const gcpStaticProtos: Plugin = {
  name: 'gcp-static-protos',
  setup(b) {
    b.onLoad(
      {
        filter:
          /node_modules[\\/](?:@google-cloud[\\/]secret-manager[\\/]build[\\/]protos[\\/]protos|google-gax[\\/]build[\\/]protos[\\/](?:iam_service|locations|operations))\.js$/,
      },
      () => ({ contents: 'module.exports = {};', loader: 'js' }),
    );
  },
};

/**
 * google-gax's main entry loads @grpc/grpc-js (~270 KB of the bundle, ~20 ms and ~4 MiB at start-up) even
 * for a client that talks REST. The Secret Manager client module requires it by its bare name for two
 * things only, a logging switch and decodeAnyProtosInArray (for an error's statusDetails); it is handed
 * the entry of its transport when constructed (agent/providers/gcp/gcp-provider.ts: `google-gax/build/src/index.js`
 * for gRPC, `google-gax/fallback` for REST, each a lazily loaded chunk). So the bare `google-gax` becomes
 * a module with those two, taken from where google-gax's own entry takes them. Exactly the bare name: the
 * entries' own paths are untouched. test/providers/gcp.test.ts checks the client reads nothing else.
 */
const gaxMain = createRequire(import.meta.url).resolve('google-gax');
const gcpGaxByTransport: Plugin = {
  name: 'gcp-gax-by-transport',
  setup(b) {
    b.onResolve({ filter: /^google-gax$/ }, () => ({ path: 'google-gax', namespace: 'gcp-gax-for-client' }));
    b.onLoad({ filter: /.*/, namespace: 'gcp-gax-for-client' }, () => ({
      contents: [
        'module.exports = {',
        "  get loggingUtils() { return require('google-logging-utils'); },",
        "  get decodeAnyProtosInArray() { return require('./util.js').decodeAnyProtosInArray; },",
        '};',
      ].join('\n'),
      resolveDir: dirname(gaxMain),
      loader: 'js',
    }));
  },
};

/**
 * google-gax's REST stub (fallbackServiceStub.js) makes its keep-alive http and https Agents when the
 * module is evaluated. An Agent holds native state (http's parser) that a V8 start-up snapshot cannot
 * hold, so that alone kept the GCP client out of the agent's snapshot (agent/snapshot.ts). Here each
 * Agent is made on the first request that needs it instead: the same two Agents, the same options.
 */
const GAX_EAGER_AGENTS = `    const http = require('http');
    const https = require('https');
    const httpAgent = new http.Agent({ keepAlive: true });
    const httpsAgent = new https.Agent({ keepAlive: true });
    agentOption = (parsedUrl) => {
        if (parsedUrl.protocol === 'http:') {
            return httpAgent;
        }
        return httpsAgent;
    };`;
const GAX_LAZY_AGENTS = `    let httpAgent, httpsAgent;
    agentOption = (parsedUrl) => {
        if (parsedUrl.protocol === 'http:') {
            return (httpAgent ??= new (require('http').Agent)({ keepAlive: true }));
        }
        return (httpsAgent ??= new (require('https').Agent)({ keepAlive: true }));
    };`;
const gcpLazyAgents: Plugin = {
  name: 'gcp-lazy-agents',
  setup(b) {
    b.onLoad(
      { filter: /node_modules[\\/]google-gax[\\/]build[\\/]src[\\/]fallbackServiceStub\.js$/ },
      async (args) => {
        const source = await readFile(args.path, 'utf8');
        if (!source.includes(GAX_EAGER_AGENTS))
          throw new Error(
            `${args.path}: the eager keep-alive Agents this build makes lazy are not there any more`,
          );
        return { contents: source.replace(GAX_EAGER_AGENTS, GAX_LAZY_AGENTS), loader: 'js' };
      },
    );
  },
};

// Bundled CommonJS dependencies call require(); ESM output has none unless we make one.
const banner = {
  js: [
    "import { createRequire as __createRequire } from 'node:module';",
    "import { fileURLToPath as __fileURLToPath } from 'node:url';",
    'const require = __createRequire(import.meta.url);',
    'const __filename = __fileURLToPath(import.meta.url);',
    "const __dirname = __fileURLToPath(new URL('.', import.meta.url));",
  ].join('\n'),
};

const common: BuildOptions = {
  bundle: true,
  platform: 'node',
  target: 'node24',
  format: 'esm',
  minify: true,
  legalComments: 'external',
  banner,
  logLevel: 'warning',
  // Which package files each bundle holds: the images' SBOMs list exactly those (images/sbom.ts).
  metafile: true,
  // Prefer packages' ES module builds: tree-shakeable, so the AWS SDK chunk loads far fewer builtins.
  mainFields: ['module', 'main'],
  plugins: [lazyBuiltins, gcpStaticProtos, gcpGaxByTransport, gcpLazyAgents],
  alias: { axios: fileURLToPath(new URL('./axios-stub.cjs', import.meta.url)) },
  // debug (via google-gax and node-vault) tries require('supports-color') and carries on without it.
  // It is no dependency of ours: bundling it would ship whatever a dev tool happened to install.
  external: ['supports-color'],
};

// `node images/build.ts agent` builds only the agent (its image needs nothing else); default: all.
const only = process.argv[2];
if (only !== undefined && only !== 'agent' && only !== 'webhook' && only !== 'helpers')
  throw new Error(`unknown target ${only}: use agent, webhook or helpers`);

if (only === undefined || only === 'agent') {
  rmSync('dist/agent.js', { force: true });
  rmSync('dist/agent-chunks', { recursive: true, force: true });
  const agent = await build({
    ...common,
    entryPoints: { agent: 'agent/main.ts' },
    outdir: 'dist',
    splitting: true,
    chunkNames: 'agent-chunks/[name]-[hash]',
  });
  writeFileSync('dist/agent.meta.json', JSON.stringify(agent.metafile));
  // The start-up snapshot's script (agent/snapshot.ts): one CommonJS file, as `node --build-snapshot`
  // takes no modules but builtins. images/build-snapshot.ts turns it into dist/agent.blob.
  rmSync('dist/agent-snapshot.cjs', { force: true });
  const snapshot = await build({
    ...common,
    banner: {},
    format: 'cjs',
    entryPoints: { 'agent-snapshot': 'agent/snapshot.ts' },
    outdir: 'dist',
    outExtension: { '.js': '.cjs' },
  });
  writeFileSync('dist/agent-snapshot.meta.json', JSON.stringify(snapshot.metafile));
  // The native sidecar's postStart hook (agent/post-start/main.ts): its own small file, so waiting
  // costs a bare Node start and none of the agent's. CommonJS: no ES module loader to start.
  rmSync('dist/wait-ready.cjs', { force: true });
  const hook = await build({
    ...common,
    banner: {},
    format: 'cjs',
    entryPoints: { 'wait-ready': 'agent/post-start/main.ts' },
    outdir: 'dist',
    outExtension: { '.js': '.cjs' },
  });
  writeFileSync('dist/wait-ready.meta.json', JSON.stringify(hook.metafile));
}

if (only === undefined || only === 'helpers') {
  rmSync('dist/helpers', { recursive: true, force: true });
  await buildHelpers('dist/helpers');
}

if ((only === undefined || only === 'webhook') && existsSync('webhook/main.ts')) {
  rmSync('dist/webhook.js', { force: true });
  const webhook = await build({ ...common, entryPoints: { webhook: 'webhook/main.ts' }, outdir: 'dist' });
  writeFileSync('dist/webhook.meta.json', JSON.stringify(webhook.metafile));
}
