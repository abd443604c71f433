import type { ServerResponse } from 'node:http';

/** A failure answered the way the Kubernetes API server does: a v1 Status object with the HTTP code. */
export function writeStatus(
  res: ServerResponse,
  code: number,
  reason: string,
  message: string,
  details?: Record<string, unknown>,
): void {
  const body = JSON.stringify({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    ...(details ? { details } : {}),
    code,
  });
  res.writeHead(code, { 'content-type': 'application/json' });
  res.end(body);
}
