/** A plain HTTP server on an ephemeral loopback port, for tests that script an upstream's answers. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface LocalServer {
  /** http://127.0.0.1:port, no trailing slash. */
  url: string;
  /** Stops listening and drops kept-alive connections. */
  close(): Promise<void>;
}

export async function listenLocally(handler: http.RequestListener): Promise<LocalServer> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
