/**
 * Variables a secret may never set (`secret-agent.io/env-<VAR>`, docs/env.md): those whose value a
 * loader, a shell or a language runtime reads to choose what code runs, or where the process looks for
 * it. A secret's value is written by whoever may write that backend secret, who is not the pod's
 * author; under one of these names that writer would run code in every selected container (a library
 * LD_PRELOAD loads, a module NODE_OPTIONS requires, a command BASH_ENV expands). None of them is a
 * secret: each is a path, a switch or a list of options, which the container's own `env` sets, where
 * the pod's author chooses it.
 *
 * The rule: a name is refused when it equals an entry's name, or starts with an entry's prefix,
 * compared without regard to case. Linux's variables are case-sensitive and ld.so ignores
 * `ld_preload`, but some readers fold case (.NET's config knobs, runtimes ported from Windows, where
 * names are case-insensitive), and no app has a reason to name a variable like a loader's in another
 * case: refusing every spelling costs nothing and needs no knowledge of each reader.
 * A prefix is used only where the whole namespace is one reader's (LD_, PYTHON, BASH_, DOTNET_…); where
 * apps commonly use the same prefix for names of their own (NODE_, GIT_, RUBY, DENO_), the reader's
 * names are listed one by one.
 */

export interface RefusedEnvFamily {
  /** Who reads these names. */
  readonly readBy: string;
  /** What a value under one of them does: why a secret may not set it. */
  readonly why: string;
  /** Exact names. */
  readonly names: readonly string[];
  /** Prefixes: every name starting with one. */
  readonly prefixes: readonly string[];
}

/** Every refused name and prefix, by who reads it: docs/env.md's table is generated from this list. */
export const REFUSED_ENV_FAMILIES: readonly RefusedEnvFamily[] = [
  {
    readBy: 'the dynamic loader (glibc’s ld.so, musl’s)',
    why: 'loads the libraries it names into every dynamically linked program, before `main` (`LD_PRELOAD`, `LD_AUDIT`), or chooses where they come from (`LD_LIBRARY_PATH`); glibc drops every `LD_` variable from a setuid program for that reason',
    names: [],
    prefixes: ['LD_'],
  },
  {
    readBy: 'the C library (glibc’s list of unsecure variables, which it drops from a setuid program)',
    why: 'loads code or data from the path it names (`GCONV_PATH` loads conversion modules, `GETCONF_DIR` programs, `LOCPATH` and `NLSPATH` locales and message catalogues), retunes the allocator and loader (`GLIBC_TUNABLES`, `MALLOC_*`, jemalloc’s `MALLOC_CONF`), writes to a file (`MALLOC_TRACE`) or redirects name lookups and temporary files (`HOSTALIASES`, `LOCALDOMAIN`, `RES_OPTIONS`, `RESOLV_HOST_CONF`, `NIS_PATH`, `TMPDIR`, `TZDIR`)',
    names: [
      'GCONV_PATH',
      'GETCONF_DIR',
      'GLIBC_TUNABLES',
      'HOSTALIASES',
      'LOCALDOMAIN',
      'LOCPATH',
      'NIS_PATH',
      'NLSPATH',
      'RESOLV_HOST_CONF',
      'RES_OPTIONS',
      'TMPDIR',
      'TZDIR',
    ],
    prefixes: ['MALLOC_'],
  },
  {
    readBy: 'the process’s command lookup and the programs that run a command from the environment',
    why: 'chooses which program runs for a bare name (`PATH`: the wrapper and every shell look the command up on it), or names a command line a program runs (`SHELL`, `PAGER`, `EDITOR`, `VISUAL`, `BROWSER`, which Python’s `webbrowser` runs)',
    names: ['PATH', 'SHELL', 'PAGER', 'EDITOR', 'VISUAL', 'BROWSER'],
    prefixes: [],
  },
  {
    readBy: 'shells (sh, dash, ash, BusyBox, bash, ksh, zsh)',
    why: 'a file every shell sources at start (`ENV`, `BASH_ENV`, zsh’s `ZDOTDIR`), options and prompts that run command substitutions (`SHELLOPTS=xtrace` with `PS4`), exported functions (`BASH_FUNC_*`), or how words are split and paths found (`IFS`, `CDPATH`, `FPATH`, `GLOBIGNORE`)',
    names: [
      'ENV',
      'BASHOPTS',
      'SHELLOPTS',
      'PS1',
      'PS2',
      'PS3',
      'PS4',
      'PROMPT_COMMAND',
      'IFS',
      'CDPATH',
      'FPATH',
      'GLOBIGNORE',
      'HISTFILE',
      'INPUTRC',
      'ZDOTDIR',
    ],
    prefixes: ['BASH_'],
  },
  {
    readBy: 'every program that reads a start-up or configuration file from a home or XDG directory',
    why: 'moves where programs read their start-up files and configuration (git’s `core.sshCommand`, Python’s user site-packages with its `.pth` files, shells’ rc files), which can run commands',
    names: ['HOME'],
    prefixes: ['XDG_'],
  },
  {
    readBy: 'Node.js',
    why: 'options and modules Node loads before the app (`NODE_OPTIONS=--require …` or `--import data:…` runs code from the value itself), where it finds modules, and whom its TLS trusts',
    names: [
      'NODE_OPTIONS',
      'NODE_PATH',
      'NODE_REPL_EXTERNAL_MODULE',
      'NODE_ICU_DATA',
      'NODE_EXTRA_CA_CERTS',
      'NODE_TLS_REJECT_UNAUTHORIZED',
      'NODE_REDIRECT_WARNINGS',
      'NODE_V8_COVERAGE',
      'NODE_COMPILE_CACHE',
      'NODE_PRESERVE_SYMLINKS',
      'NODE_PRESERVE_SYMLINKS_MAIN',
    ],
    prefixes: [],
  },
  {
    readBy: 'Python (CPython reads only names starting with `PYTHON`)',
    why: 'where modules come from (`PYTHONPATH`, `PYTHONHOME`, `PYTHONUSERBASE`), a file or module run at start (`PYTHONSTARTUP`, `PYTHONWARNINGS`, which imports the module a filter names, `PYTHONBREAKPOINT`), and interpreter options',
    names: [],
    prefixes: ['PYTHON'],
  },
  {
    readBy: 'Perl',
    why: 'modules loaded at start (`PERL5OPT=-M…`), library paths (`PERL5LIB`, `PERLLIB`), the debugger it runs (`PERL5DB`) and I/O layers',
    names: ['PERLLIB'],
    prefixes: ['PERL5', 'PERL_', 'PERLIO'],
  },
  {
    readBy: 'Ruby, RubyGems and Bundler',
    why: 'options and libraries loaded at start (`RUBYOPT=-r…`, `RUBYLIB`), where gems come from (`GEM_HOME`, `GEM_PATH`), and the Gemfile, which is Ruby code (`BUNDLE_GEMFILE`)',
    names: ['RUBYOPT', 'RUBYLIB', 'RUBYSHELL', 'GEM_HOME', 'GEM_PATH', 'BUNDLE_GEMFILE', 'BUNDLE_APP_CONFIG'],
    prefixes: [],
  },
  {
    readBy: 'the JVM and the scripts that start it',
    why: 'options every JVM takes (`-javaagent:` loads code before `main`): `JAVA_TOOL_OPTIONS`, `_JAVA_OPTIONS`, `JDK_JAVA_OPTIONS`, the launchers’ `JAVA_OPTS`, and where classes and the JVM come from (`CLASSPATH`, `JAVA_HOME`)',
    names: ['JAVA_TOOL_OPTIONS', '_JAVA_OPTIONS', 'JDK_JAVA_OPTIONS', 'JAVA_OPTS', 'CLASSPATH', 'JAVA_HOME'],
    prefixes: [],
  },
  {
    readBy: '.NET (CoreCLR, the host, .NET Framework’s profiler API)',
    why: 'assemblies and profilers loaded into the process (`DOTNET_STARTUP_HOOKS`, `CORECLR_PROFILER_PATH`, `COR_PROFILER_PATH`), and the runtime’s configuration knobs',
    names: [],
    prefixes: ['DOTNET_', 'CORECLR_', 'COR_', 'COMPlus_'],
  },
  {
    readBy: 'Go’s runtime, PHP, Lua, Erlang and Tcl',
    why: 'runtime settings that turn security checks off (`GODEBUG`), configuration files that prepend code (`PHPRC`, `PHP_INI_SCAN_DIR`), code run at start (`LUA_INIT`), and library paths (`LUA_PATH`, `ERL_LIBS`, `TCLLIBPATH`)',
    names: ['GODEBUG', 'PHPRC', 'PHP_INI_SCAN_DIR', 'TCLLIBPATH'],
    prefixes: ['LUA_', 'ERL_'],
  },
  {
    readBy: 'git, ssh and OpenSSL',
    why: 'commands they run (`GIT_SSH_COMMAND`, `GIT_ASKPASS`, `GIT_CONFIG_*`, which can set `core.fsmonitor`), the configuration that loads OpenSSL’s engines and providers (`OPENSSL_CONF`, `OPENSSL_MODULES`)',
    names: [
      'GIT_SSH',
      'GIT_SSH_COMMAND',
      'GIT_ASKPASS',
      'SSH_ASKPASS',
      'GIT_EXTERNAL_DIFF',
      'GIT_PAGER',
      'GIT_EDITOR',
      'GIT_SEQUENCE_EDITOR',
      'GIT_PROXY_COMMAND',
      'GIT_EXEC_PATH',
      'GIT_TEMPLATE_DIR',
      'GIT_DIR',
      'GIT_WORK_TREE',
    ],
    prefixes: ['GIT_CONFIG', 'OPENSSL_'],
  },
  {
    readBy: 'TLS libraries (OpenSSL, curl, Python’s requests and ssl)',
    why: 'whom the app’s TLS trusts (`SSL_CERT_FILE`, `SSL_CERT_DIR`, `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`), or a file that gets every TLS session’s keys (`SSLKEYLOGFILE`): whoever writes the secret could then read the app’s traffic',
    names: ['SSL_CERT_FILE', 'SSL_CERT_DIR', 'REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE', 'SSLKEYLOGFILE'],
    prefixes: [],
  },
];

/** Each name and prefix with its family, every spelling compared in upper case. */
const EXACT = new Map<string, RefusedEnvFamily>(
  REFUSED_ENV_FAMILIES.flatMap((f) => f.names.map((n) => [n.toUpperCase(), f] as const)),
);
const PREFIXES: readonly { readonly prefix: string; readonly family: RefusedEnvFamily }[] =
  REFUSED_ENV_FAMILIES.flatMap((f) => f.prefixes.map((p) => ({ prefix: p.toUpperCase(), family: f })));

/** Why `name` may not be set from a secret (the family that reads it, and the entry it matched), or undefined. */
export function refusedEnvName(
  name: string,
): { readonly family: RefusedEnvFamily; readonly entry: string } | undefined {
  const upper = name.toUpperCase();
  const exact = EXACT.get(upper);
  if (exact) return { family: exact, entry: upper };
  const byPrefix = PREFIXES.find((p) => upper.startsWith(p.prefix));
  return byPrefix && { family: byPrefix.family, entry: `${byPrefix.prefix}*` };
}
