import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ROOT } from '../support/run-agent.ts';

/** What the Deployment (deploy/base) gives the webhook: its memory limit and its Node options. */
export interface DeployedWebhook {
  /** The container's memory limit as written (e.g. 256Mi). */
  readonly memoryLimit: string;
  readonly memoryLimitMiB: number;
  /** NODE_OPTIONS of the webhook container ('' when it sets none). */
  readonly nodeOptions: string;
  /** The MutatingWebhookConfiguration's timeoutSeconds: how long the API server waits for an answer. */
  readonly timeoutSeconds: number;
  /** The shorter of the container's probes' timeoutSeconds (the kubelet's default, 1, when unset). */
  readonly probeTimeoutSeconds: number;
}

export function deployedWebhook(root = ROOT): DeployedWebhook {
  const docs = (file: string) =>
    parseAllDocuments(readFileSync(join(root, 'deploy/base', file), 'utf8')).map((d) => d.toJS() as unknown);
  const [deployment] = docs('deployment.yaml') as {
    spec: {
      template: {
        spec: {
          containers: {
            name: string;
            env: { name: string; value?: string }[];
            resources: { limits: { memory: string } };
            readinessProbe?: { timeoutSeconds?: number };
            livenessProbe?: { timeoutSeconds?: number };
          }[];
        };
      };
    };
  }[];
  const container = deployment!.spec.template.spec.containers.find((c) => c.name === 'webhook')!;
  const limit = /^(\d+)Mi$/.exec(container.resources.limits.memory);
  if (!limit) throw new Error(`the webhook's memory limit ${container.resources.limits.memory} is not in Mi`);
  const [config] = docs('mutatingwebhookconfiguration.yaml') as {
    webhooks: { timeoutSeconds: number }[];
  }[];
  return {
    memoryLimit: container.resources.limits.memory,
    memoryLimitMiB: Number(limit[1]),
    nodeOptions: container.env.find((e) => e.name === 'NODE_OPTIONS')?.value ?? '',
    timeoutSeconds: config!.webhooks[0]!.timeoutSeconds,
    probeTimeoutSeconds: Math.min(
      container.readinessProbe?.timeoutSeconds ?? 1,
      container.livenessProbe?.timeoutSeconds ?? 1,
    ),
  };
}
