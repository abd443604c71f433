/**
 * agent/contract/refused-env-names.ts: the one declared list of rules for variables no secret may set.
 * Its entries are names a variable can have or parts of one, none is listed twice or hidden behind a
 * broader rule of its kind (a table row that never decides anything would mislead a reader), and the
 * rules match names, not substrings: exact names exactly, prefixes at the start, infixes anywhere,
 * suffixes at the end, in any case. Both sides are properties: a name built around any rule is
 * refused naming a rule it matches; a secret's own names are admitted. And two readers are asked
 * directly: every variable glibc's loader treats as unsecure, and every GIT_ name git's programs
 * contain, is refused.
 */
import fc from 'fast-check';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ENV_NAME } from '../../agent/contract/env-exec.ts';
import {
  REFUSED_ENV_FAMILIES,
  refusedEnvName,
  type RefusedEnvFamily,
} from '../../agent/contract/refused-env-names.ts';
import { SECRET_ENDINGS } from '../../agent/contract/refused-env-conventions.ts';
import { SECRETS_DIR_ENV } from '../../webhook/render/pod-patch.ts';

const all = (kind: 'names' | 'prefixes' | 'infixes' | 'suffixes') =>
  REFUSED_ENV_FAMILIES.flatMap((f) => f[kind].map((e) => e.toUpperCase()));
const names = all('names');
const prefixes = all('prefixes');
const infixes = all('infixes');
const suffixes = all('suffixes');

/** Whether the rule `rule`, as refusedEnvName reports it (`PATH`, `LD_*`, `*OPTS`, `*STARTUP*`), matches `name`. */
function ruleMatches(rule: string, name: string): boolean {
  const key = name.toUpperCase();
  // A reader's name or prefix is found under leading underscores too (`_RUNJAVA`).
  if (!rule.startsWith('*') && !key.startsWith(rule.replace(/\*$/, '').slice(0, 1)))
    return ruleMatches(rule, key.replace(/^_+/, ''));
  const starred = /^(\*?)([A-Za-z0-9_]+)(\*?)$/.exec(rule)!;
  const [, before, text, after] = starred;
  if (before && after) return key.includes(text!);
  if (before) return key.endsWith(text!);
  if (after) return key.startsWith(text!);
  return key === text;
}

/** Every case of `text`, chosen by `flips`. */
const recase = (text: string, flips: readonly boolean[]) =>
  [...text].map((ch, i) => (flips[i % flips.length] ? ch.toLowerCase() : ch.toUpperCase())).join('');

describe('the refused env names: the declaration', () => {
  it('each entry is a variable name or a part of one, listed once, none shadowed by a broader rule of its kind', () => {
    for (const entry of [...names, ...prefixes]) assert.match(entry, ENV_NAME, entry);
    for (const entry of [...infixes, ...suffixes]) assert.match(entry, /^[A-Z0-9_]+$/, entry);
    for (const list of [names, prefixes, infixes, suffixes])
      assert.equal(new Set(list).size, list.length, `no entry twice: ${list.join(' ')}`);
    for (const name of names)
      assert.ok(!prefixes.some((p) => name.startsWith(p)), `${name} is under a prefix`);
    for (const p of prefixes)
      assert.ok(!prefixes.some((q) => q !== p && p.startsWith(q)), `${p} is under another prefix`);
    for (const s of suffixes) {
      assert.ok(!suffixes.some((t) => t !== s && s.endsWith(t)), `${s} is under another suffix`);
      assert.ok(!infixes.some((i) => s.includes(i)), `${s} is under an infix`);
    }
    for (const i of infixes)
      assert.ok(!infixes.some((j) => j !== i && i.includes(j)), `${i} is under another infix`);
    for (const f of REFUSED_ENV_FAMILIES) {
      assert.ok(f.readBy && f.why, f.readBy);
      assert.ok(f.names.length + f.prefixes.length + f.suffixes.length + f.infixes.length > 0, f.readBy);
      // A convention says what such a name holds; a reader's names need no such word.
      assert.equal(Boolean(f.holds), f.suffixes.length + f.infixes.length > 0, f.readBy);
      // An ending lets names through a prefix only: elsewhere it would decide nothing.
      if (f.admittedEndings.length) assert.ok(f.prefixes.length > 0, f.readBy);
    }
  });

  it('each kind matches as declared, in any case: a name itself only, a prefix at the start, an infix anywhere, a suffix at the end', () => {
    const rule = (name: string) => refusedEnvName(name)?.rule;
    assert.equal(rule('PATH'), 'PATH');
    assert.equal(rule('path'), 'PATH');
    assert.equal(rule('PATHS'), undefined);
    assert.equal(rule('MY_PATH'), '*PATH');
    assert.equal(rule('LD_PRELOAD'), 'LD_*');
    assert.equal(rule('Ld_Anything_New'), 'LD_*');
    assert.equal(rule('LDAP_URI'), undefined);
    assert.equal(rule('X_LD_PRELOAD'), '*PRELOAD');
    assert.equal(rule('COMPlus_EnableDiagnostics'), 'COMPLUS_*');
    assert.equal(rule('DOTNET_STARTUP_HOOKS'), 'DOTNET_*');
    assert.equal(rule('ACME_STARTUP_TASKS'), '*STARTUP*');
    assert.equal(rule('CATALINA_OPTS'), 'CATALINA_*');
    assert.equal(rule('ACME_LAUNCHER_OPTS'), '*OPTS');
    assert.equal(rule('acme_launcher_opts'), '*OPTS');
    assert.equal(rule('OPTS_TOKEN'), undefined);
    assert.equal(refusedEnvName('PYTHONPATH')?.family.readBy.startsWith('Python'), true);
  });

  it('a name under GIT_ is refused unless it ends as a credential does; a credential’s ending admits nothing under another prefix', () => {
    assert.equal(refusedEnvName('GIT_DIR')?.rule, 'GIT_*');
    assert.equal(refusedEnvName('GIT_SSL_KEY')?.rule, 'GIT_*');
    assert.equal(refusedEnvName('GIT_PROTOCOL_FROM_USER')?.rule, 'GIT_*');
    for (const name of ['GIT_TOKEN', 'GIT_PASSWORD', 'git_access_token', 'GIT_SSH_KEY', 'GIT_REPO_URL'])
      assert.equal(refusedEnvName(name), undefined, name);
    // The ending lets a name through GIT_ only, never past a convention or another reader's prefix.
    assert.equal(refusedEnvName('NPM_CONFIG_AUTH_TOKEN')?.rule, 'NPM_CONFIG_*');
    assert.equal(refusedEnvName('LD_TOKEN')?.rule, 'LD_*');
    const git = REFUSED_ENV_FAMILIES.find((f) => f.prefixes.includes('GIT_'))!;
    for (const ending of git.admittedEndings) assert.match(git.why, new RegExp(`\`${ending}\``));
  });

  it('the message names the rule that matched and what it means', () => {
    const reason = (name: string) => refusedEnvName(name)!.reason;
    assert.equal(
      reason('ACME_LAUNCHER_OPTS'),
      'ends with OPTS, which by convention holds a program’s options or arguments',
    );
    assert.match(reason('LD_PRELOAD'), /^starts with LD_, which marks the names read by the dynamic loader/);
    assert.match(reason('PATH'), /^is read by the process’s command lookup/);
    assert.match(reason('ACME_STARTUP_TASKS'), /^contains STARTUP, which by convention marks code/);
    assert.match(
      reason('GIT_DIR'),
      /a credential’s name ending in _TOKEN, _PASSWORD, _SECRET… stays admitted/,
    );
    assert.match(refusedEnvName('ACME_SKIP_VERIFY')!.consequence, /whom the container’s TLS trusts/);
    assert.match(refusedEnvName('ACME_OPTS')!.consequence, /what code the container runs/);
    // The webhook's own SECRETS_DIR, which no secret may set either.
    assert.equal(refusedEnvName(SECRETS_DIR_ENV)?.rule, '*DIR');
  });
});

describe('the refused env names: both sides', () => {
  type Entry = { kind: 'name' | 'prefix' | 'infix' | 'suffix'; text: string; family: RefusedEnvFamily };
  const entries: Entry[] = REFUSED_ENV_FAMILIES.flatMap((family) => [
    ...family.names.map((text) => ({ kind: 'name' as const, text, family })),
    ...family.prefixes.map((text) => ({ kind: 'prefix' as const, text, family })),
    ...family.infixes.map((text) => ({ kind: 'infix' as const, text, family })),
    ...family.suffixes.map((text) => ({ kind: 'suffix' as const, text, family })),
  ]);

  it('property: a name built around any rule, in any case and with anything around it, is refused naming a rule it matches', () => {
    const word = fc.stringMatching(/^[A-Za-z][A-Za-z0-9_]{0,12}$/);
    const tail = fc.stringMatching(/^[A-Za-z0-9_]{0,12}$/);
    fc.assert(
      fc.property(
        fc.constantFrom(...entries),
        word,
        tail,
        fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }),
        (entry, head, rest, flips) => {
          const text = recase(entry.text, flips);
          const name =
            entry.kind === 'name'
              ? text
              : entry.kind === 'prefix'
                ? text + rest
                : entry.kind === 'infix'
                  ? head + text + rest
                  : head + text;
          // A credential's ending lets a name through its family's prefix, by design (tested above).
          fc.pre(
            entry.kind !== 'prefix' ||
              !entry.family.admittedEndings.some((e) => name.toUpperCase().endsWith(e)),
          );
          const refused = refusedEnvName(name);
          assert.ok(refused, `${name} is refused`);
          assert.ok(ruleMatches(refused.rule, name), `${name}: ${refused.rule} matches it`);
          // An exact name is the quoted name itself; any other rule is named in the reason.
          if (refused.rule.includes('*'))
            assert.ok(
              refused.reason.includes(refused.rule.replaceAll('*', '')),
              `${name}: the reason names it`,
            );
          else assert.equal(refused.rule, name.toUpperCase());
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('property: a convention’s word with anything after it, as a word of the name, is refused, unless the name ends as a secret’s own does', () => {
    const word = fc.stringMatching(/^[A-Za-z][A-Za-z0-9]{0,8}$/);
    const after = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_]{0,10}$/);
    const conventions = REFUSED_ENV_FAMILIES.flatMap((f) => f.suffixes);
    fc.assert(
      fc.property(
        fc.constantFrom(...conventions),
        word,
        after,
        fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }),
        (suffix, head, rest, flips) => {
          const name = recase(`${head}_${suffix.replace(/^_/, '')}_${rest}`, flips);
          fc.pre(!SECRET_ENDINGS.some((e) => name.toUpperCase().endsWith(e)));
          const refused = refusedEnvName(name);
          assert.ok(refused, `${name} is refused`);
          assert.ok(ruleMatches(refused.rule, name), `${name}: ${refused.rule} matches it`);
        },
      ),
      { numRuns: 2000 },
    );
  });

  /** The words apps name their secrets with: services, then what the value is. */
  const SERVICES = [
    'DATABASE',
    'DB',
    'POSTGRES',
    'MYSQL',
    'MONGO',
    'REDIS',
    'RABBITMQ',
    'KAFKA',
    'ELASTIC',
    'STRIPE',
    'TWILIO',
    'SENDGRID',
    'SLACK',
    'GITHUB',
    'GITLAB',
    'NODE',
    'OPENAI',
    'ANTHROPIC',
    'AWS',
    'AZURE',
    'GCP',
    'GOOGLE',
    'SENTRY',
    'DATADOG',
    'DD',
    'APP',
    'API',
    'SMTP',
    'LDAP',
    'OAUTH',
    'JWT',
    'SESSION',
    'COOKIE',
    'ENCRYPTION',
    'SIGNING',
    'WEBHOOK',
    'ADMIN',
    'SPRING_DATASOURCE',
    'MINIO_ROOT',
    // Not VAULT or CONSUL: their clients read every VAULT_ and CONSUL_ name, and only a credential's
    // stays admitted (the eighth and ninth reviews' test).
    'NEXTAUTH',
    'AUTH0',
  ];
  const ENDINGS = [
    '_URL',
    '_URI',
    '_DSN',
    '_PASSWORD',
    '_PASS',
    '_PASSWD',
    '_PWD',
    '_TOKEN',
    '_ACCESS_TOKEN',
    '_API_KEY',
    '_KEY',
    '_SECRET',
    '_CLIENT_SECRET',
    '_SECRET_KEY',
    '_USERNAME',
    '_USER',
    '_CONFIG',
    '_CONF',
    '_JSON',
    '_CONNECTION_STRING',
    '_CREDENTIALS',
    '_PRIVATE_KEY',
    '_CERT',
    '_PEM',
    '_ID',
    '_ACCESS_KEY_ID',
    '_ENDPOINT',
    '_HOST',
    '_HEADERS',
    '_AUTH',
    '_SASL_JAAS_CONFIG',
    '_WEBHOOK_URL',
    '_WEBHOOK',
    '_LICENSE_KEY',
    '_SIGNING_SECRET',
    '_SALT',
  ];

  it('property: a secret’s own names (a service’s words, then _URL, _PASSWORD, _TOKEN, _KEY, _SECRET, _CONFIG…) are admitted', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...SERVICES),
        fc.array(fc.constantFrom(...SERVICES), { maxLength: 2 }),
        fc.constantFrom(...ENDINGS),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }),
        (first, middle, ending, flips) => {
          const name = recase([first, ...middle].join('_') + ending, flips);
          assert.equal(refusedEnvName(name)?.rule, undefined, name);
        },
      ),
      { numRuns: 2000 },
    );
    // And the names real images and SDKs document for secrets, as they spell them.
    for (const name of [
      'DATABASE_URL',
      'API_KEY',
      'KAFKA_SASL_JAAS_CONFIG',
      'CONNECT_SASL_JAAS_CONFIG',
      'AWS_ACCESS_KEY_ID',
      'AWS_SECRET_ACCESS_KEY',
      'AWS_SESSION_TOKEN',
      'SECRET_KEY_BASE',
      'RAILS_MASTER_KEY',
      'OPENAI_API_BASE',
      'OTEL_EXPORTER_OTLP_HEADERS',
      'ConnectionStrings__Default',
      'ASPNETCORE_Kestrel__Certificates__Default__Password',
      'RABBITMQ_DEFAULT_PASS',
      'RABBITMQ_ERLANG_COOKIE',
      'RELEASE_COOKIE',
      'PGPASSWORD',
      'MYSQL_PWD',
      'MONGO_INITDB_ROOT_PASSWORD',
      'GF_SECURITY_ADMIN_PASSWORD',
      'NODE_AUTH_TOKEN',
      'NPM_TOKEN',
      'GH_TOKEN',
      'GOTRUE_JWT_SECRET',
      'TF_VAR_db_password',
      'ORG_GRADLE_PROJECT_signingKey',
      'NODE_ENV',
      'TZ',
    ])
      assert.equal(refusedEnvName(name)?.rule, undefined, name);
  });
});

describe('the refused env names: the second review’s names (issue 37)', () => {
  it('every name it found steering code or trust is refused, naming a rule it matches; those that only redirect traffic or format stay admitted', () => {
    // Each one a reader runs code from, loads code or a library from, or trusts TLS by; in any case.
    const steering = [
      'FLASK_APP',
      'UVICORN_APP',
      'UVICORN_LOG_CONFIG',
      'MPLBACKEND',
      'LOADER_MAIN',
      'SPRING_APPLICATION_JSON',
      'SPRING_CONFIG_IMPORT',
      'SPRING_DATASOURCE_DRIVER_CLASS_NAME',
      'CLOUDSDK_PYTHON',
      'CLOUDSDK_AUTH_DISABLE_SSL_VALIDATION',
      'CLOUDSDK_PROXY_ADDRESS',
      'CLOUDSDK_CONFIG',
      'CC',
      'CXX',
      'LD',
      'OCL_ICD_FILENAMES',
      'VK_ICD_FILENAMES',
      'VK_INSTANCE_LAYERS',
      '__EGL_VENDOR_LIBRARY_FILENAMES',
      '__GLX_VENDOR_LIBRARY_NAME',
      'EXINIT',
      'VIMINIT',
      'LESS',
      'LESSEDIT',
      'FCEDIT',
      'GOPACKAGESDRIVER',
      'TS_NODE_COMPILER',
      'TS_NODE_PROJECT',
      'LOG4J_CONFIGURATION_FACTORY',
      'AIRFLOW__SECRETS__BACKEND',
      'AIRFLOW__CORE__EXECUTOR',
      'AIRFLOW_CONFIG',
      'ALEMBIC_CONFIG',
      'MONO_CONFIG',
      'ANSIBLE_CONFIG',
      'RELEASE_SYS_CONFIG',
      'COMPOSER',
      'COVERAGE_PROCESS_START',
      'PGSSLMODE',
      'PGSSLROOTCERT',
      'OTEL_EXPORTER_OTLP_CERTIFICATE',
      'OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE',
      'ELASTIC_APM_VERIFY_SERVER_CERT',
      'NODE_USE_SYSTEM_CA',
      'NODE_USE_ENV_PROXY',
      'NODE_CHANNEL_FD',
      'NODE_UNIQUE_ID',
      'TERMINFO',
      'TERMCAP',
      'TNS_ADMIN',
      'EXECIGNORE',
      'SSH_AUTH_SOCK',
    ];
    for (const name of steering)
      for (const spelt of [name, name.toLowerCase()]) {
        const refused = refusedEnvName(spelt);
        assert.ok(refused, `${spelt} is refused`);
        assert.ok(ruleMatches(refused.rule, spelt), `${spelt}: ${refused.rule} matches it`);
      }
    // A fourth review's, by class and by name.
    steering.push(
      ...['RSYNC_RSH', 'CVS_RSH', 'SVN_SSH', 'RSYNC_CONNECT_PROG', 'KUBECTL_EXTERNAL_DIFF', 'PYSPARK_PYTHON'],
      ...['IMAGEIO_FFMPEG_EXE', 'GST_PLUGIN_SCANNER', 'CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER'],
      ...['CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER', 'CARGO_REGISTRY_CREDENTIAL_PROVIDER'],
      ...[
        'DBUS_SESSION_BUS_ADDRESS',
        'MAILCAPS',
        'GUNICORN_CONF',
        'SOLR_INCLUDE',
        'ES_PATH_CONF',
        'NEO4J_CONF',
      ],
      ...['ODBCINI', 'ODBCSYSINI', 'ODBCINSTINI', 'OCL_ICD_VENDORS', 'CASC_JENKINS_CONFIG'],
      ...['KAFKA_METRIC_REPORTERS', 'KAFKA_INTERCEPTOR_CLASSES', 'CONNECT_REST_EXTENSION_CLASSES'],
      ...['CONNECT_KEY_CONVERTER', 'SPRING_MAIN_SOURCES', 'DJANGO_CONFIGURATION', 'OTEL_PYTHON_CONFIGURATOR'],
      ...['Serilog__Using__0', 'TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', 'HF_DATASETS_TRUST_REMOTE_CODE'],
      ...['DENO_UNSAFELY_IGNORE_CERTIFICATE_ERRORS', 'LDAPTLS_REQCERT', 'LDAPCONF', 'PGCHANNELBINDING'],
      ...['KAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM', 'KAFKA_SSL_TRUSTSTORE_CERTIFICATES'],
      ...['ELASTIC_APM_SERVER_CERT', 'GRPC_XDS_BOOTSTRAP', 'SPIFFE_ENDPOINT_SOCKET', 'SSL_VERIFY_PEER'],
      ...['DISABLE_SSL_VERIFICATION', 'TLS_ALLOW_INVALID_CERTIFICATES', 'SSL_CERT_REQS', 'CHECK_HOSTNAME'],
      ...['TLS_CA', 'SSL_CA', 'ROOT_CA', 'TRUSTSTORE'],
    );
    for (const name of steering.slice(-52))
      for (const spelt of [name, name.toLowerCase()]) {
        const refused = refusedEnvName(spelt);
        assert.ok(refused, `${spelt} is refused`);
        assert.ok(ruleMatches(refused.rule, spelt), `${spelt}: ${refused.rule} matches it`);
      }
    // A tool's namespace admits the app's own credentials and addresses under it, read as data.
    for (const name of [
      'AIRFLOW__DATABASE__SQL_ALCHEMY_CONN',
      'AIRFLOW__CORE__FERNET_KEY',
      'AIRFLOW__WEBSERVER__SECRET_KEY',
      'CLOUDSDK_AUTH_ACCESS_TOKEN',
      'ANSIBLE_BECOME_PASSWORD',
      'SPRING_DATASOURCE_PASSWORD',
      'SPRING_DATASOURCE_URL',
      'OTEL_EXPORTER_OTLP_HEADERS',
      // Where the app connects, or how it formats: what a secret is for (docs/env.md). Proxies were
      // here until the eighth review: they see the plain-HTTP requests that carry the pod's identity.
      'DOCKER_HOST',
      'TZ',
      'LANGUAGE',
    ])
      assert.equal(refusedEnvName(name)?.rule, undefined, name);
  });
});

describe('the refused env names: the fifth and sixth reviews’ names (issue 37)', () => {
  it('a qualifier after a convention’s word, a launcher’s program named alone, a reader’s name under leading underscores: refused, naming a rule it matches', () => {
    // Each one ran the secret's value as code, or is the kin of one that did, in a real start script.
    const steering = [
      // Tomcat's setclasspath.sh keeps a preset _RUNJAVA, which catalina.sh evaluates; kc.sh evaluates JAVA.
      ...['_RUNJAVA', 'RUNJAVA', '_RUNJDB', 'JAVA', 'GCCGO', 'PKG_CONFIG', 'NODE', 'PYTHON', 'BASH'],
      // Keycloak's and UBI OpenJDK's JAVA_OPTS_APPEND; any qualifier after the word.
      ...['JAVA_OPTS_APPEND', 'JAVA_OPTS_EXTRA', 'JVM_ARGS_APPEND', 'GUNICORN_CMD_ARGS_X', '_JAVA_OPTIONS_X'],
      ...['PHP_INI_SCAN_DIR_APPEND', 'NODE_PATH_EXTRA', 'SSL_CERT_FILE_OVERRIDE'],
      // A debugger port (kc.sh), a module sysconfig imports, a crash-report pipe, a loader class.
      ...['DEBUG', 'DEBUG_PORT', '_PYTHON_SYSCONFIGDATA_NAME', 'RUBY_CRASH_REPORT', 'CELERY_LOADER'],
      // A locale name that is a path loads locale data from it; TMPDIR's older names.
      ...['LC_ALL', 'LANG', 'LC_CTYPE', 'LC_MESSAGES', 'TMP', 'TEMP'],
      // A sixth review: official images' entrypoints and start scripts that evaluate or source them.
      ...['WORDPRESS_CONFIG_EXTRA', 'APACHE_ENVVARS', 'RUN_CONF', 'HADOOP_IDENT_STRING', 'HADOOP_LOGLEVEL'],
      ...[
        'SPARK_JAVA_OPT_KEY',
        'SPARK_JAVA_OPT_PASSWORD',
        'NEO4J_server_jvm_additional',
        'JMXPORT',
        'JMXLOG4J',
      ],
      ...['CASSANDRA_CONF', 'JETTY_BASE', 'CONF_FOLDER', 'FLASK_DEBUG', 'WERKZEUG_DEBUG_PIN'],
      ...['ES_SETTING_XPACK_SECURITY_ENABLED', 'MY_OPTS_EXTRA'],
      // A seventh: nginx's image pastes its filter into awk; postgres's trust opens a superuser.
      ...['NGINX_ENVSUBST_FILTER', 'ENVSUBST_FILTER', 'ODOO_ENVSUBST_FILTER', 'POSTGRES_HOST_AUTH_METHOD'],
    ];
    for (const name of steering)
      for (const spelt of [name, name.toLowerCase()]) {
        const refused = refusedEnvName(spelt);
        assert.ok(refused, `${spelt} is refused`);
        assert.ok(ruleMatches(refused.rule, spelt), `${spelt}: ${refused.rule} matches it`);
      }
    // The word with more after it is refused; the app's own names with such a word stay admitted.
    for (const name of [
      'APP_HOME_URL',
      'CACHE_DIR_TOKEN',
      'FILE_ENCRYPTION_KEY',
      'AGENT_API_KEY',
      'INIT_DB_PASSWORD',
    ])
      assert.equal(refusedEnvName(name)?.rule, undefined, name);
    assert.equal(refusedEnvName('JAVA_OPTS_APPEND')?.rule, '*OPTS_*');
    assert.match(
      refusedEnvName('JAVA_OPTS_APPEND')!.reason,
      /contains OPTS_ followed by more of the name, which by convention holds a program’s options or arguments, whatever follows/,
    );
  });
});

describe('the refused env names: the eighth review’s names (issue 37)', () => {
  it('every name that sends the pod’s identity elsewhere (a proxy, an SDK’s endpoint or credential source, the Kubernetes API) or that chooses trust is refused, in any case; the app’s own addresses and credentials stay admitted', () => {
    const identity = [
      'HTTP_PROXY',
      'HTTPS_PROXY',
      'ALL_PROXY',
      'NO_PROXY',
      'GRPC_PROXY',
      'FTP_PROXY',
      'AWS_ENDPOINT_URL',
      'AWS_ENDPOINT_URL_STS',
      'AWS_ENDPOINT_URL_SECRETS_MANAGER',
      'AWS_CONTAINER_CREDENTIALS_FULL_URI',
      'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI',
      'AWS_EC2_METADATA_SERVICE_ENDPOINT',
      'AWS_WEB_IDENTITY_TOKEN_FILE',
      'GOOGLE_APPLICATION_CREDENTIALS',
      'GCE_METADATA_HOST',
      'GCE_METADATA_IP',
      'AZURE_AUTHORITY_HOST',
      'IDENTITY_ENDPOINT',
      'MSI_ENDPOINT',
      'KUBERNETES_SERVICE_HOST',
      'KUBERNETES_SERVICE_PORT',
      'KUBERNETES_PORT_443_TCP_ADDR',
      'VAULT_ADDR',
      // The ninth review's.
      'KUBERNETES_MASTER',
      'SPRING_CLOUD_KUBERNETES_CLIENT_MASTERURL',
      'SPRING_CLOUD_VAULT_URI',
      'SPRING_CLOUD_VAULT_HOST',
      'SPRING_CLOUD_CONFIG_URI',
      'CONSUL_HTTP_ADDR',
      'NOMAD_ADDR',
      'AWS_CSM_ENABLED',
      'AWS_CSM_HOST',
      'AWS_CSM_PORT',
      'STORAGE_EMULATOR_HOST',
      'PUBSUB_EMULATOR_HOST',
      'FIRESTORE_EMULATOR_HOST',
      'HF_ENDPOINT',
    ];
    for (const name of identity)
      for (const spelt of [name, name.toLowerCase()]) {
        const refused = refusedEnvName(spelt);
        assert.ok(refused, `${spelt} is refused`);
        assert.ok(ruleMatches(refused.rule, spelt), `${spelt}: ${refused.rule} matches it`);
      }
    // A convention's word after a head that ends with the same letters (found by the property test).
    for (const name of ['OA1KRC_RC_35__0', 'BBIN_BIN_Y_A3_QP27', 'NNYJRC_RC_L4EF8MBB__', 'ACA_CA_0'])
      assert.ok(refusedEnvName(name), `${name} is refused`);
    for (const name of ['HTTPS_PROXY', 'AWS_ENDPOINT_URL_STS', 'KUBERNETES_SERVICE_HOST'])
      assert.match(refusedEnvName(name)!.consequence, /pod’s credentials/);
    for (const name of [
      'ELASTICSEARCH_SSL_VERIFICATIONMODE',
      'ELASTICSEARCH_SSL_CERTIFICATEAUTHORITIES',
      'SSL_CERTIFICATE_AUTHORITY',
      'TLS_VERIFY',
      'LDAP_VERIFYMODE',
      'SPRING_RABBITMQ_SSL_VALIDATESERVERCERTIFICATE',
      'ACME_TRUST_CERTIFICATES',
    ])
      assert.equal(refusedEnvName(name)?.family.risk, 'trust', name);
    assert.ok(refusedEnvName('LDAP_CAFILE'), 'a CA file is a path: refused as one');
    for (const name of [
      'DATABASE_URL',
      'PROXY_URL',
      'CORPORATE_PROXY_PASSWORD',
      'AWS_ACCESS_KEY_ID',
      'AWS_SECRET_ACCESS_KEY',
      'AWS_SESSION_TOKEN',
      'WEBHOOK_VERIFY_SECRET',
      'VERIFY_TOKEN',
      'KUBERNETES_TOKEN',
      // A credential of the app's own under a client's prefix: the writer chooses whom the app is.
      'VAULT_TOKEN',
      'CONSUL_HTTP_TOKEN',
      'SPRING_CLOUD_VAULT_TOKEN',
      'AWS_CONTAINER_AUTHORIZATION_TOKEN',
    ])
      assert.equal(refusedEnvName(name)?.rule, undefined, name);
  });
});

describe('the refused env names: what the readers themselves read', () => {
  it('every variable glibc’s loader drops from a setuid program as unsecure is refused', () => {
    const loaders: Partial<Record<string, string>> = {
      x64: '/lib64/ld-linux-x86-64.so.2',
      arm64: '/lib/ld-linux-aarch64.so.1',
    };
    const path = loaders[process.arch];
    assert.ok(
      path && existsSync(path),
      `glibc's loader ${path} is missing: apt-get install libc6 (a glibc system)`,
    );
    // unsecvars.h: the names, each ending in a NUL, the list in a NUL more.
    // Other string tables start alike: the unsecure list is the run that names LD_PRELOAD.
    const bytes = readFileSync(realpathSync(path)).toString('latin1');
    let list: string[] = [];
    for (let at = bytes.indexOf('GCONV_PATH\0'); at >= 0; at = bytes.indexOf('GCONV_PATH\0', at + 1)) {
      const run = bytes.slice(at, bytes.indexOf('\0\0', at)).split('\0');
      if (run.includes('LD_PRELOAD')) list = run;
    }
    assert.ok(list.includes('TMPDIR') && list.length >= 20, `glibc’s unsecure list: ${list.join(' ')}`);
    for (const name of list) assert.ok(refusedEnvName(name), `${name} is refused`);
  });

  it('every GIT_ name git’s programs contain is refused, and none ends as a credential the GIT_ rule admits', () => {
    const execPath = spawnSync('git', ['--exec-path'], { encoding: 'utf8' });
    assert.equal(execPath.status, 0, `git is missing: apt-get install git (${execPath.error?.message})`);
    const dir = execPath.stdout.trim();
    const found = new Set<string>();
    const read = new Set<string>();
    for (const file of readdirSync(dir)) {
      const path = join(dir, file);
      const stat = statSync(path);
      // Most of git's programs are links to one binary: each file once.
      if (!stat.isFile() || read.has(`${stat.dev}:${stat.ino}`)) continue;
      read.add(`${stat.dev}:${stat.ino}`);
      for (const m of readFileSync(path)
        .toString('latin1')
        .matchAll(/\bGIT_[A-Z0-9_]*[A-Z0-9]/g))
        found.add(m[0]);
    }
    assert.ok(
      found.has('GIT_SSH_COMMAND') && found.has('GIT_DIR') && found.size > 100,
      `${found.size} names`,
    );
    const git = REFUSED_ENV_FAMILIES.find((f) => f.prefixes.includes('GIT_'))!;
    for (const name of found) {
      assert.ok(!git.admittedEndings.some((e) => name.endsWith(e)), `git reads ${name}`);
      assert.equal(refusedEnvName(name)?.rule, 'GIT_*', name);
    }
  });
});
