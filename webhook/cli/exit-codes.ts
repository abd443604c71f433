/**
 * The exit codes of the server (`secret-agent-webhook` without arguments), declared once: serve.ts
 * exits with these, --help lists them, and docs/troubleshooting.md's table is generated from them.
 * (`render` has its own: webhook/cli/render-command.ts.)
 */
export const SERVE_EXIT = {
  stopped: { code: 0, meaning: 'stopped on SIGTERM or SIGINT, after answering the admissions in flight' },
  closeFailed: { code: 1, meaning: 'stopped on SIGTERM or SIGINT, but closing the server failed' },
  invalidConfiguration: {
    code: 2,
    meaning:
      'invalid configuration: a setting, or what it names at start (certificate files, the port, the Kubernetes API for self-managed TLS); each problem with its fix on stderr',
  },
  internal: {
    code: 70,
    meaning: 'an unexpected fault at start-up, a bug: name, message and stack on stderr (please report it)',
  },
  // sysexits' EX_NOPERM: an installation error, told apart from a setting (2) and a bug (70).
  missingPermission: {
    code: 77,
    meaning:
      'missing permission: the API server refused the webhook’s service account (403) a call self-managed TLS needs; stderr names the verb, the resource and the manifest under deploy/ that grants it',
  },
} as const satisfies Record<string, { readonly code: number; readonly meaning: string }>;
