/**
 * Node's flag that keeps SIGUSR1 from opening its inspector. In a pod that shares its process
 * namespace, a container whose user may signal the agent's processes (the agent's uid, or root with
 * CAP_KILL) could otherwise make any Node program of the agent container listen on the pod's loopback
 * and run code in it (a fifth review did, in a small-sidecar run and in a `#!/nodejs/bin/node` exec
 * helper). Every Node process the container starts carries it: on the command lines the webhook renders
 * and the image's entrypoint, and in NODE_OPTIONS for the programs the agent starts itself (exec
 * helpers, ROTATION_COMMAND), whose command lines it does not write.
 */
export const DISABLE_SIGUSR1 = '--disable-sigusr1';
