import { spawnSync } from 'node:child_process';

const INSTALL_HINT =
  'bubblewrap is needed to run the built bundles the way the images do (uid 65532, read-only root, no network). ' +
  'Install it with `apt-get update && apt-get install -y bubblewrap` (Debian package bubblewrap), as root.';

let checked: string | undefined;

const works = (args: string[], uid?: number) =>
  spawnSync('bwrap', args, {
    encoding: 'utf8',
    ...(uid === undefined ? {} : { uid, gid: uid }),
    timeout: 30_000,
  });

/**
 * Makes sure `bwrap` is installed (installing Debian's package once when running as root, as CI
 * does on a fresh machine) and that an unprivileged user may create the namespaces a sandbox
 * needs. Returns the command name; throws with the install hint otherwise. Cached per process.
 */
export function ensureBubblewrap(): string {
  if (checked) return checked;
  if (works(['--version']).status !== 0) {
    if (process.getuid?.() !== 0)
      throw new Error(`bwrap is not installed and this is not root. ${INSTALL_HINT}`);
    // Test files run in parallel processes: wait for another one's dpkg lock instead of failing.
    const apt = (args: string[]) =>
      spawnSync('apt-get', ['-o', 'DPkg::Lock::Timeout=180', ...args], {
        encoding: 'utf8',
        env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
        timeout: 300_000,
      });
    let install = apt(['install', '-y', '-q', 'bubblewrap']);
    if (install.status !== 0) {
      // A fresh machine's package lists may be missing or stale.
      apt(['update', '-q']);
      install = apt(['install', '-y', '-q', 'bubblewrap']);
    }
    if (install.status !== 0 || works(['--version']).status !== 0)
      throw new Error(`installing bubblewrap failed. ${INSTALL_HINT}\n${install.stderr ?? ''}`);
  }
  // The sandboxes run bwrap as the image's user (65532), so it needs unprivileged user namespaces.
  const probe = works(
    ['--unshare-all', '--uid', '65532', '--gid', '65532', '--ro-bind', '/', '/', '--cap-drop', 'ALL', 'true'],
    process.getuid?.() === 0 ? 65532 : undefined,
  );
  if (probe.status !== 0)
    throw new Error(
      `bwrap is installed but cannot create a sandbox (user namespaces may be disabled: sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces, or an AppArmor restriction): ${probe.stderr}`,
    );
  checked = 'bwrap';
  return checked;
}
