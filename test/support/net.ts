// Ports for tests that need one chosen before the server that will use it starts.
import { createServer } from 'node:net';

/**
 * A TCP port on 127.0.0.1 that nothing listens on: taken from the OS, then released. Use it for a server
 * started later, or as an address that refuses connections.
 */
export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
