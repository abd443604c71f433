import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { afterEach } from 'node:test';

/** The servers and client sockets a test opens; whatever a failed test left open is closed before the next. */
export interface OpenedInTest {
  readonly servers: Server[];
  readonly clients: Socket[];
}

/** Registers, in the calling test file, an afterEach that destroys every client and closes every server. */
export function closedAfterEach(): OpenedInTest {
  const opened: OpenedInTest = { servers: [], clients: [] };
  afterEach(async () => {
    for (const c of opened.clients.splice(0)) c.destroy();
    for (const s of opened.servers.splice(0)) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
  });
  return opened;
}
