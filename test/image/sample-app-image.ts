import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { builtImages } from './podman.ts';

/**
 * The sample app (sample-app.ts) on the images' runtime base: a real image, as a pod names one. Its
 * USER is the base's (65532) unless `user` is given: the uid a pod without securityContext runs as.
 */
export async function sampleAppImage(user?: number): Promise<string> {
  const { podman, manifest } = builtImages();
  const context = mkdtempSync(join(tmpdir(), 'secret-agent-sample-app-'));
  try {
    copyFileSync(new URL('./sample-app.ts', import.meta.url), join(context, 'sample-app.ts'));
    writeFileSync(
      join(context, 'Containerfile'),
      `FROM ${manifest.runtime.ref}\nCOPY sample-app.ts /app/sample-app.ts\n${user === undefined ? '' : `USER ${user}:${user}\n`}ENTRYPOINT ["/nodejs/bin/node", "/app/sample-app.ts"]\n`,
    );
    const ref = `localhost/secret-agent-test/sample-app:${user === undefined ? 'latest' : `user-${user}`}`;
    await podman.runAsync(['build', '--pull=never', '-q', '-t', ref, context]);
    return ref;
  } finally {
    rmSync(context, { recursive: true, force: true });
  }
}
