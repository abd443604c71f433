// node-vault requires axios at load time, but agent/providers/vault/http.ts plugs its own transport
// into node-vault and axios is never called; bundling this instead saves 40-80 ms of agent start-up.
module.exports = {
  create() {
    throw new Error('axios is not bundled: the Vault provider plugs its own transport into node-vault');
  },
};
