/**
 * Where the pods of a manifest are: a Pod is one, a workload holds the template its controller
 * creates them from. The webhook only ever sees the pods; `render` finds them in what users write.
 */

export type JsonObject = Record<string, unknown>;

export function isJsonObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The kinds `render` injects into, with their API group and the path of the pod (template) inside. */
export const POD_TEMPLATE_PATHS = {
  Pod: { group: '', path: [] },
  Deployment: { group: 'apps', path: ['spec', 'template'] },
  StatefulSet: { group: 'apps', path: ['spec', 'template'] },
  DaemonSet: { group: 'apps', path: ['spec', 'template'] },
  ReplicaSet: { group: 'apps', path: ['spec', 'template'] },
  Job: { group: 'batch', path: ['spec', 'template'] },
  CronJob: { group: 'batch', path: ['spec', 'jobTemplate', 'spec', 'template'] },
} as const satisfies Record<string, { group: string; path: readonly string[] }>;

export type WorkloadKind = keyof typeof POD_TEMPLATE_PATHS;

/** The group of `apiVersion` (`apps/v1` → apps, `v1` → the core group ''). */
function apiGroup(object: JsonObject): string | undefined {
  const { apiVersion } = object;
  if (typeof apiVersion !== 'string') return undefined;
  const slash = apiVersion.indexOf('/');
  return slash < 0 ? '' : apiVersion.slice(0, slash);
}

/**
 * The path of the object's pod template, [] for a Pod; undefined for every other kind. The group is
 * checked too: a custom resource may also be called Deployment.
 */
export function podTemplatePath(object: JsonObject): readonly string[] | undefined {
  const kind = object.kind;
  if (typeof kind !== 'string' || !Object.hasOwn(POD_TEMPLATE_PATHS, kind)) return undefined;
  const site = POD_TEMPLATE_PATHS[kind as WorkloadKind];
  return apiGroup(object) === site.group ? site.path : undefined;
}

/** The items of a core `kind: List` (what `kubectl get -o yaml` prints), else undefined. */
export function listItems(object: JsonObject): readonly unknown[] | undefined {
  if (object.kind !== 'List' || apiGroup(object) !== '') return undefined;
  return Array.isArray(object.items) ? object.items : undefined;
}

export function getIn(object: JsonObject, path: readonly string[]): unknown {
  let node: unknown = object;
  for (const key of path) node = isJsonObject(node) ? node[key] : undefined;
  return node;
}

/** A copy of `object` with `value` at `path` (which exists); untouched branches are shared. */
export function setIn(object: JsonObject, path: readonly string[], value: unknown): JsonObject {
  if (path.length === 0) return value as JsonObject;
  const [key, ...rest] = path as [string, ...string[]];
  return { ...object, [key]: setIn(object[key] as JsonObject, rest, value) };
}
