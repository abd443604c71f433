/**
 * The families of names a secret may never set (refused-env-names.ts matches them; docs/env.md's
 * table is generated from them): who reads each name, why a value there chooses code or trust, and
 * the rules that name it.
 */

/** What whoever writes the secret could do through a refused name. */
export type RefusedEnvRisk = 'code' | 'trust' | 'identity';

export interface RefusedEnvFamily {
  /** Who reads these names; for a convention, `by convention: …`. */
  readonly readBy: string;
  /** What a value under one of them does: why a secret may not set it (docs/env.md's table). */
  readonly why: string;
  /** Exact names. */
  readonly names: readonly string[];
  /** Every name starting with one. */
  readonly prefixes: readonly string[];
  /**
   * Names under one of `prefixes` that end with one of these are admitted: credentials of the app's own
   * (GIT_TOKEN), which the reader never reads. Only where the reader's names are known to end otherwise.
   */
  readonly admittedEndings: readonly string[];
  /** Every name ending with one: a convention, whoever reads it. */
  readonly suffixes: readonly string[];
  /** Every name containing one. */
  readonly infixes: readonly string[];
  /** For suffixes and infixes: what a name so spelt holds by convention, for the refusal. */
  readonly holds?: string;
  readonly risk: RefusedEnvRisk;
}

type FamilyDeclaration = Pick<RefusedEnvFamily, 'readBy' | 'why'> & Partial<RefusedEnvFamily>;

export function family(declared: FamilyDeclaration): RefusedEnvFamily {
  return {
    names: [],
    prefixes: [],
    admittedEndings: [],
    suffixes: [],
    infixes: [],
    risk: 'code',
    ...declared,
  };
}

/** Credentials' and addresses' endings git reads under none of its GIT_ names (test/contract scans git's programs). */
const CREDENTIAL_ENDINGS = [
  '_TOKEN',
  '_PASSWORD',
  '_SECRET',
  '_USERNAME',
  '_CREDENTIALS',
  '_API_KEY',
  '_PRIVATE_KEY',
  '_SSH_KEY',
  '_DEPLOY_KEY',
  '_URL',
  '_URI',
];

/**
 * What a tool's configuration namespace (every name one of its settings) holds that is the app's own
 * credential or address, read as data: admitted under its prefix (`AIRFLOW__CORE__SQL_ALCHEMY_CONN`,
 * `CLOUDSDK_AUTH_ACCESS_TOKEN`).
 */
const SETTING_CREDENTIAL_ENDINGS = [...CREDENTIAL_ENDINGS, '_KEY', '_CONN', '_DSN'];

/**
 * A credential of the app's own under a client's prefix (`VAULT_TOKEN`, `CONSUL_HTTP_TOKEN`,
 * `SPRING_CLOUD_VAULT_TOKEN`): the writer chooses whom the app is, which is what a credential is for.
 * Never an address (`_URL`, `_URI`, `_HOST`, `_ADDR`): that is where the pod's own identity would go.
 */
const IDENTITY_CREDENTIAL_ENDINGS = [
  '_TOKEN',
  '_PASSWORD',
  '_PASS',
  '_PASSWD',
  '_PWD',
  '_SECRET',
  '_USERNAME',
  '_USER',
  '_KEY',
];

/** The readers’ own names, by who reads them (the conventions: refused-env-conventions.ts). */
export const READER_FAMILIES: readonly RefusedEnvFamily[] = [
  family({
    readBy:
      'official images’ entrypoints and start scripts (wordpress, php-apache, WildFly, Hadoop, Spark, Elasticsearch, ZooKeeper, Jetty, Cassandra, Flask)',
    why: 'code the script runs or sources, or a setting that opens the server to whoever reaches it: `WORDPRESS_CONFIG_EXTRA` (PHP that `wp-config-docker.php` evaluates), `APACHE_ENVVARS` and WildFly’s `RUN_CONF` (files sourced), every `HADOOP_` name (`hadoop-functions.sh` evaluates them: a quote breaks out), `SPARK_JAVA_OPT_*` (each a JVM option), Elasticsearch’s `ES_SETTING_*` (security switched off), ZooKeeper’s `JMXPORT` and its kin (remote JMX without authentication), Jetty’s `JETTY_*`, `CASSANDRA_CONF` and Spring Boot’s `CONF_FOLDER` (directories whose scripts run), Flask’s debugger (`FLASK_DEBUG`, `WERKZEUG_DEBUG_PIN`), postgres’s `POSTGRES_HOST_AUTH_METHOD` (`trust`: a superuser without a password, who runs commands with `COPY … FROM PROGRAM`)',
    names: [
      'WORDPRESS_CONFIG_EXTRA',
      'POSTGRES_HOST_AUTH_METHOD',
      'RUN_CONF',
      'JMXPORT',
      'JMXAUTH',
      'JMXSSL',
      'JMXLOG4J',
      'CASSANDRA_CONF',
      'CONF_FOLDER',
      'FLASK_DEBUG',
      'WERKZEUG_DEBUG_PIN',
    ],
    // Whatever the name ends with: these scripts take every name under the prefix.
    prefixes: ['HADOOP_', 'SPARK_JAVA_OPT_', 'ES_SETTING_', 'JETTY_'],
  }),
  family({
    readBy: 'Neo4j’s image entrypoint, which writes every NEO4J_ name into neo4j.conf',
    why: 'a setting of the server, `server.jvm.additional` (JVM arguments: `-javaagent:`) among them; `NEO4J_AUTH`, the initial password, stays a credential',
    prefixes: ['NEO4J_'],
    admittedEndings: ['_AUTH'],
  }),
  family({
    readBy: 'the dynamic loader (glibc’s ld.so, musl’s)',
    why: 'loads the libraries it names into every dynamically linked program, before `main` (`LD_PRELOAD`, `LD_AUDIT`), or chooses where they come from (`LD_LIBRARY_PATH`); glibc drops every `LD_` variable from a setuid program for that reason',
    prefixes: ['LD_'],
  }),
  family({
    readBy:
      'the C library (glibc’s list of unsecure variables, which it drops from a setuid program, and musl’s)',
    why: 'loads code or data from the path it names (`GCONV_PATH` loads conversion modules, `GETCONF_DIR` programs, `LOCPATH`, `MUSL_LOCPATH` and `NLSPATH` locales and message catalogues), retunes the allocator and loader (`GLIBC_TUNABLES`, `MALLOC_*`, jemalloc’s `MALLOC_CONF`), writes to a file (`MALLOC_TRACE`) or redirects name lookups and temporary files (`HOSTALIASES`, `LOCALDOMAIN`, `RES_OPTIONS`, `RESOLV_HOST_CONF`, `NIS_PATH`, `TMPDIR` and its older names `TMP` and `TEMP`, `TZDIR`), or, as a locale name that is a path (`LANG`, `LC_ALL`, any `LC_*`), loads locale data from that path as `LOCPATH` would',
    names: [
      'GCONV_PATH',
      'GETCONF_DIR',
      'GLIBC_TUNABLES',
      'HOSTALIASES',
      'LOCALDOMAIN',
      'LOCPATH',
      'MUSL_LOCPATH',
      'NIS_PATH',
      'NLSPATH',
      'RESOLV_HOST_CONF',
      'RES_OPTIONS',
      'TMPDIR',
      'TMP',
      'TEMP',
      'TZDIR',
      'LANG',
    ],
    prefixes: ['MALLOC_', 'LC_'],
  }),
  family({
    readBy: 'the process’s command lookup and the programs that run a command from the environment',
    why: 'chooses which program runs for a bare name (`PATH`: the wrapper and every shell look the command up on it), or names a command line a program runs (`SHELL`, `PAGER`, `MANPAGER`, `EDITOR`, `VISUAL`, `BROWSER`, which Python’s `webbrowser` runs, `LESSOPEN`, a pipe `less` runs on every file, `SUDO_ASKPASS`, `SSH_ASKPASS`), commands an editor or pager runs at start (`VIMINIT`, `EXINIT`, `LESS`), where ssh finds its agent (`SSH_AUTH_SOCK`), which commands bash skips (`EXECIGNORE`), or terminal descriptions curses programs load (`TERMINFO`, `TERMCAP`)',
    names: [
      'PATH',
      'SHELL',
      'PAGER',
      'MANPAGER',
      'EDITOR',
      'VISUAL',
      'BROWSER',
      'LESSOPEN',
      'LESSCLOSE',
      'LESSKEY',
      'SUDO_ASKPASS',
      'SSH_ASKPASS',
      'LESS',
      'EXINIT',
      'VIMINIT',
      'GVIMINIT',
      'EXECIGNORE',
      'SSH_AUTH_SOCK',
      'TERMINFO',
      'TERMCAP',
    ],
  }),
  family({
    readBy:
      'build tools and the libraries that compile at run time (make, CMake, node-gyp, cffi, PyTorch’s inductor, Triton)',
    why: 'the compiler, linker or tool a build runs (`CC`, `CXX`, `LD`, `AR`): a JIT that compiles kernels or extensions while the app runs runs whatever program the name gives',
    names: [
      'CC',
      'CXX',
      'CPP',
      'LD',
      'AR',
      'AS',
      'NM',
      'RANLIB',
      'STRIP',
      'OBJCOPY',
      'FC',
      'F77',
      'F90',
      'RUSTC',
      'RUSTDOC',
      'MAKE',
    ],
  }),
  family({
    readBy: 'shells (sh, dash, ash, BusyBox, bash, ksh, zsh)',
    why: 'a file every shell sources at start (`ENV`, `BASH_ENV`, zsh’s `ZDOTDIR`), options and prompts that run command substitutions (`SHELLOPTS=xtrace` with `PS4`, bash 4.4’s `PS0`), exported functions (`BASH_FUNC_*`), or how words are split and paths found (`IFS`, `CDPATH`, `FPATH`, `GLOBIGNORE`)',
    names: [
      'ENV',
      'BASHOPTS',
      'SHELLOPTS',
      'PS0',
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
  }),
  family({
    readBy:
      'every program that reads a start-up or configuration file from a home, an XDG directory or a file the variable names',
    why: 'moves where programs read their start-up files and configuration, which can run commands: git’s `core.sshCommand`, Python’s user site-packages with its `.pth` files, shells’ rc files, curl’s `.curlrc` (`CURL_HOME`), wget’s `use_askpass` (`WGETRC`), a kubeconfig’s `exec` credential plugin (`KUBECONFIG`), Docker’s credential helper (`DOCKER_CONFIG`), boto’s configuration (`BOTO_CONFIG`), gpg’s agent programs (`GNUPGHOME`)',
    names: ['HOME', 'CURL_HOME', 'WGETRC', 'KUBECONFIG', 'DOCKER_CONFIG', 'BOTO_CONFIG', 'GNUPGHOME'],
    prefixes: ['XDG_'],
  }),
  family({
    readBy: 'Node.js, Bun and Deno',
    why: 'options and modules Node loads before the app (`NODE_OPTIONS=--require …` or `--import data:…` runs code from the value itself; `BUN_OPTIONS`), where it finds modules, and whom its TLS trusts (`NODE_EXTRA_CA_CERTS`, `NODE_USE_SYSTEM_CA`, `NODE_TLS_REJECT_UNAUTHORIZED`, `DENO_CERT`), an IPC channel a parent process would own (`NODE_CHANNEL_FD`); ts-node’s settings (`TS_NODE_*`: the compiler it loads); Bun’s `bunfig` settings (`BUN_CONFIG_*`: the registry packages come from)',
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
      'NODE_USE_ENV_PROXY',
      'NODE_USE_SYSTEM_CA',
      'NODE_CHANNEL_FD',
      'NODE_CHANNEL_SERIALIZATION_MODE',
      'NODE_UNIQUE_ID',
      'BUN_OPTIONS',
      'DENO_CERT',
      'DENO_TLS_CA_STORE',
    ],
    prefixes: ['BUN_CONFIG_', 'TS_NODE_'],
  }),
  family({
    readBy: 'npm, Yarn, pnpm and Corepack, which `npm start` and `yarn start` run through',
    why: 'every name is one of their settings, in any case: `npm_config_node_options=--import=data:…` runs code under `npm start`, `NPM_CONFIG_SCRIPT_SHELL` chooses the shell scripts run in, `NPM_CONFIG_USERCONFIG` and the registry choose configuration and packages; `YARN_YARN_PATH` runs a file as Yarn itself; Corepack downloads and runs the package manager its settings name. A credential for these tools goes under a name of your own that their configuration file references (`${NPM_TOKEN}` in `.npmrc` or `.yarnrc.yml`)',
    prefixes: ['NPM_CONFIG_', 'YARN_', 'PNPM_', 'COREPACK_'],
  }),
  family({
    readBy: 'Python and its launchers: pip, uv, Poetry, Pipenv, uWSGI, Gunicorn',
    why: 'CPython reads only names starting with `PYTHON`: where modules come from (`PYTHONPATH`, `PYTHONHOME`, `PYTHONUSERBASE`), a file or module run at start (`PYTHONSTARTUP`, `PYTHONWARNINGS`, which imports the module a filter names, `PYTHONBREAKPOINT`), interpreter options; the launchers’ settings, each name one of their options (`PIP_INDEX_URL` chooses where packages come from, `UWSGI_*` is any uWSGI option, `--exec-*` among them; `GUNICORN_CMD_ARGS` is Gunicorn’s command line, `--config` a Python file; every `UVICORN_` name one of Uvicorn’s options, the app it imports among them); a module imported at start (`FLASK_APP`, Matplotlib’s `MPLBACKEND=module://…`, coverage’s `COVERAGE_PROCESS_START`, which starts it in every process)',
    names: ['GUNICORN_CMD_ARGS', 'FLASK_APP', 'MPLBACKEND', 'COVERAGE_PROCESS_START'],
    prefixes: ['PYTHON', 'PIP_', 'UV_', 'POETRY_', 'PIPENV_', 'UWSGI_', 'UVICORN_'],
  }),
  family({
    readBy: 'Perl',
    why: 'modules loaded at start (`PERL5OPT=-M…`), library paths (`PERL5LIB`, `PERLLIB`), the debugger it runs (`PERL5DB`) and I/O layers',
    names: ['PERLLIB'],
    prefixes: ['PERL5', 'PERL_', 'PERLIO'],
  }),
  family({
    readBy: 'Ruby, RubyGems and Bundler',
    why: 'options and libraries loaded at start (`RUBYOPT=-r…`, `RUBYLIB`), a Gemfile RubyGems loads at start (`RUBYGEMS_GEMDEPS`: Ruby code), RubyGems’ and irb’s rc files (`GEMRC`, `IRBRC`), where gems come from (`GEM_HOME`, `GEM_PATH`) and every Bundler setting (`BUNDLE_GEMFILE`, Ruby code; a mirror; a host’s credentials, which belong to the build that installs the gems)',
    names: ['RUBYOPT', 'RUBYLIB', 'RUBYSHELL', 'RUBYGEMS_GEMDEPS', 'GEMRC', 'IRBRC', 'RUBY_CRASH_REPORT'],
    prefixes: ['GEM_', 'BUNDLE_'],
  }),
  family({
    readBy:
      'the JVM and the scripts that start it (catalina.sh, kafka-run-class.sh, Elasticsearch, Maven, Gradle, sbt, Spring Boot)',
    why: 'options every JVM takes or a start script passes it (`-javaagent:` loads code before `main`, `-XX:OnOutOfMemoryError=cmd` runs a command): `JAVA_TOOL_OPTIONS`, `_JAVA_OPTIONS`, `JDK_JAVA_OPTIONS`, the launchers’ `JAVA_OPTS`, `JVM_OPTS`, `KAFKA_OPTS`, `ES_JAVA_OPTS`; every `CATALINA_` name (catalina.sh evaluates `CATALINA_OPTS` as shell code and sources `$CATALINA_BASE/bin/setenv.sh`), `LOGGING_CONFIG` and `LOGGING_MANAGER`, which it evaluates too; where classes and the JVM come from (`CLASSPATH`, `JAVA_HOME`, `JRE_HOME`, every `LOADER_` setting of Spring Boot’s launcher, `LOADER_MAIN` the class it runs, the agent’s `OTEL_JAVAAGENT_EXTENSIONS`); Log4j’s settings (`LOG4J_*`: the configuration factory class it loads); `SPRING_APPLICATION_JSON`, which sets any Spring property, `spring.config.import` and `logging.config` among them (credentials go under Spring’s own names, `SPRING_DATASOURCE_PASSWORD`); a debugger or JMX port that takes code from whoever reaches it (`KAFKA_DEBUG`, `JMX_PORT`, `JPDA_*`; Keycloak’s and WildFly’s `DEBUG` and `DEBUG_PORT`)',
    names: [
      'JAVA_TOOL_OPTIONS',
      '_JAVA_OPTIONS',
      'JDK_JAVA_OPTIONS',
      'JAVA_OPTS',
      'JAVA_OPTIONS',
      'JVM_OPTS',
      'JAVA_ARGS',
      'ES_JAVA_OPTS',
      'KAFKA_OPTS',
      'MAVEN_OPTS',
      'GRADLE_OPTS',
      'SBT_OPTS',
      'CLASSPATH',
      'JAVA_HOME',
      'JRE_HOME',
      'LOGGING_CONFIG',
      'LOGGING_MANAGER',
      'KAFKA_DEBUG',
      'DEBUG',
      'DEBUG_PORT',
      'JMX_PORT',
      'SPRING_APPLICATION_JSON',
    ],
    prefixes: ['CATALINA_', 'JPDA_', 'OTEL_JAVAAGENT_', 'LOADER_', 'LOG4J_'],
  }),
  family({
    readBy: '.NET (CoreCLR, the host, ASP.NET Core, .NET Framework’s profiler API)',
    why: 'assemblies and profilers loaded into the process (`DOTNET_STARTUP_HOOKS`, `ASPNETCORE_HOSTINGSTARTUPASSEMBLIES`, `CORECLR_PROFILER_PATH`, `COR_PROFILER_PATH`), and the runtime’s configuration knobs; Mono’s settings (`MONO_CONFIG`: a dllmap that chooses which libraries load)',
    names: ['ASPNETCORE_HOSTINGSTARTUPASSEMBLIES'],
    prefixes: ['DOTNET_', 'CORECLR_', 'COR_', 'COMPlus_', 'MONO_'],
  }),
  family({
    readBy: 'Go’s toolchain and runtime',
    why: 'the flags, toolchain, module proxy and paths `go run` and `go build` use (`GOFLAGS`, `GOTOOLCHAIN` downloads and runs another Go, `GOPROXY`, `GOPATH`, `GOCACHEPROG` runs a program, `CGO_*` flags for the C compiler), and runtime settings that turn security checks off (`GODEBUG`)',
    names: [
      'GODEBUG',
      'GOFLAGS',
      'GOTOOLCHAIN',
      'GOPATH',
      'GOROOT',
      'GOBIN',
      'GOENV',
      'GOPROXY',
      'GONOPROXY',
      'GOPRIVATE',
      'GONOSUMDB',
      'GONOSUMCHECK',
      'GOSUMDB',
      'GOINSECURE',
      'GOVCS',
      'GOAUTH',
      'GOEXPERIMENT',
      'GOCACHE',
      'GOCACHEPROG',
      'GOMODCACHE',
      'GOTMPDIR',
      'GOWORK',
      'GO111MODULE',
      'GOPACKAGESDRIVER',
    ],
    prefixes: ['CGO_'],
  }),
  family({
    readBy: 'PHP, Lua, Erlang, Elixir, RabbitMQ’s scripts, Tcl, R and Julia',
    why: 'configuration files that prepend code (`PHPRC`, `PHP_INI_SCAN_DIR`, Composer’s `COMPOSER`, whose scripts run), code run at start (`LUA_INIT`, R’s `R_PROFILE`, `R_PROFILE_USER` and `R_ENVIRON*`, Julia’s `JULIA_*`), the emulator’s arguments (`ERL_AFLAGS`, `ELIXIR_ERL_OPTIONS`, `RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS`: `-eval` runs code), and library paths (`LUA_PATH`, `ERL_LIBS`, `TCLLIBPATH`, `TCL_LIBRARY`, `R_LIBS*`, `JULIA_LOAD_PATH`)',
    names: [
      'COMPOSER',
      'PHPRC',
      'PHP_INI_SCAN_DIR',
      'TCLLIBPATH',
      'TCL_LIBRARY',
      'ELIXIR_ERL_OPTIONS',
      'RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS',
      'R_HOME',
      'R_PROFILE',
      'R_PROFILE_USER',
      'R_ENVIRON',
      'R_ENVIRON_USER',
      'R_LIBS',
      'R_LIBS_USER',
      'R_LIBS_SITE',
    ],
    prefixes: ['LUA_', 'ERL_', 'JULIA_'],
  }),
  family({
    readBy:
      'libraries apps link: OpenSSL, Kerberos, Cyrus SASL, ImageMagick, Oracle’s client, the graphics loaders',
    why: 'the configuration that loads OpenSSL’s engines and providers (`OPENSSL_CONF`, `OPENSSL_MODULES`), Kerberos’s configuration and its plugin modules (`KRB5_CONFIG`, `KRB5CCNAME`), SASL’s plugins (`SASL_PATH`), ImageMagick’s coders and `delegates.xml`, which runs commands (`MAGICK_CODER_MODULE_PATH`, `MAGICK_CONFIGURE_PATH`), Oracle’s client configuration (`TNS_ADMIN`), the Vulkan, EGL and GLX loaders’ drivers and layers, which they load (`VK_*`, `__EGL_VENDOR_LIBRARY_FILENAMES`, `__GLX_VENDOR_LIBRARY_NAME`)',
    names: ['SASL_PATH', 'SASL_CONF_PATH', 'TNS_ADMIN'],
    prefixes: ['OPENSSL_', 'KRB5', 'MAGICK_', 'VK_', '__EGL_', '__GLX_'],
  }),
  family({
    readBy: 'git (and ssh, which it runs)',
    why: 'every name git reads: commands it runs (`GIT_SSH_COMMAND`, `GIT_ASKPASS`, `GIT_PROXY_COMMAND`, `GIT_EXTERNAL_DIFF`, `GIT_CONFIG_*`, which can set `core.fsmonitor`, `GIT_ALLOW_PROTOCOL=ext`), the repository and objects it reads (`GIT_DIR`, `GIT_COMMON_DIR`, `GIT_OBJECT_DIRECTORY`, `GIT_ALTERNATE_OBJECT_DIRECTORIES`), and whom it trusts (`GIT_SSL_NO_VERIFY`, `GIT_SSL_CAINFO`, `GIT_SSL_CAPATH`). A credential or an address of the app’s own stays admitted when its name ends in `_TOKEN`, `_PASSWORD`, `_SECRET`, `_USERNAME`, `_CREDENTIALS`, `_API_KEY`, `_PRIVATE_KEY`, `_SSH_KEY`, `_DEPLOY_KEY`, `_URL` or `_URI` (`GIT_TOKEN`, `GIT_REPO_URL`): git reads no such name',
    prefixes: ['GIT_'],
    admittedEndings: CREDENTIAL_ENDINGS,
  }),
  family({
    readBy: 'tools whose every variable under a prefix is one of their settings: Airflow, gcloud, Ansible',
    why: 'Airflow’s `AIRFLOW__SECTION__KEY` sets any option, classes it imports among them (`AIRFLOW__SECRETS__BACKEND`), and `AIRFLOW_CONFIG` names a configuration whose `*_cmd` options run; gcloud’s `CLOUDSDK_*` sets any property (the Python it runs, a proxy, `auth/disable_ssl_validation`); Ansible’s `ANSIBLE_*` any setting (`ANSIBLE_CONFIG`, plugins, callbacks). The app’s credential or address under these prefixes stays admitted when its name ends as one does (`_PASSWORD`, `_TOKEN`, `_SECRET`, `_URL`, `_KEY`, `_CONN`, `_DSN`: `AIRFLOW__DATABASE__SQL_ALCHEMY_CONN`, `AIRFLOW__CORE__FERNET_KEY`); configurations that other tools read from a path are listed by name (`ALEMBIC_CONFIG`, `RELEASE_SYS_CONFIG`)',
    names: ['AIRFLOW_CONFIG', 'ALEMBIC_CONFIG', 'RELEASE_SYS_CONFIG'],
    prefixes: ['AIRFLOW__', 'CLOUDSDK_', 'ANSIBLE_'],
    admittedEndings: SETTING_CREDENTIAL_ENDINGS,
  }),
  family({
    readBy:
      'other programs and libraries, each by a name of its own: kubectl, GStreamer, D-Bus, mailcap, Gunicorn’s images, Elasticsearch, Neo4j, unixODBC, OpenCL, Jenkins, Spring, django-configurations, Serilog, PyTorch, Hugging Face datasets',
    why: 'a command a program runs (`KUBECTL_EXTERNAL_DIFF`, GStreamer’s `GST_*` plugin scanner, a D-Bus `unixexec:` address, `MAILCAPS`), a file or directory of configuration that loads code (`GUNICORN_CONF`, a Python file, `ES_PATH_CONF`’s `jvm.options`, `NEO4J_CONF`, unixODBC’s `ODBCINI` drivers, `OCL_ICD_VENDORS`, Jenkins’s `CASC_JENKINS_CONFIG`), or the code a framework loads or unpickles (`SPRING_MAIN_SOURCES`, `DJANGO_CONFIGURATION`, Serilog’s `Serilog__Using__*` assemblies, `TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`, `HF_DATASETS_TRUST_REMOTE_CODE`)',
    names: [
      'KUBECTL_EXTERNAL_DIFF',
      'DBUS_SESSION_BUS_ADDRESS',
      'DBUS_SYSTEM_BUS_ADDRESS',
      'MAILCAPS',
      'GUNICORN_CONF',
      'ES_PATH_CONF',
      'ODBCINI',
      'ODBCSYSINI',
      'ODBCINSTINI',
      'OCL_ICD_VENDORS',
      'CASC_JENKINS_CONFIG',
      'SPRING_MAIN_SOURCES',
      'DJANGO_CONFIGURATION',
      'TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD',
      'HF_DATASETS_TRUST_REMOTE_CODE',
    ],
    prefixes: ['GST_'],
    infixes: ['__USING__'],
    holds: 'the assemblies a .NET configuration section loads',
  }),
  family({
    readBy:
      'TLS and identity clients, each by a name of its own: OpenLDAP, libpq, gRPC’s xDS, SPIFFE, Elastic APM',
    why: 'whom a client trusts or how it checks (OpenLDAP’s `LDAPCONF`, libpq’s `PGCHANNELBINDING`, Elastic APM’s `ELASTIC_APM_SERVER_CERT`, a `CHECK_HOSTNAME` switch), or where it gets its identity and trust bundle (gRPC’s `GRPC_XDS_BOOTSTRAP`, the SPIFFE Workload API’s `SPIFFE_ENDPOINT_SOCKET`)',
    names: [
      'LDAPCONF',
      'PGCHANNELBINDING',
      'ELASTIC_APM_SERVER_CERT',
      'CHECK_HOSTNAME',
      'GRPC_XDS_BOOTSTRAP',
      'GRPC_XDS_BOOTSTRAP_CONFIG',
      'SPIFFE_ENDPOINT_SOCKET',
    ],
    risk: 'trust',
  }),
  family({
    readBy: 'TLS libraries (OpenSSL, curl, gRPC, Python’s requests and ssl, the AWS SDKs)',
    why: 'whom the app’s TLS trusts (`SSL_CERT_FILE`, `SSL_CERT_DIR`, `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`, `AWS_CA_BUNDLE`, `GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`, OpenTelemetry’s `OTEL_EXPORTER_OTLP_CERTIFICATE`, libpq’s `PGSSLMODE` and `PGSSLROOTCERT`), or a file that gets every TLS session’s keys (`SSLKEYLOGFILE`): whoever writes the secret could then read the app’s traffic',
    names: [
      'SSL_CERT_FILE',
      'SSL_CERT_DIR',
      'REQUESTS_CA_BUNDLE',
      'CURL_CA_BUNDLE',
      'AWS_CA_BUNDLE',
      'GRPC_DEFAULT_SSL_ROOTS_FILE_PATH',
      'SSLKEYLOGFILE',
      'OTEL_EXPORTER_OTLP_CERTIFICATE',
      'OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE',
      'OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE',
      'OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE',
    ],
    prefixes: ['PGSSL'],
    risk: 'trust',
  }),
  family({
    readBy:
      'HTTP clients and the cloud and Kubernetes SDKs: curl, Go, Python’s requests, gRPC, Node with NODE_USE_ENV_PROXY, the AWS, Google and Azure SDKs, client-go',
    why: 'where the app’s clients send their requests and the identity the platform gives every pod: a proxy (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `GRPC_PROXY`, any case), an SDK’s endpoint or metadata server (`AWS_ENDPOINT_URL`, `AWS_ENDPOINT_URL_STS`, `AWS_EC2_METADATA_SERVICE_ENDPOINT`, `GCE_METADATA_HOST`, `AZURE_AUTHORITY_HOST`, `IDENTITY_ENDPOINT`), where it gets its credentials (`AWS_CONTAINER_CREDENTIALS_FULL_URI`, `GOOGLE_APPLICATION_CREDENTIALS`, whose external-account file names a token URL), or the Kubernetes API and the clients that send the service-account token (`KUBERNETES_SERVICE_HOST`, fabric8’s `KUBERNETES_MASTER`, Spring Cloud’s `SPRING_CLOUD_VAULT_URI`, Consul’s and Nomad’s addresses, botocore’s `AWS_CSM_HOST`, which gets every call’s session token). A credential of the app’s own under these prefixes stays admitted when its name ends as one does (`_TOKEN`, `_PASSWORD`, `_PASS`, `_PASSWD`, `_PWD`, `_SECRET`, `_USERNAME`, `_USER`, `_KEY`). An eighth review’s writer received the pod’s web-identity token, its Pod Identity token and its service-account token; a ninth’s, through `AWS_CSM_*`, its session token',
    names: [
      'AWS_EC2_METADATA_SERVICE_ENDPOINT',
      'AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE',
      'AWS_WEB_IDENTITY_TOKEN_FILE',
      'AWS_ROLE_ARN',
      'AWS_STS_REGIONAL_ENDPOINTS',
      'GOOGLE_APPLICATION_CREDENTIALS',
      'GOOGLE_CLOUD_UNIVERSE_DOMAIN',
      'AZURE_AUTHORITY_HOST',
      'AZURE_FEDERATED_TOKEN_FILE',
      'AZURE_POD_IDENTITY_AUTHORITY_HOST',
      'IDENTITY_ENDPOINT',
      'IDENTITY_HEADER',
      'MSI_ENDPOINT',
      'MSI_SECRET',
      'IMDS_ENDPOINT',
      'HF_ENDPOINT',
      'HF_HUB_ENDPOINT',
    ],
    // The clients whose every setting is theirs (fabric8 reads KUBERNETES_MASTER, Spring Cloud any
    // spring.cloud.* property, botocore's client-side monitoring AWS_CSM_*): a ninth review.
    prefixes: [
      'AWS_ENDPOINT_URL',
      'AWS_CONTAINER_',
      'AWS_CSM_',
      'GCE_METADATA',
      'KUBERNETES_',
      'VAULT_',
      // OpenBao's own names for Vault's, and other secret managers' clients (a tenth review).
      'BAO_',
      'CONJUR_',
      'INFISICAL_',
      'CONSUL_',
      'NOMAD_',
      'SPRING_CLOUD_',
    ],
    admittedEndings: IDENTITY_CREDENTIAL_ENDINGS,
    suffixes: ['_PROXY', '_EMULATOR_HOST'],
    holds: 'a proxy the app’s HTTP clients send their requests through, or an emulator a cloud SDK sends to',
    risk: 'identity',
  }),
];
