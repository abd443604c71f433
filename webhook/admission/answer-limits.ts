import { ConfigError } from '../../agent/contract/errors.ts';
import { WARNINGS_ANNOTATION } from '../../agent/contract/product-annotations.ts';
import { PREFIX } from '../annotations/annotation.ts';
import type { PodShape } from '../pod-shape.ts';

/**
 * How large an answer may be, whatever the pod. The patch grows with the pod: each container that
 * mounts the secrets gets a volume mount and an env var holding the mount path, and the agent's env
 * holds the pod's settings once per agent container; base64 adds a third. A 0.29 MB pod of 9,000
 * containers was a 27 MB answer, and two at once took the webhook past its memory limit (issue 30).
 * Each part of an answer is bounded here, so a request of up to 3 MiB (the most the API server sends)
 * never makes an answer over MAX_ANSWER_BYTES.
 */

/** The most an answer may hold: the AdmissionReview's JSON text, in bytes. The server may count against it. */
export const MAX_ANSWER_BYTES = 1024 * 1024;

/**
 * Containers and init containers of a pod the webhook injects. Kubernetes sets no limit, but real pods
 * have a handful: a service mesh, a log shipper and their init containers add a few more. 64 leaves room
 * many times over, and keeps their mounts and env vars to 64 × (2 × the mount path + about 190) bytes of
 * patch: 44 KiB at a 256-byte mount path, 140 KiB at 1 KiB.
 */
export const MAX_CONTAINERS = 64;

/**
 * The answer's warnings, as JSON. The API server passes on at most 4,096 characters of warnings in all
 * (k8s.io/apiserver's warning recorder; 4 bytes a character at most): what is past this reaches nobody.
 * The pod's `secret-agent.io/warnings` annotation, in the patch, keeps them all.
 */
export const MAX_WARNINGS_BYTES = 16 * 1024;

/** A refusal's message, in characters: MAX_SHOWN_PROBLEMS problems are a few KiB; at most 6 bytes each in JSON. */
export const MAX_REFUSAL_CHARS = 16 * 1024;

/**
 * An answer's bytes besides its patch, warnings and message: the apiVersion, a uid of up to 128
 * characters (6 bytes each at most, as JSON escapes them), the member names and punctuation.
 */
export const MAX_ENVELOPE_BYTES = 2 * 1024;

/**
 * The JSON Patch, before base64: what fits MAX_ANSWER_BYTES with the envelope and the warnings, base64's
 * third added (4 × ⌈770,048 / 3⌉ + 16 KiB + 2 KiB = 1,045,164 bytes). The largest pod admitted otherwise
 * (256 KiB of annotations, 64 containers, 1 KiB mount path, the env twice: init+sidecar without native
 * sidecars) renders 676 KB of patch when its templates are plain text; a pod only reaches this when
 * most of its templates' characters are ones JSON escapes (quotes, backslashes, newlines, control
 * characters), which no config file is.
 */
export const MAX_PATCH_BYTES = 752 * 1024;

/** The refusal of a pod with more containers than MAX_CONTAINERS, before any of its annotations is parsed. */
export function containerCountError(pod: PodShape): ConfigError | undefined {
  const count = pod.spec.containers.length + (pod.spec.initContainers?.length ?? 0);
  if (count <= MAX_CONTAINERS) return undefined;
  const containers = count.toLocaleString('en');
  return new ConfigError(
    'spec.containers',
    `the pod has ${containers} containers and init containers, over the webhook's limit of ${MAX_CONTAINERS}: each would get the secrets' volume mount and env var, and the answer would grow with them`,
    `inject pods of at most ${MAX_CONTAINERS} containers (split the work across pods), or leave this pod out (remove ${PREFIX}inject)`,
  );
}

/** The refusal of a patch over MAX_PATCH_BYTES; `patchBytes` is its JSON's UTF-8 length. */
export function patchSizeError(patchBytes: number, mountingContainers: number): ConfigError | undefined {
  if (patchBytes <= MAX_PATCH_BYTES) return undefined;
  const bytes = patchBytes.toLocaleString('en');
  return new ConfigError(
    `${PREFIX}*`,
    `the patch that injects the pod would be ${bytes} bytes, over the webhook's limit of ${MAX_PATCH_BYTES / 1024} KiB: the agent's env holds the pod's ${PREFIX} settings (templates included) once for each agent container, and each of the ${mountingContainers} containers that mount the secrets gets the mount path twice`,
    `make the templates smaller (template only the lines that hold secrets; quotes, backslashes and newlines count twice), shorten ${PREFIX}mount-path, or name fewer containers in ${PREFIX}containers`,
  );
}

/**
 * The warnings that fit MAX_WARNINGS_BYTES, in order; past the first that does not, a line that counts
 * the rest and says where they all are.
 */
export function boundWarnings(warnings: readonly string[]): readonly string[] {
  const more = (n: number) =>
    `secret-agent: ${n} more warning${n === 1 ? '' : 's'} not shown here; the pod's annotation ${WARNINGS_ANNOTATION} lists them all (kubectl describe pod).`;
  // `[` and `]`, and the line that counts the rest, with its comma: room kept for both.
  const reserve = 2 + jsonBytes(more(warnings.length)) + 1;
  let bytes = 0;
  for (let i = 0; i < warnings.length; i++) {
    bytes += jsonBytes(warnings[i]!) + (i > 0 ? 1 : 0);
    if (bytes + reserve > MAX_WARNINGS_BYTES)
      return i === warnings.length - 1 && bytes + 2 <= MAX_WARNINGS_BYTES
        ? warnings
        : [...warnings.slice(0, i), more(warnings.length - i)];
  }
  return warnings;
}

/** A refusal's message cut to MAX_REFUSAL_CHARS (it is redacted before: the cut hides, never shows). */
export function boundRefusal(message: string): string {
  return message.length > MAX_REFUSAL_CHARS ? `${message.slice(0, MAX_REFUSAL_CHARS - 1)}…` : message;
}

/** The UTF-8 bytes of `text` as a JSON string, quotes included. */
function jsonBytes(text: string): number {
  return Buffer.byteLength(JSON.stringify(text));
}
