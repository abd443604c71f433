import { WEBHOOK_SETTINGS } from '../config/settings.ts';
import { SERVE_EXIT } from './exit-codes.ts';
import { POD_TEMPLATE_PATHS } from './pod-templates.ts';

/**
 * The --help texts. The settings come from WEBHOOK_SETTINGS, the declarations the reference table is
 * generated from, so the two cannot disagree.
 */

const WIDTH = 100;
const PROGRAM = 'secret-agent-webhook';

/** `node dist/webhook.js --help`. */
export function programHelp(): string {
  const settings = Object.entries(WEBHOOK_SETTINGS).flatMap(([name, s]) => [
    `  ${name}${s.default === undefined || s.default === '' ? '' : ` (default: ${s.default})`}`,
    ...wrap(plain(s.doc), 6),
  ]);
  return [
    `Usage: ${PROGRAM}                 serve the mutating admission webhook (HTTPS)`,
    `       ${PROGRAM} render ...      inject into manifests offline, or check them (see render --help)`,
    `       ${PROGRAM} versions ...    which version each injected pod holds; wait for one (see versions --help)`,
    `       ${PROGRAM} --help | --version`,
    '',
    ...wrap(
      'Without arguments it serves POST /mutate, /healthz, /readyz and /metrics over HTTPS, configured by the settings below.',
      0,
    ),
    '',
    'Exit status:',
    ...Object.values(SERVE_EXIT).flatMap((e) => {
      const [first = '', ...rest] = wrap(e.meaning, 6);
      return [`  ${String(e.code).padEnd(4)}${first.trimStart()}`, ...rest];
    }),
    '',
    'Settings: environment variables, or the same names as keys of the YAML file WEBHOOK_CONFIG_FILE',
    '(the environment wins).',
    '',
    ...settings,
    '',
  ].join('\n');
}

/** `node dist/webhook.js render --help`. */
export function renderHelp(): string {
  const kinds = Object.keys(POD_TEMPLATE_PATHS);
  return [
    `Usage: ${PROGRAM} render -f FILE|- [-f FILE ...] [--check] [-n NAMESPACE]`,
    `         [--agent-image IMAGE] [--cluster-version MAJOR.MINOR]`,
    '',
    ...wrap(
      `Runs the webhook's own admission code over manifests, offline: every ${kinds.slice(0, -1).join(', ')} and ${kinds.at(-1)!} (the pod template of the workloads, also inside a kind: List) that opts in, with the label and the annotation secret-agent.io/inject: "true", is injected as the webhook would inject its pods. The manifests are printed in the input's format (YAML, or JSON when every input is JSON), in order, comments kept; everything else is printed unchanged.`,
      0,
    ),
    '',
    'Options:',
    '  -f, --file FILE|-          A manifest file (YAML stream or JSON object), - for stdin. Repeatable.',
    '  --check                    Print no manifests; only report what would be refused, and (as an',
    '                             error) a template with the annotation but not the label.',
    '  -n, --namespace NAMESPACE  For objects that name none (default: default).',
    '  --agent-image IMAGE        The agent image; wins over AGENT_IMAGE. One of them is required.',
    "  --cluster-version X.Y      The cluster's Kubernetes version: native sidecars from 1.29 on,",
    '                             classic before. Wins over NATIVE_SIDECARS.',
    '  -h, --help                 Print this help.',
    '',
    ...wrap(
      `Settings: the webhook's environment and WEBHOOK_CONFIG_FILE, as for the server (${PROGRAM} --help); the server's own (port, host, TLS, log level) are ignored. NATIVE_SIDECARS=auto without --cluster-version renders native sidecars, with a note on stderr (not with --check).`,
      0,
    ),
    '',
    'Output: manifests on stdout, nothing else. On stderr, one line per finding:',
    '  KIND/NAMESPACE/NAME: secret-agent cannot inject this pod: ANNOTATION: PROBLEM. Fix: FIX',
    '  KIND/NAMESPACE/NAME: warning: MESSAGE',
    'An object that would be refused is left out of the output. Values are never printed in findings.',
    '',
    'Exit status:',
    '  0  every object would be admitted',
    '  1  at least one would be refused (the others are still printed), or with --check lacks the label',
    '  2  bad arguments or settings, or input that cannot be read (nothing is printed)',
    '  70 a bug (please report it)',
    '',
    'Example (CI): kubectl kustomize overlays/prod | node dist/webhook.js render --check -f -',
    '',
  ].join('\n');
}

/** Docs are Markdown for docs/reference/; a terminal shows them without backticks. */
function plain(text: string): string {
  return text.replace(/`/g, '');
}

function wrap(text: string, indent: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (line !== '' && indent + line.length + 1 + word.length > WIDTH) {
      lines.push(' '.repeat(indent) + line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') lines.push(' '.repeat(indent) + line);
  return lines;
}
